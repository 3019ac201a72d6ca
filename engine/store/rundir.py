"""The run directory contract: file names, the typed status and its states, atomic status writes, append-only
metrics, checkpoints, and where the final result lives.

Every write here is atomic (write a temporary file, then rename) or append-only with whole lines, so a reader
in another process never sees half a status or half a metrics line. Only the standard library is imported:
the supervisor and the studio read these files without paying for torch.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from engine.store.locks import file_lock

CONFIG_FILE = "config.yaml"
STATUS_FILE = "status.json"
METRICS_FILE = "metrics.jsonl"
LOG_FILE = "train.log"
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")  # a terminal's colour / cursor code
CHECKPOINTS_DIR = "checkpoints"
ADAPTER_DIR = "adapter"
MODEL_DIR = "model"

WEIGHT_FILES = ("*.safetensors", "*.bin")

RESERVE_FILE = ".space-reserve"
STATUS_LOCK_FILE = ".status.lock"  # flock'd around every read-modify-write of status.json
STATUS_LOCK_WAIT_S = 5.0  # longer than any status write takes, even on a loaded machine
TRAINER_STATE_FILE = "trainer_state.json"

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


@dataclass
class RunStatus:
    """A run's status.json, typed. Written by the worker, the supervisor and engine.runs; ``engine.runs.status``
    adds the reconciled view (``log_tail``, ``checkpoints``, ``run_dir``), which is never stored."""

    state: str | None = None  # one of RUN_STATES; None before anything was written
    name: str | None = None
    created_at: float | None = None
    updated_at: float | None = None
    started_at: float | None = None  # the worker began (each start and resume): the current segment's start
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


def append_metrics(run_dir: Path, events: list[dict[str, Any]]) -> None:
    """Append events as whole JSON lines in one write, so a tailing reader never sees half a line.

    A full disk can cut a write short without an error; the stub is cut off again and the disk-full error
    raised, so the file never holds half a line that the next append would glue another event onto.
    """
    if not events:
        return
    payload = "".join(json.dumps(event, allow_nan=True) + "\n" for event in events).encode("utf-8")
    fd = os.open(run_dir / METRICS_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        size = os.fstat(fd).st_size  # only rank 0 of one run appends: nobody else moves the end meanwhile
        try:
            written = os.write(fd, payload)
        except OSError:
            os.ftruncate(fd, size)
            raise
        if written != len(payload):
            os.ftruncate(fd, size)
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(run_dir / METRICS_FILE))
    finally:
        os.close(fd)


def drop_partial_metrics_line(run_dir: Path) -> None:
    """Cut a last line that has no newline (a writer died mid-line); readers never returned it anyway."""
    path = run_dir / METRICS_FILE
    try:
        with path.open("rb+") as handle:
            data = handle.read()
            if data and not data.endswith(b"\n"):
                handle.truncate(data.rfind(b"\n") + 1)
    except FileNotFoundError:
        pass


def read_metrics(run_dir: Path, offset: int = 0) -> tuple[list[dict[str, Any]], int]:
    """Events appended since byte ``offset`` and the offset to pass next time.

    Reads only the new bytes (the cost does not grow with the run's length) and stops at the last complete
    line, so a line being written is picked up whole on the next call.
    """
    path = run_dir / METRICS_FILE
    try:
        with path.open("rb") as handle:
            handle.seek(offset)
            chunk = handle.read()
    except FileNotFoundError:
        return [], offset
    end = chunk.rfind(b"\n") + 1
    events = [json.loads(line) for line in chunk[:end].splitlines() if line.strip()]
    return events, offset + end


def iter_metrics(run_dir: Path) -> Iterator[dict[str, Any]]:
    """Every event of a run, in order."""
    events, _ = read_metrics(run_dir, 0)
    yield from events


def file_tail(path: Path, max_bytes: int) -> str:
    """The last ``max_bytes`` of a log file, decoded leniently (a log may hold any bytes); "" when it is missing."""
    try:
        with Path(path).open("rb") as handle:
            handle.seek(max(0, Path(path).stat().st_size - max_bytes))
            return handle.read().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return ""


def log_tail(run_dir: Path, max_bytes: int = 4000) -> str:
    """The last ``max_bytes`` of train.log, without terminal colour codes (trackio prints its dashboard's address
    in bold orange, hard-coded, whatever the output is), which a page would show as ``[1m[38;5;208m``."""
    return ANSI_ESCAPE.sub("", file_tail(run_dir / LOG_FILE, max_bytes))


def result_dir(run_dir: Path, is_adapter: bool) -> Path:
    """Where a run's final result lives: ``adapter/`` for a LoRA run, ``model/`` for a full or freeze run."""
    return run_dir / (ADAPTER_DIR if is_adapter else MODEL_DIR)


def has_weights(directory: Path) -> bool:
    """Whether ``directory`` holds saved weights (safetensors, or the older ``*.bin``)."""
    return directory.is_dir() and any(any(directory.glob(pattern)) for pattern in WEIGHT_FILES)


def final_weights(run_dir: Path, is_adapter: bool) -> Path | None:
    """The run's final result directory once it holds weights; None before the run has completed."""
    target = result_dir(run_dir, is_adapter)
    return target if has_weights(target) else None


def _checkpoint_dirs(run_dir: Path) -> dict[int, Path]:
    """step -> directory of every checkpoint-N directory, complete or not."""
    root = run_dir / CHECKPOINTS_DIR
    found = {}
    for child in root.glob("checkpoint-*") if root.is_dir() else []:
        suffix = child.name.removeprefix("checkpoint-")
        if suffix.isdigit() and child.is_dir():
            found[int(suffix)] = child
    return found


# (path, mtime_ns, size) -> whether that trainer_state.json is whole: status polls stat it, not parse it again.
_complete_cache: dict[tuple[str, int, int], bool] = {}


def _is_complete(checkpoint: Path, step: int) -> bool:
    """Whether Trainer finished writing ``checkpoint``.

    Trainer writes a checkpoint in place and trainer_state.json last, each file raising on failure; so a
    checkpoint is whole once that file is whole: valid JSON for this very step. A crash or a full disk while
    writing it leaves a truncated file, which does not parse.
    """
    path = checkpoint / TRAINER_STATE_FILE
    try:
        info = path.stat()
    except OSError:
        return False
    key = (str(path), info.st_mtime_ns, info.st_size)
    if key not in _complete_cache:
        if len(_complete_cache) > 4096:  # a long-lived studio sees many checkpoints come and go
            _complete_cache.clear()
        try:
            state = json.loads(path.read_bytes())
            _complete_cache[key] = isinstance(state, dict) and state.get("global_step") == step
        except (OSError, ValueError):
            return False  # unreadable now; asked again next time
    return _complete_cache[key]


def checkpoint_steps(run_dir: Path) -> list[int]:
    """Steps of the complete checkpoints of a run, ascending; a half-written one is never listed (resumed from)."""
    return sorted(step for step, path in _checkpoint_dirs(run_dir).items() if _is_complete(path, step))


def incomplete_checkpoints(run_dir: Path) -> list[Path]:
    """Checkpoint directories whose writing was cut short (crash, kill, full disk)."""
    return [path for step, path in sorted(_checkpoint_dirs(run_dir).items()) if not _is_complete(path, step)]


def remove_checkpoint(path: Path) -> None:
    """Delete a checkpoint directory; it is renamed out of the checkpoint-N pattern first, so a reader that
    lists checkpoints meanwhile never sees half a deletion."""
    doomed = path.with_name(f".removing-{path.name}-{os.getpid()}")
    try:
        path.rename(doomed)
    except FileNotFoundError:
        return
    shutil.rmtree(doomed, ignore_errors=True)


def checkpoint_path(run_dir: Path, step: int) -> Path:
    """The directory of the checkpoint saved at ``step``."""
    return run_dir / CHECKPOINTS_DIR / f"checkpoint-{step}"
