"""The run directory's file and folder names, and how a file in it is replaced: atomically (write a temporary
file, then rename), with a little disk space set aside so a run can still say in status.json that the disk is
full."""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path

CONFIG_FILE = "config.yaml"
STATUS_FILE = "status.json"
METRICS_FILE = "metrics.jsonl"
LOG_FILE = "train.log"
CHECKPOINTS_DIR = "checkpoints"
ADAPTER_DIR = "adapter"
MODEL_DIR = "model"
RESERVE_FILE = ".space-reserve"

# Errors that mean the disk (or this process's share of it) is full.
DISK_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
RESERVE_BYTES = 256 * 1024


def reserve_space(directory: Path) -> None:
    """Set aside a little disk space in ``directory`` for the final status writes of a run.

    When the disk fills up mid-run, the run must still be able to say so in status.json; a status write that
    meets a full disk gives this reserve back and tries again (see write_text_atomic). Best effort: a disk that
    is already full gets no reserve.
    """
    path = Path(directory) / RESERVE_FILE
    if path.is_file() and path.stat().st_size >= RESERVE_BYTES:
        return
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            os.posix_fallocate(fd, 0, RESERVE_BYTES)  # real blocks: a sparse file would free nothing
        finally:
            os.close(fd)
    except OSError:
        path.unlink(missing_ok=True)


def release_reserve(directory: Path) -> bool:
    """Give the reserved space of ``directory`` back to the disk; False if there was none."""
    try:
        (Path(directory) / RESERVE_FILE).unlink()
    except FileNotFoundError:
        return False
    return True


def write_text_atomic(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` so that readers see either the old or the new content, never a mix.

    On a full disk the directory's reserve (see reserve_space) is given back and the write tried once more.
    """
    try:
        _write_text_atomic(path, text)
    except OSError as exc:
        if exc.errno not in DISK_FULL_ERRNOS or not release_reserve(path.parent):
            raise
        _write_text_atomic(path, text)


def _write_text_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
