"""Where things are: the project root, and local paths versus hub ids."""

from __future__ import annotations

from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent


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
