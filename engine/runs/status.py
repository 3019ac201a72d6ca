"""A run's status, reconciled against its processes, and the run list. Standard library and the config only.

``status.json`` is written by the worker and the supervisor; a reader never trusts it blindly: a status that
says a run is going while none of its processes lives is a crashed run, and is recorded as failed.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

from engine.store.hosts import HEARTBEAT_LEASE_S, heartbeat_fresh, is_remote
from engine.store.processes import is_alive, pid_alive
from engine.store.rundir import (
    ACTIVE_STATES,
    CONFIG_FILE,
    FAILED,
    RunStatus,
    checkpoint_steps,
    iter_metrics,
    log_tail,
    read_status,
    update_status,
)
from engine.store.rundir import read_metrics as _read_metrics
from engine.store.workspace import runs_dir


def status(run_dir: Path) -> RunStatus:
    """The run's status, reconciled against its processes.

    A status that says starting / running / stopping while neither the supervisor nor the worker lives (for a run
    on another host: whose heartbeat there has stopped) is a crashed run: it is recorded as failed. Failed runs
    carry the tail of train.log.
    """
    run_dir = Path(run_dir)
    current = read_status(run_dir)
    state = current.state
    if state in ACTIVE_STATES:
        remote = is_remote(current.host)
        if remote:
            # Its pids are another machine's (a trial on a cluster node): they may name anything here. The process
            # running it there beats a heartbeat in the run directory instead (engine.store.hosts).
            alive = heartbeat_fresh(run_dir)
        else:
            alive = is_alive(current.supervisor_pid) or is_alive(current.pid)
        if not alive and (remote or not _just_started(current)):
            code = current.exit_code
            why = f"exit code {code}" if code is not None else "exit code unknown"
            if remote:
                why += f"; no heartbeat from {current.host} for {HEARTBEAT_LEASE_S:g} s"
            # It ended when it was last heard from, not when a reader noticed (perhaps days later): the run's
            # elapsed time must not grow while nothing ran.
            ended = max(current.updated_at or time.time(), current.started_at or 0.0)
            current = _record(
                run_dir, current, state=FAILED, ended_at=ended, error=f"the training process is gone ({why})"
            )
    if current.state == FAILED:
        current.log_tail = log_tail(run_dir)
    current.checkpoints = checkpoint_steps(run_dir)
    current.run_dir = str(run_dir)
    return current


def _record(run_dir: Path, current: RunStatus, **changes: Any) -> RunStatus:
    """Write a reconciled status, unless a writer changed the state or the processes meanwhile (Abort writing
    ``aborted``, a resume starting the run): then the stored status stands. A reader on a full (or read-only)
    disk still gets the reconciled view."""

    def unchanged(stored: RunStatus) -> bool:
        return (stored.state, stored.supervisor_pid, stored.pid) == (current.state, current.supervisor_pid, current.pid)

    try:
        return update_status(run_dir, when=unchanged, **changes)
    except OSError as exc:
        changes["error"] = f"{changes.get('error')}; the status could not be saved: {exc.strerror or exc}"
        return replace(current, **changes)


def _just_started(current: RunStatus) -> bool:
    """A status written a moment ago may not have its pid yet; give the supervisor a grace period."""
    return current.supervisor_pid is None and time.time() - (current.updated_at or 0) < 5


def wait(run_dir: Path, timeout: float | None = None, poll: float = 0.2) -> RunStatus:
    """Block until the run has ended (see ``ended``), or ``timeout`` seconds have passed (None: no limit); returns
    the status, which is not final when the timeout ended the wait."""
    deadline = time.time() + (math.inf if timeout is None else timeout)
    while True:
        current = status(run_dir)
        if ended(run_dir, current):
            # Read again: the supervisor may have recorded the exit code between ``current`` and ``ended``'s read.
            return status(run_dir)
        if time.time() > deadline:
            return current
        time.sleep(poll)


def ended(run_dir: Path, current: RunStatus | None = None) -> bool:
    """Whether the run is in a final state and its supervisor has recorded the exit code (or is gone without doing
    so): the worker writes the final state before it exits, and its supervisor records how it exited after that."""
    current = current or status(run_dir)
    if not current.is_final:
        return False
    stored = read_status(run_dir)
    if stored.exit_code is not None or is_remote(stored.host):  # another machine's pid says nothing here
        return True
    return not pid_alive(stored.supervisor_pid)


def read_metrics(run_dir: Path, offset: int = 0) -> tuple[list[dict[str, Any]], int]:
    """Metric events written since byte ``offset``, and the next offset (see engine.store.rundir.read_metrics)."""
    return _read_metrics(Path(run_dir), offset)


Summary = TypeVar("Summary", bound="RunSummary")


@dataclass(frozen=True)
class RunSummary:
    """One line of the run list."""

    run_id: str
    run_dir: Path
    name: str
    state: str
    step: int
    max_steps: int
    last_loss: float | None
    best_loss: float | None
    created_at: float | None
    started_at: float | None  # the current segment's start (the latest resume)
    first_started_at: float | None  # the run's first start
    ended_at: float | None

    @classmethod
    def from_status(
        cls: type[Summary],
        run_dir: Path,
        current: RunStatus,
        last_loss: float | None,
        best_loss: float | None,
        **more: Any,
    ) -> Summary:
        """The line of a run whose status is ``current``; ``more``: the fields a subclass adds."""
        return cls(
            run_id=run_dir.name,
            run_dir=run_dir,
            name=current.name or run_dir.name,
            state=current.state or "unknown",
            step=current.step or 0,
            max_steps=current.max_steps or 0,
            last_loss=last_loss,
            best_loss=best_loss,
            created_at=current.created_at,
            started_at=current.started_at,
            first_started_at=current.first_started_at,
            ended_at=current.ended_at,
            **more,
        )


def summarize(run_dir: Path) -> RunSummary:
    """The run list's view of one run (reads its whole metrics file; fine for a list refresh)."""
    losses = [e["loss"] for e in iter_metrics(run_dir) if e.get("event") == "train" and "loss" in e]
    last, best = (losses[-1], min(losses)) if losses else (None, None)
    return RunSummary.from_status(run_dir, status(run_dir), last, best)


def run_dirs(workspace: Path) -> list[Path]:
    """The run directories of a workspace (any order)."""
    root = runs_dir(workspace)
    return [child for child in root.iterdir() if (child / CONFIG_FILE).is_file()] if root.is_dir() else []


def active_runs(workspace: Path) -> list[Path]:
    """Runs of the workspace that are still going; reads only their statuses, so it is cheap to ask often."""
    return [run_dir for run_dir in run_dirs(workspace) if status(run_dir).is_active]


def list_runs(workspace: Path) -> list[RunSummary]:
    """Every run of a workspace, newest first."""
    return sorted(
        (summarize(child) for child in run_dirs(workspace)), key=lambda run: run.created_at or 0, reverse=True
    )
