"""A run in the foreground: ``python -m engine train`` and ``resume`` start the run as the studio does (a supervisor
in a session of its own, a warm fork where the machine has a fork server: engine.store.forks) and follow it from
the terminal: its log to stdout, Ctrl-C (or SIGTERM, or a closed terminal) to a Stop that saves a checkpoint, and
its exit code once it has ended. Standard library only.

Why not supervise in the CLI's own process, as a parent of the worker: that worker would pay the training imports
again (seconds of CPU, often more than a short run's training), and a run started from a terminal would be the one
kind a studio cannot take over after the terminal closes.
"""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

from engine.runs.control import stop
from engine.runs.status import ended, status
from engine.store.rundir import FAILED, LOG_FILE, RunStatus

POLL_SECONDS = 0.1
FOLLOWED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def log_offset(run_dir: Path) -> int:
    """Where the run's next output will start in train.log (its size now)."""
    try:
        return (Path(run_dir) / LOG_FILE).stat().st_size
    except FileNotFoundError:
        return 0


def follow(run_dir: Path, offset: int) -> int:
    """Copy train.log from ``offset`` to stdout until the run has ended; a signal stops the run (a checkpoint is
    saved). Returns the training process's exit code (1 for a run that failed without one)."""
    run_dir = Path(run_dir)
    previous = {signum: signal.signal(signum, lambda *_: stop(run_dir)) for signum in FOLLOWED_SIGNALS}
    try:
        (run_dir / LOG_FILE).touch()  # the supervisor may not have opened it yet
        with open(run_dir / LOG_FILE, "rb") as log:
            log.seek(offset)
            while not ended(run_dir):
                _copy(log)
                time.sleep(POLL_SECONDS)
            _copy(log)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return _exit_code(status(run_dir))


def _copy(log) -> None:  # noqa: ANN001 - a binary file
    chunk = log.read()
    if chunk:
        sys.stdout.buffer.write(chunk)
        sys.stdout.buffer.flush()


def _exit_code(current: RunStatus) -> int:
    if current.exit_code is not None:
        return current.exit_code
    return 1 if current.state == FAILED else 0
