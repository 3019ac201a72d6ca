"""Confine paths to allowed folders: the rule the studio applies to every path a browser can choose.

A browser is not the user's own shell: whoever reaches the page must not read ``/etc/passwd`` as a dataset
or load a model from another user's home. The CLI does not use this (its paths are the user's own).
Symlinks are resolved before the check, so a link inside the workspace that points outside is refused too.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

# A hub id: "name" or "org/name" (letters, digits, - _ .), never a path that starts with / . or ~.
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?$")


class PathNotAllowed(ValueError):
    """A path outside every allowed folder; the message says which folders are allowed."""


def is_hub_id(text: str) -> bool:
    """Whether ``text`` reads as a hub id (org/name) rather than a file system path."""
    return bool(_HUB_ID.match(text)) and ".." not in text


def _real(path: str | Path) -> Path:
    """The absolute path with symlinks resolved; PathNotAllowed for names no file system accepts."""
    try:
        return Path(path).expanduser().resolve()
    except (OSError, RuntimeError, ValueError) as exc:
        raise PathNotAllowed(f"{str(path)[:200]!r} is not a usable path ({exc})") from None


def confine(path: str | Path, roots: Iterable[str | Path]) -> Path:
    """The resolved ``path`` if it lies in one of ``roots`` (symlinks followed), else PathNotAllowed.

    A relative path is taken relative to the current directory, as ``open`` would.
    """
    real_roots = [_real(root) for root in roots]
    real = _real(path)
    if any(real.is_relative_to(root) for root in real_roots):
        return real
    listed = ", ".join(str(root) for root in real_roots) or "none"
    raise PathNotAllowed(f"{str(path)[:200]} is outside the folders the studio may read (allowed: {listed})")


def env_roots(variable: str) -> list[Path]:
    """Folders listed in an environment variable, separated like PATH (``os.pathsep``); empty ones skipped."""
    return [Path(item).expanduser() for item in os.environ.get(variable, "").split(os.pathsep) if item.strip()]
