"""The queue of runs that share a machine's devices: a run waits in state ``queued`` until the devices it needs
are free (engine.runs.devices), then starts by itself.

The queue is nothing but the run directories: a queued run's status.json says ``queued`` and when it joined
(``queued_at``, else ``created_at``). Whoever calls ``start_next_queued`` (the studio does, every second) starts,
in queue order, every queued run whose devices are free, under ``engine.runs.start_lock``, so two callers never
start a run twice or hand one GPU to two runs. Two runs on two GPUs go at once; on a CPU machine every run needs
the CPU, so one runs at a time.

A later run may overtake an earlier one that waits, but only on devices that no earlier waiting run could use:
a run for free GPU 1 need not idle behind one waiting for busy GPU 0, and a run waiting for two GPUs is never
starved by single-GPU runs that keep taking the one that is free. A run may carry a time limit (``time_limit_s``
in its status): ``enforce_time_limits`` stops it once it has trained that long, so one run cannot hold the machine
forever. Standard library and the config only.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine import runs
from engine.runs.devices import CPU, Device, Need, choose, could_use, held_by, held_devices, machine_gpus, run_need
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


@dataclass
class Turn:
    """A queued run's turn in one scheduling round: the devices it starts on now (None while it waits), or why
    it can never start here."""

    run_dir: Path
    devices: list[Device] | None = None
    error: str | None = None


def _need(run_dir: Path, gpus: tuple[int, ...]) -> Need | str:
    """What the run needs, or why that cannot be known (its config does not load)."""
    try:
        return run_need(run_dir, gpus)
    except (ValueError, OSError) as exc:
        return str(exc)


def schedule(workspace: Path, gpus: tuple[int, ...], last: Path | None = None) -> list[Turn]:
    """One round of the queue rule, without starting anything: every queued run in queue order (then ``last``,
    when it is not queued, as if it joined the line now) with the devices it would start on.

    The active runs' devices are taken; a run that starts takes its own; a run that waits keeps every device it
    could use from the runs behind it (so they overtake it only on devices it does not want).
    """
    taken = held_devices(workspace, gpus)
    line = queued_runs(workspace)
    if last is not None and Path(last).name not in {run_dir.name for run_dir in line}:
        line.append(Path(last))
    turns = []
    for run_dir in line:
        need = _need(run_dir, gpus)
        if isinstance(need, str):
            turns.append(Turn(run_dir, error=need))
            continue
        try:
            chosen = choose(need, gpus, taken)
        except ValueError as exc:  # DeviceError: devices this machine lacks
            turns.append(Turn(run_dir, error=str(exc)))
            continue
        taken |= set(chosen) if chosen is not None else could_use(need, gpus)
        turns.append(Turn(run_dir, chosen))
    return turns


def runs_ahead(run_dir: Path) -> int | None:
    """How many runs go before this queued run on its devices: the active runs that hold a device it could use,
    and the runs queued earlier that could use one too. None if not queued."""
    run_dir = Path(run_dir).resolve()
    if read_status(run_dir).state != QUEUED:
        return None
    workspace, gpus = workspace_of(run_dir), machine_gpus()
    need = _need(run_dir, gpus)
    mine = could_use(need, gpus) if isinstance(need, Need) else {CPU, *gpus}
    active = [held_by(read_status(other), gpus) for other in runs.active_runs(workspace)]
    line = [queued.resolve() for queued in queued_runs(workspace)]
    earlier = line[: line.index(run_dir)] if run_dir in line else line
    wanted = [_need(other, gpus) for other in earlier]
    wanted_devices = [could_use(other, gpus) if isinstance(other, Need) else {CPU, *gpus} for other in wanted]
    return sum(bool(devices & mine) for devices in [*active, *wanted_devices])


def _default_launcher(run_dir: Path, checkpoint: int | None) -> Any:
    return runs.start(run_dir, checkpoint, devices=read_status(run_dir).devices)


def _fail(run_dir: Path, reason: str) -> None:
    update_status(run_dir, state=FAILED, ended_at=time.time(), error=f"could not start: {reason}")


def _launch(turn: Turn, launcher: Launcher | None) -> bool:
    """Start a run whose turn it is on its devices (recorded first: engine.runs.start hands them to the process);
    a run that cannot start is marked failed with the reason. Returns whether it started."""
    if turn.error is not None:
        _fail(turn.run_dir, turn.error)
        return False
    checkpoint = read_status(turn.run_dir).resume_checkpoint
    # Before the process exists, so nothing else writes the status meanwhile; the time limit counts from here. Only
    # while it is queued: a script may have started it itself since the round was planned (not under the lock).
    written = update_status(
        turn.run_dir, when=lambda stored: stored.state == QUEUED, launched_at=time.time(), devices=turn.devices
    )
    if written.state != QUEUED:
        return False
    try:
        (launcher or _default_launcher)(turn.run_dir, checkpoint)
    except runs.RunAlreadyRunning:
        return False  # started by that script meanwhile: its start, not a failure of the run
    except (runs.RunError, OSError) as exc:
        _fail(turn.run_dir, str(exc))
        return False
    return True


def start_next_queued(workspace: Path, launcher: Launcher | None = None) -> list[Path]:
    """Start, in queue order, every queued run whose devices are free; returns those started (oldest first).

    ``launcher(run_dir, checkpoint)`` starts the process (default ``engine.runs.start`` on the devices the queue
    chose; a queued resume carries its checkpoint as ``resume_checkpoint``). A run that cannot start (its config,
    devices this machine lacks, a launcher error) is marked failed with the reason, and the queue moves on.
    """
    if not queued_runs(workspace):  # the common case, checked without the lock: reads the statuses only
        return []
    with runs.start_lock(Path(workspace)):
        turns = schedule(workspace, machine_gpus())
        return [turn.run_dir for turn in turns if (turn.devices or turn.error) and _launch(turn, launcher)]


def devices_free_for(run_dir: Path) -> list[Device] | None:
    """The devices the run would start on now under the queue rule (queued or not: then as if it joined the line
    at its end); None while it would wait. Raises ValueError when it can never start on this machine."""
    run_dir = Path(run_dir)
    turns = schedule(workspace_of(run_dir), machine_gpus(), last=run_dir)
    turn = next(turn for turn in turns if turn.run_dir.name == run_dir.name)
    if turn.error is not None:
        raise ValueError(turn.error)
    return turn.devices


def try_start(run_dir: Path, launcher: Launcher | None = None) -> bool:
    """Start this queued run now if the queue rule gives it its devices (the others stay as they are); False while
    it waits, or when it is no longer queued (another scheduler started it, or it failed to start: read its status).

    For a program that waits for its own run (a sweep's trial): create the run (``engine.runs.create_run``, it is
    queued) or ``enqueue`` it, then call this until it is True or the run is not queued any more. A studio's
    scheduler may start the run first; that is the same start.
    """
    run_dir = Path(run_dir)
    workspace = workspace_of(run_dir)
    with runs.start_lock(workspace):
        if read_status(run_dir).state != QUEUED:
            return False
        turns = schedule(workspace, machine_gpus())
        turn = next((turn for turn in turns if turn.run_dir.name == run_dir.name), None)
        return turn is not None and bool(turn.devices or turn.error) and _launch(turn, launcher)


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
