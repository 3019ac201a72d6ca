"""Server paths as a visitor of the demo reads them: names relative to what the visitor chose, never the layout of
the machine.

Messages the engine writes name files by their full path (``/srv/app/workspace/visitors/<digest>/datasets/mine.jsonl
is not valid JSON ...``), which is what a person on their own machine wants. A stranger on a public demo must read
none of them, so in demo mode the studio passes what it shows through ``visible_paths``: each absolute path that
starts in a folder it knows is cut to what the visitor knows it by.

| folder | a path in it reads | the folder itself |
| --- | --- | --- |
| a visitor's uploads, ``WORKSPACE/visitors/<owner>/datasets`` | the file's name, ``mine.jsonl`` | ``your uploads`` |
| a visitor's export, ``WORKSPACE/exports/visitors/<owner>`` | ``workspace/exports/...`` | ``workspace/exports`` |
| the workspace | ``workspace/runs/...`` | ``workspace`` |
| Gradio's uploads and cache (``GRADIO_TEMP_DIR``) | the file's name (its own folder dropped) | ``the upload cache`` |
| the system's temp dir | the file's name (a ``mkdtemp`` folder dropped) | ``temp`` |
| the project (``assets/datasets/...``) | relative to it | ``.`` |
| Python's library folders | ``site-packages/...`` | ``site-packages`` |
| the home folder, the working directory | ``~/...``, relative | ``~``, ``.`` |

Pure text in, text out: the folders are given (``server_roots`` reads those of this machine), the longest is tried
first, and a folder matches on path-component boundaries only, so ``/srv/workspace-old`` is not cut as the workspace
``/srv/workspace``.
"""

from __future__ import annotations

import functools
import os
import re
import sysconfig
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from engine.api import DATASETS_DIR, PROJECT_ROOT, VISITORS_DIR, visitor_exports_dir
from studio.path_guard import gradio_upload_dir

T = TypeVar("T")
OWNER_PATTERN = r"[0-9a-f]{32}"  # a visitor's owner tag (studio.demo.ownership.owner_tag) names their folder
_NAME = r"[\w~+@%-]"  # a character that continues a file name ("." too, when a name character follows it)
# After a folder: anything but more of its last name (``/srv/ws`` is no folder of ``/srv/ws-old`` or ``/srv/ws.bak``,
# but is one in "in /srv/ws." and "`/srv/ws`").
_END = rf"(?!{_NAME}|\.{_NAME})"
_SEGMENT = r"[^\s/'\"`<>&]+/"  # one folder of a path, with its separator


@dataclass(frozen=True)
class Root:
    """A folder of the server and how paths in it read.

    ``pattern`` is a regular expression of the folder's absolute path (no trailing separator); ``name`` is what the
    folder itself reads as; ``inside`` replaces ``folder/`` in front of a path in it ("" keeps just the rest);
    ``skip`` drops that many more folders below it when a file name follows (the per-upload folders of temp dirs);
    ``weight`` orders the roots, longest first, so the most specific folder wins.
    """

    pattern: str
    name: str
    inside: str
    weight: int
    skip: int = 0


def folder_root(path: str | Path, name: str, inside: str, skip: int = 0) -> Root:
    """The root of one folder, matched by its exact absolute path."""
    text = str(path).rstrip("/") or "/"
    return Root(re.escape(text), name, inside, len(text), skip)


def uploads_root(workspace: str | Path) -> Root:
    """Every visitor's upload folder of ``workspace``: a file in it reads as its name."""
    base = str(workspace).rstrip("/")
    pattern = re.escape(f"{base}/{VISITORS_DIR}/") + OWNER_PATTERN + re.escape(f"/{DATASETS_DIR}")
    return Root(pattern, "your uploads", "", len(f"{base}/{VISITORS_DIR}/") + 32 + len(f"/{DATASETS_DIR}"))


def visitor_exports_root(workspace: str | Path) -> Root:
    """Every visitor's export folder of ``workspace``: a path in it reads as one in ``workspace/exports/``."""
    folder = f"{visitor_exports_dir(Path(workspace), '')}/"  # an empty owner: the folder that holds them all
    return Root(re.escape(folder) + OWNER_PATTERN, "workspace/exports", "workspace/exports/", len(folder) + 32)


def visible_paths(text: str, roots: Sequence[Root]) -> str:
    """``text`` with every absolute path in one of ``roots`` cut to what its root says (see the module's table);
    paths elsewhere stay as they are."""
    if not text or not roots or "/" not in text:
        return text
    pattern, ordered = _compiled(tuple(roots))
    return pattern.sub(lambda match: _replace(match, ordered), text)


