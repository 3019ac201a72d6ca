"""The training worker of a forked supervisor (engine.runs.supervisor, engine.store.forks): the same work as
``python -m engine worker``, in a process that inherited the training libraries instead of importing them."""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
from pathlib import Path
from typing import NoReturn

from engine.training.trackers import writers_open


def train_forked(run_dir: Path, checkpoint: int | None) -> int:
    """Train as ``python -m engine worker`` does, in a process forked from a warm supervisor (engine.runs.supervisor)
    whose environment is already the worker's; returns the exit code. Its libraries were imported by the fork
    server, before the environment named the run's thread count: it is set here."""
    from engine.training.stopping import StopRequest

    stop = StopRequest()
    stop.install()
    import torch

    torch.set_num_threads(max(1, int(os.environ.get("OMP_NUM_THREADS") or 1)))
    from engine.training.recipe import run

    return run(run_dir, checkpoint, stop)


def exit_forked(code: int) -> NoReturn:
    """End a forked process with ``code`` without returning into its parent's code: the exit hooks run first when a
    tracker's writer must flush in them (engine.training.trackers.writers_open), as at a normal interpreter exit."""
    with contextlib.suppress(BaseException):
        if writers_open():
            atexit._run_exitfuncs()
    with contextlib.suppress(BaseException):
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)
