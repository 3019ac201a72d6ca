"""How busy the machine is, for tests whose waits say that something happens, not how fast."""

from __future__ import annotations

import os


def load_factor() -> float:
    """How many times slower than idle this machine is likely to be now: the runnable processes per core over the
    last minute (1 when idle, 2 with a busy program on every core beside the test), between 1 and 4."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return min(4.0, max(1.0, os.getloadavg()[0] / cores))
