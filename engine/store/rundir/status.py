"""A run's status.json: the states of a run (which are active, open, final and resumable), the typed RunStatus,
and its reads and writes: every change is merged under the run's status lock and written atomically."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from engine.store.locks import file_lock
from engine.store.rundir.files import CONFIG_FILE, STATUS_FILE, write_text_atomic

STATUS_LOCK_FILE = ".status.lock"  # flock'd around every read-modify-write of status.json
STATUS_LOCK_WAIT_S = 5.0  # longer than any status write takes, even on a loaded machine

# The states of a run (status.json's "state"): the one definition of which are active, open, final and
# resumable.
QUEUED = "queued"
STOPPED = "stopped"  # stopped on request after a step, with a checkpoint (or cancelled while queued)
COMPLETED = "completed"
FAILED = "failed"  # the training process crashed or could not start
ABORTED = "aborted"  # killed on request (Abort, or a time limit past its grace): no checkpoint saved at the end
# A sweep's trial that its pruner stopped early (engine.sweeps), with a checkpoint; ``error`` says why. Not
# resumable: the sweep has judged the trial, and its study would not count more steps.
PRUNED = "pruned"
# Paused between two steps on request (Pause; engine.runs.requests): the worker lives and holds its memory, and
# goes on from the same step on Continue. Active, and not asked to stop: it still holds its devices, its time limit
# still runs, and Stop and Abort act on it.
PAUSED = "paused"
ACTIVE_STATES = ("starting", "running", PAUSED, "stopping")  # a process of the run is at work (or should be)
TRAINING_STATES = ("starting", "running", PAUSED)  # active and not yet asked to stop
OPEN_STATES = (QUEUED, *ACTIVE_STATES)  # not ended: waiting in line, or active
FINAL_STATES = (STOPPED, COMPLETED, FAILED, ABORTED, PRUNED)
# Ended without completing: such a run continues from its newest whole checkpoint when it has one. An aborted
# run keeps every checkpoint saved before the kill, so it resumes like a stopped one (losing the steps since).
RESUMABLE_STATES = (STOPPED, FAILED, ABORTED)
RUN_STATES = (*OPEN_STATES, *FINAL_STATES)


@dataclass
class RunStatus:
    """A run's status.json, typed. Written by the worker, the supervisor and engine.runs; ``engine.runs.status``
    adds the reconciled view (``log_tail``, ``checkpoints``, ``run_dir``), which is never stored."""

    state: str | None = None  # one of RUN_STATES; None before anything was written
    name: str | None = None
    created_at: float | None = None
    updated_at: float | None = None
    started_at: float | None = None  # the worker began (each start and resume): the current segment's start
    first_started_at: float | None = None  # the run's first worker began (kept across resumes): when it started
    ended_at: float | None = None  # the current (last) segment ended
    earlier_seconds: float | None = None  # how long the run's earlier segments ran (before its latest resume)
    pid: int | None = None  # the worker (rank 0)
    supervisor_pid: int | None = None
    # The machine whose processes pid and supervisor_pid are (engine.store.hosts); None: the reader's own. A run
    # started on another node of a cluster is checked by its heartbeat there, not by its pids.
    host: str | None = None
    step: int | None = None
    max_steps: int | None = None
    epoch: float | None = None
    exit_code: int | None = None
    error: str | None = None  # why the run failed, was aborted (by the user, or at its time limit) or was pruned
    # Why a completed run ended before its max_steps: "early stopped at step N (eval_loss did not improve for K
    # evaluations)" (train.early_stopping).
    reason: str | None = None
    paused_at: float | None = None  # since when a paused run waits (None while it is not paused)
    bad_loss_step: int | None = None  # the step whose loss went NaN / infinite: such a run is not resumed
    trainable_params: int | None = None
    total_params: int | None = None
    train_rows: int | None = None
    result: str | None = None  # the final adapter / model directory of a completed run
    # The queue (engine.runs.queue) and demo mode.
    queued_at: float | None = None
    launched_at: float | None = None  # the queue started it: its time limit counts from here
    time_limit_s: float | None = None
    resume_checkpoint: int | None = None  # a queued resume starts from this checkpoint
    cancelled: bool | None = None  # taken out of the queue before it started
    # The devices the run holds while active (engine.runs.devices): GPU indices, or ["cpu"]; recorded at each start.
    devices: list[int | str] | None = None
    owner: str | None = None  # demo mode: a digest of the visitor who started it
    sweep: dict[str, Any] | None = None  # a sweep's trial (engine.sweeps): {"name": the sweep, "trial": its number}
    # The reconciled view (engine.runs.status), never stored.
    log_tail: str | None = None
    checkpoints: list[int] = field(default_factory=list)
    run_dir: str | None = None

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> RunStatus:
        """A status from status.json's content; keys this engine does not know are left out."""
        return cls(**{key: value for key, value in values.items() if key in _STATUS_FIELDS})

    @property
    def is_active(self) -> bool:
        """A process of the run is at work (starting, running, paused, stopping)."""
        return self.state in ACTIVE_STATES

    @property
    def is_open(self) -> bool:
        """The run has not ended: it waits in line or is active."""
        return self.state in OPEN_STATES

    @property
    def is_final(self) -> bool:
        """The run has ended (stopped, completed, failed, aborted, pruned)."""
        return self.state in FINAL_STATES

    @property
    def is_resumable(self) -> bool:
        """The run ended without completing (stopped, failed, aborted); a checkpoint is needed too."""
        return self.state in RESUMABLE_STATES

    def segment_seconds(self, now: float | None = None) -> float | None:
        """How long the current segment (one process, from the run's start or latest resume) has run, or the
        last one ran; None before a worker began."""
        if not self.started_at:
            return None
        ended = None if self.is_active else self.ended_at
        return max(0.0, (ended or now or time.time()) - self.started_at)

    def total_seconds(self, now: float | None = None) -> float | None:
        """How long the run has trained over all its segments: the earlier ones and the current one."""
        segment = self.segment_seconds(now)
        if segment is None:
            return self.earlier_seconds
        return (self.earlier_seconds or 0.0) + segment


