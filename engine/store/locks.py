"""Advisory file locks (``flock``) between the engine's processes and threads; the kernel drops a lock whose
holder dies. Standard library only."""

from __future__ import annotations

import contextlib
import fcntl
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

POLL_SECONDS = 0.005


@contextlib.contextmanager
def file_lock(path: Path, wait_s: float | None = None, unopenable_ok: bool = False) -> Iterator[bool]:
    """Hold an exclusive lock on ``path`` (created when missing) for the ``with`` block; yields whether it is held.

    ``wait_s`` None waits as long as it takes. Otherwise the lock is given up after ``wait_s`` seconds and the block
    runs without it: a holder that is frozen (SIGSTOP, a debugger) keeps its lock for good, and must not stop
    everyone else for good. A file that cannot be opened raises OSError, or with ``unopenable_ok`` (a read-only
    disk, where the guarded write fails anyway) runs the block unlocked.
    """
    try:
        handle = open(path, "a")  # noqa: SIM115 (held across the yield)
    except OSError:
        if not unopenable_ok:
            raise
        yield False
        return
    with handle:
        locked = _take(handle, wait_s)
        try:
            yield locked
        finally:
            if locked:
                fcntl.flock(handle, fcntl.LOCK_UN)


def _take(handle: IO[Any], wait_s: float | None) -> bool:
    """Take the exclusive flock on ``handle``: waiting as long as it takes without ``wait_s``, else trying for
    ``wait_s`` seconds; whether it was taken."""
    if wait_s is None:
        fcntl.flock(handle, fcntl.LOCK_EX)
        return True
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(POLL_SECONDS)
