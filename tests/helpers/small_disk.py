"""A small disk of its own for tests of a full disk: a 64 MB tmpfs (a real ENOSPC for every file written to it,
unlike a per-process RLIMIT_FSIZE), and a filler that leaves a chosen number of bytes free."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs of its own (a real ENOSPC for every file of the run, unlike a per-process RLIMIT_FSIZE)."""
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(mount_point)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {mounted.stderr.decode().strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def fill_disk(disk: Path, leave: int) -> Path:
    """Write a file that leaves ``leave`` bytes free on ``disk``; deleting it frees the space again."""
    filler = disk / "filler"
    with filler.open("wb") as handle:
        size = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize - leave
        os.posix_fallocate(handle.fileno(), 0, size)
    return filler
