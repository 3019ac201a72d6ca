"""A run in the foreground: ``python -m engine train`` and ``resume`` start the run as the studio does (a supervisor
in a session of its own, a warm fork where the machine has a fork server: engine.store.forks) and follow it from
the terminal: its log to stdout, Ctrl-C (or SIGTERM, or a closed terminal) to a Stop that saves a checkpoint, and
its exit code once it has ended. Standard library only.

Why not supervise in the CLI's own process, as a parent of the worker: that worker would pay the training imports
again (seconds of CPU, often more than a short run's training), and a run started from a terminal would be the one
kind a studio cannot take over after the terminal closes.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

from engine.runs.control import stop
from engine.runs.status import ended, status
from engine.store.rundir import FAILED, LOG_FILE, RunStatus

POLL_SECONDS = 0.1
FOLLOWED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# What each signal is to the person at the terminal, and the one the run is sent: the worker names it in its
# "saving a checkpoint" line. It catches SIGINT and SIGTERM, not SIGHUP.
SIGNAL_WORDS = {
    signal.SIGINT: "Ctrl-C (SIGINT)",
    signal.SIGTERM: "SIGTERM",
    signal.SIGHUP: "the terminal closed (SIGHUP)",
}
PASSED_ON = {signal.SIGINT: signal.SIGINT, signal.SIGTERM: signal.SIGTERM, signal.SIGHUP: signal.SIGTERM}


def log_offset(run_dir: Path) -> int:
    """Where the run's next output will start in train.log (its size now)."""
    try:
        return (Path(run_dir) / LOG_FILE).stat().st_size
    except FileNotFoundError:
        return 0


def follow(run_dir: Path, offset: int, echo: Callable[[bytes], None] | None = None) -> int:
    """Copy train.log from ``offset`` to stdout (or to ``echo``, a chunk at a time) until the run has ended; a
    signal stops the run (a checkpoint is saved). Returns the training process's exit code (1 for a run that
    failed without one)."""
    run_dir = Path(run_dir)
    echo = echo or _write
    previous = {signum: signal.signal(signum, _stopper(run_dir)) for signum in FOLLOWED_SIGNALS}
    try:
        (run_dir / LOG_FILE).touch()  # the supervisor may not have opened it yet
        with open(run_dir / LOG_FILE, "rb") as log:
            log.seek(offset)
            while not ended(run_dir):
                _copy(log, echo)
                time.sleep(POLL_SECONDS)
            _copy(log, echo)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return _exit_code(status(run_dir))


def _stopper(run_dir: Path) -> Callable[[int, object], None]:
    """The handler of a followed signal: say what arrived, once, and ask the run to stop with the same signal."""
    told: set[int] = set()

    def stop_run(signum: int, _frame: object) -> None:
        if signum not in told:
            told.add(signum)
            words = SIGNAL_WORDS.get(signum, signal.Signals(signum).name)
            line = f"{words}: stopping the run after this step; it saves a checkpoint to resume from\n"
            # Unbuffered: the handler may run while the loop is inside a write to sys.stdout's buffer, which
            # refuses a reentrant call. A terminal that is gone (SIGHUP) does not keep the stop from going out.
            with contextlib.suppress(OSError, ValueError):  # ValueError: a stdout without a file descriptor
                os.write(sys.stdout.fileno(), line.encode())
        stop(run_dir, PASSED_ON.get(signum, signal.SIGTERM))

    return stop_run


def _copy(log, echo: Callable[[bytes], None]) -> None:  # noqa: ANN001 - a binary file
    chunk = log.read()
    if chunk:
        echo(chunk)


def _write(chunk: bytes) -> None:
    sys.stdout.buffer.write(chunk)
    sys.stdout.buffer.flush()


def _exit_code(current: RunStatus) -> int:
    if current.exit_code is not None:
        return current.exit_code
    return 1 if current.state == FAILED else 0
