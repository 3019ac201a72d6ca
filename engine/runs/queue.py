"""A first-come, first-served queue of runs that share one machine: a run waits in state ``queued`` until no
other run is active, then the oldest queued run starts.

The queue is nothing but the run directories: a queued run's status.json says ``queued`` and when it joined
(``queued_at``, else ``created_at``). Whoever calls ``start_next_queued`` (the studio's demo mode does, every
second) starts the next run under ``engine.runs.start_lock``, so two callers never start two runs. A run may
carry a time limit (``time_limit_s`` in its status): ``enforce_time_limits`` stops it once it has trained that
long, so one run cannot hold the machine forever. Standard library only.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine import runs
from engine.store.rundir import (
    ABORTED,
    FAILED,
    QUEUED,
    STOPPED,
    TRAINING_STATES,
    RunStatus,
    next_segment,
    read_status,
    update_status,
)
from engine.store.workspace import workspace_of

# A stopped run that is still going this long after its time limit is killed (it saves no checkpoint then) and
# reads ``aborted`` with LIMIT_ERROR as the reason: the studio ended it, it did not crash.
STOP_GRACE_SECONDS = 60.0
LIMIT_ERROR = "the run reached its time limit ({minutes:g} min) and was ended"

Launcher = Callable[[Path, "int | None"], Any]


def _queued_key(item: tuple[Path, RunStatus]) -> tuple[float, str]:
    run_dir, current = item
    return (current.queued_at or current.created_at or 0.0, run_dir.name)


def queued_runs(workspace: Path) -> list[Path]:
    """The workspace's queued runs, oldest first (by when they joined the queue)."""
    found = [(run_dir, read_status(run_dir)) for run_dir in runs.run_dirs(workspace)]
    return [run_dir for run_dir, _ in sorted((i for i in found if i[1].state == QUEUED), key=_queued_key)]


def runs_ahead(run_dir: Path) -> int | None:
    """How many runs go before this queued run: the active ones and those queued earlier. None if not queued."""
    run_dir = Path(run_dir).resolve()
    if read_status(run_dir).state != QUEUED:
        return None
    workspace = workspace_of(run_dir)
    line = [queued.resolve() for queued in queued_runs(workspace)]
    earlier = line.index(run_dir) if run_dir in line else len(line)
    return len(runs.active_runs(workspace)) + earlier


def _default_launcher(run_dir: Path, checkpoint: int | None) -> Any:
    return runs.start(run_dir, checkpoint)


def start_next_queued(workspace: Path, launcher: Launcher | None = None) -> Path | None:
    """Start the oldest queued run when no run of the workspace is active; returns it (None when nothing started).

    ``launcher(run_dir, checkpoint)`` starts the process (default ``engine.runs.start``; a queued resume carries
    its checkpoint as ``resume_checkpoint``). A run that cannot start is marked failed with the reason, and the
    next caller moves on to the run after it.
    """
    if not queued_runs(workspace):  # the common case, checked without the lock: reads the statuses only
        return None
    with runs.start_lock(Path(workspace)):
        line = queued_runs(workspace)
        if not line or runs.active_runs(workspace):
            return None
        run_dir = line[0]
        checkpoint = read_status(run_dir).resume_checkpoint
        # Before the process exists, so nothing else writes the status meanwhile; the time limit counts from here.
        update_status(run_dir, launched_at=time.time())
        try:
            (launcher or _default_launcher)(run_dir, checkpoint)
        except (runs.RunError, OSError) as exc:
            update_status(run_dir, state=FAILED, ended_at=time.time(), error=f"could not start: {exc}")
            return None
    return run_dir


def enqueue(run_dir: Path, **fields: Any) -> RunStatus:
    """Put an existing, idle run back in the queue (``fields`` such as ``resume_checkpoint`` go to its status)."""
    current = runs.status(run_dir)
    if current.is_open:
        raise runs.RunError(f"{current.name or Path(run_dir).name} is already {current.state}")
    return update_status(
        run_dir, state=QUEUED, queued_at=time.time(), cancelled=None, error=None, **next_segment(current), **fields
    )


def cancel_queued(run_dir: Path) -> bool:
    """Take a queued run out of the queue (state ``stopped``, ``cancelled`` true); False if it was not queued.

    Under the start lock, so the scheduler cannot start the run while it is being cancelled.
    """
    run_dir = Path(run_dir)
    with runs.start_lock(workspace_of(run_dir)):
        if read_status(run_dir).state != QUEUED:
            return False
        update_status(run_dir, state=STOPPED, cancelled=True, ended_at=time.time(), resume_checkpoint=None)
    return True


def over_time(current: RunStatus, now: float | None = None) -> float | None:
    """Seconds a run has trained past its time limit (``time_limit_s`` from ``launched_at``), or None if within."""
    limit, launched = current.time_limit_s, current.launched_at
    if not limit or not launched:
        return None
    over = (now or time.time()) - launched - limit
    return over if over >= 0 else None


def limit_reached(current: RunStatus) -> bool:
    """Whether a finished run ended because of its time limit: stopped by it, or aborted after the grace period
    (read from its status; nothing extra is written). A crash is a crash even past the limit."""
    if current.state not in (STOPPED, ABORTED) or current.cancelled:
        return False
    return over_time(current, current.ended_at or time.time()) is not None


def enforce_time_limits(workspace: Path, now: float | None = None) -> list[Path]:
    """Stop every active run past its time limit (it saves a checkpoint); kill one still going after a grace
    period. Returns the runs acted on. Asking again is harmless: a stop request only sets a flag."""
    acted = []
    for run_dir in runs.active_runs(workspace):
        current = runs.status(run_dir)
        over = over_time(current, now)
        if over is None:
            continue
        reason = LIMIT_ERROR.format(minutes=current.time_limit_s / 60)
        killed = over > STOP_GRACE_SECONDS and runs.abort(run_dir, reason=reason)
        if not killed and current.state in TRAINING_STATES:
            runs.stop(run_dir)
        acted.append(run_dir)
    return acted