def shown_value(value: T, roots: Sequence[Root]) -> T:
    """``visible_paths`` applied to the text in ``value``: a string (a subclass such as markup.Html stays one), or
    the items of a list or tuple and the values of a dict (a ``gr.update``), recursively; anything else as it is."""
    if isinstance(value, str):
        shown = visible_paths(value, roots)
        return value if shown == value else type(value)(shown)  # type: ignore[return-value]
    if isinstance(value, (list, tuple)):
        return type(value)(shown_value(item, roots) for item in value)  # type: ignore[return-value]
    if isinstance(value, dict):
        return {key: shown_value(item, roots) for key, item in value.items()}  # type: ignore[return-value]
    return value


def server_roots(
    workspace: str | Path | None,
    *,
    project: str | Path = PROJECT_ROOT,
    gradio: str | Path | None = None,
    temp: str | Path | None = None,
    home: str | Path | None = None,
    python: Iterable[str | Path] | None = None,
    cwd: str | Path | None = None,
) -> tuple[Root, ...]:
    """The folders of this machine a page may otherwise name (each left out argument: this machine's own), each
    both as given and with symlinks resolved; a folder that is the file system's root is left out (it would cut
    every path)."""
    candidates: list[tuple[Path, str, str, int]] = []
    visitor_roots: list[Root] = []
    if workspace is not None:
        # An export's path is always the resolved one (engine.store.workspace.exports_dir): one root for both spellings.
        visitor_roots = [*(uploads_root(path) for path in _spellings(workspace)), visitor_exports_root(workspace)]
        candidates.append((Path(workspace), "workspace", "workspace/", 0))
    candidates += [
        (Path(gradio or gradio_upload_dir()), "the upload cache", "", 1),
        (Path(temp or tempfile.gettempdir()), "temp", "", 1),
        (Path(project), ".", "", 0),
    ]
    for library in python if python is not None else _python_dirs():
        candidates.append((Path(library), Path(library).name, f"{Path(library).name}/", 0))
    candidates += [(folder, "~", "~/", 0) for folder in _optional(home, Path.home)]
    candidates += [(folder, ".", "", 0) for folder in _optional(cwd, Path.cwd)]
    roots, seen = list(visitor_roots), set()
    for folder, name, inside, skip in candidates:  # the first named wins: the workspace over the project it lies in
        for spelling in _spellings(folder):
            if spelling not in seen and len(Path(spelling).parts) > 1:
                seen.add(spelling)
                roots.append(folder_root(spelling, name, inside, skip))
    return tuple(roots)


def _spellings(folder: str | Path) -> list[str]:
    """A folder's absolute path as given and with symlinks resolved (one entry when they agree)."""
    given = os.path.abspath(os.path.expanduser(str(folder)))
    try:
        real = str(Path(given).resolve())
    except (OSError, RuntimeError):
        real = given
    return list(dict.fromkeys([given, real]))


def _optional(folder: str | Path | None, default: Any) -> list[Path]:
    """``folder``, or this machine's (``default()``) when none is given; [] when it cannot be told."""
    if folder is not None:
        return [Path(folder)]
    try:
        return [Path(default())]
    except (OSError, RuntimeError, KeyError):  # no home (no HOME, no passwd entry), a working dir that was removed
        return []


def _python_dirs() -> list[Path]:
    """Python's library folders: tracebacks in a run's log name files there."""
    paths = sysconfig.get_paths()
    return [Path(paths[key]) for key in ("purelib", "platlib", "stdlib", "platstdlib") if paths.get(key)]


@functools.lru_cache(maxsize=32)
def _compiled(roots: tuple[Root, ...]) -> tuple[re.Pattern[str], tuple[Root, ...]]:
    """One pattern for all roots, longest first; group ``r<i>`` is root i as a folder, ``f<i>`` as a path in it."""
    ordered = tuple(sorted(roots, key=lambda root: -root.weight))
    alternatives = []
    for number, root in enumerate(ordered):
        below = f"(?:{_SEGMENT}){{0,{root.skip}}}(?=[.]?{_NAME})"
        alternatives.append(f"(?P<f{number}>{root.pattern}/{below})|(?P<r{number}>{root.pattern}){_END}")
    # A path starts the text or follows something that is not part of a name or path (a space, a quote, "=" ...).
    return re.compile(rf"(?<![\w./~-])(?:{'|'.join(alternatives)})"), ordered


def _replace(match: re.Match[str], ordered: tuple[Root, ...]) -> str:
    """What the matched folder, or the start of a path in it, reads as."""
    groups = match.groupdict()
    for number, root in enumerate(ordered):
        if groups[f"f{number}"] is not None:
            return root.inside
        if groups[f"r{number}"] is not None:
            return root.name
    return match.group()
