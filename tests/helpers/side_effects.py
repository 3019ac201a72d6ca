"""Helpers that show what a test wrote: the tree of a folder, and the repository's new files."""

from __future__ import annotations

import subprocess
from pathlib import Path

from engine.store.paths import PROJECT_ROOT

# Caches that tools write while tests run; never something the product writes.
_CACHES = ("__pycache__", ".pytest_cache", ".ruff_cache", ".venv/", "test-artifacts/")
# Source files appear while people work in the same checkout; the product never writes one.
_SOURCE = (".py", ".md", ".css", ".js", ".toml")


def tree(root: Path) -> dict[str, int]:
    """Every file and folder below ``root`` with its size (folders 0), to compare before and after."""
    return {str(path.relative_to(root)): path.stat().st_size if path.is_file() else 0 for path in root.rglob("*")}


def repo_new_files() -> set[str]:
    """Untracked and ignored entries of the repository (a new folder counts once): a stray write shows here.

    Files being edited (modified, tracked) and new source files are left out: they change for reasons of their
    own. Compare with ``<=``: entries may also disappear meanwhile.
    """
    out = subprocess.run(
        ["git", "status", "--porcelain", "--ignored=traditional", "--untracked-files=normal"],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    entries = {line[3:] for line in out.splitlines() if line[:2] in ("??", "!!")}
    return {entry for entry in entries if not entry.startswith(_CACHES) and not entry.endswith(_SOURCE)}