def next_segment(current: RunStatus) -> dict[str, Any]:
    """The status changes that close a run's last segment before it goes again (start, resume, back in the
    queue): its length joins ``earlier_seconds`` and its times are cleared, so closing it twice counts it once."""
    earlier = current.earlier_seconds or 0.0
    if current.started_at and current.ended_at and not current.is_active:
        earlier += max(0.0, current.ended_at - current.started_at)
    return {"earlier_seconds": earlier or None, "started_at": None, "ended_at": None}


_STATUS_FIELDS = {item.name for item in fields(RunStatus)}
_VIEW_FIELDS = ("log_tail", "checkpoints", "run_dir")
STORED_FIELDS = _STATUS_FIELDS - set(_VIEW_FIELDS)


def is_run_dir(path: Path) -> bool:
    """Whether ``path`` holds a run: its config and its status (a folder with only a config.yaml is not one)."""
    return (Path(path) / CONFIG_FILE).is_file() and (Path(path) / STATUS_FILE).is_file()


def _read_status_file(run_dir: Path) -> dict[str, Any]:
    try:
        stored = json.loads((Path(run_dir) / STATUS_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except json.JSONDecodeError:
        # Only a hand-edited file can be half-written (writes are atomic); treat it as unknown.
        return {}
    return stored if isinstance(stored, dict) else {}


def read_status(run_dir: Path) -> RunStatus:
    """The stored status of a run (empty if it has none yet). Use engine.runs.status for the reconciled view."""
    return RunStatus.from_dict(_read_status_file(run_dir))


_held_status_locks = threading.local()  # per thread: the run directories whose status lock it holds


@contextlib.contextmanager
def status_lock(run_dir: Path, wait_s: float = STATUS_LOCK_WAIT_S) -> Iterator[None]:
    """Hold the run's status lock: no other writer (worker, supervisor, a reader reconciling, Abort) changes
    status.json meanwhile. Re-entrant within a thread.

    Without it two writers that each read, change and write the status lose one change: a reader that found a
    just-aborted run's processes gone recorded ``failed`` over Abort's ``aborted``. A holder that dies drops the
    lock (the kernel does), but one that is frozen (SIGSTOP, a debugger) would hold it for good, so after
    ``wait_s`` the status is changed without it rather than never. Where the lock file cannot be made (a
    read-only disk) the status is not locked either: a write there fails anyway.
    """
    key = str(Path(run_dir).resolve())
    held = _held_status_locks.__dict__.setdefault("runs", set())
    if key in held:
        yield
        return
    with file_lock(Path(run_dir) / STATUS_LOCK_FILE, wait_s, unopenable_ok=True):
        held.add(key)
        try:
            yield
        finally:
            held.discard(key)


def update_status(run_dir: Path, when: Callable[[RunStatus], bool] | None = None, **changes: Any) -> RunStatus:
    """Merge ``changes`` into status.json and write it atomically, under the run's status lock; returns the new
    status. With ``when``, only if ``when(the stored status)`` holds, checked under the lock (else the stored
    status is returned unchanged): a writer whose change rests on what it read earlier says so here.

    Only RunStatus's stored fields may change (a misspelt one is a TypeError, not a silent new key); the file
    keeps just the keys ever written, and those of other engine versions.
    """
    unknown = set(changes) - STORED_FIELDS
    if unknown:
        raise TypeError(f"not a stored field of RunStatus: {', '.join(sorted(unknown))}")
    with status_lock(run_dir):
        stored = _read_status_file(run_dir)
        if when is not None and not when(RunStatus.from_dict(stored)):
            return RunStatus.from_dict(stored)
        stored.update(changes)
        stored["updated_at"] = time.time()
        write_text_atomic(Path(run_dir) / STATUS_FILE, json.dumps(stored, indent=1, sort_keys=True))
    return RunStatus.from_dict(stored)
