"""Where things are: the project root, local paths against hub ids, and paths confined to allowed folders.

``confine`` is the rule the studio applies to every path a browser can choose: whoever reaches the page must
not read ``/etc/passwd`` as a dataset or load a model from another user's home. The CLI does not use it (its
paths are the user's own). Symlinks are resolved before the check, so a link inside an allowed folder that
points outside is refused too.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]

# A hub id: "name" or "org/name", each part up to 96 letters, digits, - _ . and starting with a letter or digit.
_HUB_ID = re.compile(r"^(?:[A-Za-z0-9][\w.-]{0,95}/)?[A-Za-z0-9][\w.-]{0,95}$")


class PathNotAllowed(ValueError):
    """A path outside every allowed folder; the message says which folders are allowed."""


def is_hub_id(text: str) -> bool:
    """Whether ``text`` reads as a hub id (``name`` or ``org/name``) rather than a file system path."""
    return bool(_HUB_ID.match(text)) and ".." not in text


def find_local_path(name: str) -> Path | None:
    """A local file or directory for ``name``: relative to the current directory first, then to the project.

    The project fallback lets the bundled ``assets/...`` paths of presets work from any directory.
    """
    try:
        candidate = Path(name).expanduser()
        if candidate.exists():
            return candidate.resolve()
        if not candidate.is_absolute() and (PROJECT_ROOT / candidate).exists():
            return (PROJECT_ROOT / candidate).resolve()
    except (OSError, RuntimeError, ValueError):
        # A name too long for the file system, a NUL byte, "~user" of an unknown user: no such local path.
        return None
    return None


def resolve_model_source(name_or_path: str) -> str:
    """A local model directory when one exists, else the name unchanged (a hub id)."""
    local = find_local_path(name_or_path)
    return str(local) if local is not None else name_or_path


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
