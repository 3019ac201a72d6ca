"""Background jobs of the engine (evaluate, export): start, watch, cancel and reconcile them.

A job is ``python -m engine <command> ... --job-dir DIR`` started in its own process session, so it outlives
the studio page (or the studio) that started it. It talks back only through files in its directory:

- ``job.json``      written once by the starter: kind, labels (run id, ...), command line, pid, start time.
- ``progress.json`` replaced atomically: state, phase, done / total, error, result. The starter writes the
  first ``starting`` state before the process exists; after that only the job writes it.
- ``job.log``       everything the process printed.
- ``cancel.requested`` exists once someone asked the job to stop; it holds why when it was not the user (a time
  limit), and the job then ends ``failed`` with that reason.

Secrets (a hub token) travel in the child's environment, never in its command line or these files. Cancel is
SIGTERM to the process group; the job turns it into ``Cancelled``, removes what it had half written and
records ``cancelled``. A job whose process is gone without a final state is reconciled into ``failed`` (and
its half-written output removed) by whoever reads its status next. Only the standard library is imported.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import signal
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from engine.store import forks
from engine.store.disk import disk_full_words
from engine.store.ids import time_id
from engine.store.processes import engine_command, exit_code_of, is_alive, signal_group, spawn_detached
from engine.store.rundir import file_tail, release_reserve, reserve_space, write_text_atomic
from engine.store.workspace import jobs_dir

JOB_FILE = "job.json"
PROGRESS_FILE = "progress.json"
LOG_FILE = "job.log"
CANCEL_FILE = "cancel.requested"
FINAL_STATES = ("completed", "failed", "cancelled")
PARTIAL_MARK = ".partial-"  # in the name of every half-written output a job registers for clean-up

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_CANCELLED = 0, 1, 2, 130
USER_CANCEL = "cancelled by the user"
# A job may carry a time limit (``time_limit_s`` in job.json, a public demo's): ``enforce_time_limits`` cancels it once
# it has run that long, and kills it KILL_GRACE_S later if it is still going (a library that ignores the signal).
LIMIT_ERROR = "it reached its time limit ({minutes:g} min) and was stopped"
KILL_GRACE_S = 30.0


class JobError(RuntimeError):
    """A job that cannot start or go on, with a message meant for the person who asked for it."""


class Cancelled(BaseException):
    """Raised in a job's main thread by SIGTERM / SIGINT (a BaseException, so no ``except Exception`` eats it)."""


def start(
    workspace: Path,
    kind: str,
    args: list[str],
    labels: dict[str, Any] | None = None,
    env: dict[str, str] | None = None,
    time_limit_s: float | None = None,
) -> Path:
    """Start ``python -m engine *args --job-dir DIR`` in the background; returns the job directory.

    ``labels`` are stored for finding the job again (e.g. ``{"run_id": ...}``); ``env`` is added to the child's
    environment only (the place for secrets); ``time_limit_s``: how long it may run (``enforce_time_limits``).
    """
    # Newest first by name (list_jobs), within one second too; the random part keeps two processes' apart.
    job_dir = jobs_dir(workspace) / f"{time_id()}-{os.urandom(1).hex()}-{kind}"
    try:
        job_dir.mkdir(parents=True)
        reserve_space(job_dir)  # so that the job can still record its failure when the disk fills up
        _write_json(job_dir / PROGRESS_FILE, {"state": "starting", "phase": "starting", "updated_at": time.time()})
    except OSError as exc:
        shutil.rmtree(job_dir, ignore_errors=True)
        full = disk_full_words(exc, job_dir.parent, saving=False)
        if full is None:
            raise
        raise JobError(f"the disk is full: {full}; free some space, then start it again") from None
    command = [*args, "--job-dir", str(job_dir)]
    with open(job_dir / LOG_FILE, "ab") as log:
        pid = _start_forked(command, job_dir, log.fileno(), env) or spawn_detached(command, stdout=log, env=env).pid
    record = {
        "kind": kind,
        "labels": labels or {},
        "command": engine_command(*command),
        "pid": pid,
        "created_at": time.time(),
        "time_limit_s": time_limit_s,
    }
    _write_json(job_dir / JOB_FILE, record)
    return job_dir


def _start_forked(command: list[str], job_dir: Path, log: int, env: dict[str, str] | None) -> int | None:
    """Start the job as a warm fork (engine.store.forks) on a machine without GPUs (a fork cannot use CUDA), unless
    it carries secrets in its environment (a server per secret would keep it in memory); None: start it cold."""
    from engine.runs.devices import has_gpus

    if env or has_gpus():
        return None
    return forks.start_forked(command, cwd=os.getcwd(), stdout=log)  # relative paths as a cold start reads them


def _write_json(path: Path, value: dict[str, Any]) -> None:
    write_text_atomic(path, json.dumps(value, indent=1, sort_keys=True, default=str))


def _read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


def log_tail(job_dir: Path, max_bytes: int = 3000) -> str:
    """The end of the job's log, decoded leniently."""
    return file_tail(Path(job_dir) / LOG_FILE, max_bytes)


@dataclass
class JobStatus:
    """A job's record (job.json) and progress (progress.json) in one, as ``status`` reconciles them."""

    job_dir: str
    job_id: str
    kind: str | None = None
    labels: dict[str, Any] = field(default_factory=dict)  # e.g. run_id, run_dir: for finding the job again
    command: list[str] = field(default_factory=list)
    pid: int | None = None
    created_at: float | None = None
    state: str | None = None  # starting, running, then one of FINAL_STATES
    phase: str | None = None  # what it is doing, in words
    done: int | None = None
    total: int | None = None
    error: str | None = None
    result: dict[str, Any] | None = None  # what a completed job made (paths, summary)
    started_at: float | None = None
    ended_at: float | None = None
    updated_at: float | None = None
    partials: list[str] = field(default_factory=list)
    log_tail: str | None = None  # the end of job.log, for a failed job

    @property
    def is_running(self) -> bool:
        """Whether the job is still going."""
        return self.state not in FINAL_STATES


_JOB_FIELDS = {item.name for item in fields(JobStatus)}


def _crashed(job_dir: Path, record: dict[str, Any], progress: dict[str, Any]) -> dict[str, Any]:
    """Record a job whose process is gone without a final state: cancelled, or failed with why; its registered
    half-written output removed."""
    _remove_partials(progress.get("partials", []))
    if (job_dir / CANCEL_FILE).exists():  # cancelled before it could handle the signal itself (or killed after)
        reason = cancel_reason(job_dir)
        progress.update(state="failed" if reason else "cancelled", error=reason or USER_CANCEL, partials=[])
    else:
        code = exit_code_of(record.get("pid"))
        why = f"exit code {code}" if code is not None else "it was killed or crashed"
        progress.update(state="failed", error=f"the job's process ended without finishing ({why})", partials=[])
    progress["updated_at"] = time.time()
    _write_json(job_dir / PROGRESS_FILE, progress)
    release_reserve(job_dir)
    return progress


def status(job_dir: Path) -> JobStatus:
    """The job's progress merged with its record, reconciled against its process.

    A job that is not final while its process is gone crashed (or was killed): it is recorded as failed, with
    the exit code when this process started it, and its registered half-written output is removed.
    """
    job_dir = Path(job_dir)
    record = _read_json(job_dir / JOB_FILE)
    progress = _read_json(job_dir / PROGRESS_FILE)
    if progress.get("state") not in FINAL_STATES and record and not is_alive(record.get("pid")):
        # Read again now that the process is known to be gone: it may have recorded its end between the first read
        # and the check (on a busy machine the gap is long), and that record must not be overwritten.
        progress = _read_json(job_dir / PROGRESS_FILE)
        if progress.get("state") not in FINAL_STATES:
            progress = _crashed(job_dir, record, progress)
    merged = {**record, **progress, "job_dir": str(job_dir), "job_id": job_dir.name}
    current = JobStatus(**{key: value for key, value in merged.items() if key in _JOB_FIELDS})
    if current.state == "failed":
        current.log_tail = log_tail(job_dir)
    return current


def is_running(job_status: JobStatus | None) -> bool:
    """Whether a (reconciled) job status belongs to a job still going; False for no job at all."""
    return job_status is not None and job_status.is_running


def cancel(job_dir: Path, reason: str | None = None) -> bool:
    """Ask the job to stop (SIGTERM to its process group); False when it is not running. With ``reason`` (not the
    user's Cancel: a time limit) it ends ``failed`` with that reason."""
    pid = _read_json(Path(job_dir) / JOB_FILE).get("pid")
    if not is_alive(pid):
        return False
    # Written first, so a job killed by the signal before it handled it reads as cancelled (or failed, and why).
    write_text_atomic(Path(job_dir) / CANCEL_FILE, reason or "")
    return signal_group(pid, signal.SIGTERM)


def cancel_reason(job_dir: Path) -> str | None:
    """Why the job was asked to stop when it was not the user (``cancel``'s reason); None for the user's Cancel."""
    try:
        return (Path(job_dir) / CANCEL_FILE).read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


def enforce_time_limits(workspace: Path, now: float | None = None) -> list[Path]:
    """Cancel every running job of the workspace past its time limit (it ends ``failed``: LIMIT_ERROR); kill one
    still going KILL_GRACE_S after. Returns the jobs acted on; asking again is harmless."""
    now = time.time() if now is None else now
    acted = []
    for job_dir in list_jobs(workspace):
        record = _read_json(job_dir / JOB_FILE)
        limit, created = record.get("time_limit_s"), record.get("created_at")
        if not limit or not created or now - created < limit or not is_running(status(job_dir)):
            continue
        if (job_dir / CANCEL_FILE).exists() and now - created >= limit + KILL_GRACE_S:
            signal_group(record["pid"], signal.SIGKILL)  # status() then records the reason the cancel file holds
        elif not (job_dir / CANCEL_FILE).exists():
            cancel(job_dir, LIMIT_ERROR.format(minutes=limit / 60))
        acted.append(job_dir)
    return acted


def wait(job_dir: Path, timeout: float | None = None, poll: float = 0.2) -> JobStatus:
    """Block until the job is final, or ``timeout`` seconds have passed (None: no limit, as ``engine.runs.wait``);
    returns its status, which is not final when the timeout ended the wait."""
    deadline = time.time() + (math.inf if timeout is None else timeout)
    while True:
        current = status(job_dir)
        if not is_running(current) or time.time() > deadline:
            return current
        time.sleep(poll)


def list_jobs(workspace: Path, kind: str | None = None, **labels: Any) -> list[Path]:
    """Job directories of a workspace, newest first, filtered by kind and labels."""
    root = jobs_dir(workspace)
    found = []
    for job_dir in sorted(root.iterdir(), reverse=True) if root.is_dir() else []:
        record = _read_json(job_dir / JOB_FILE)
        if not record or (kind and record.get("kind") != kind):
            continue
        if all(record.get("labels", {}).get(key) == value for key, value in labels.items()):
            found.append(job_dir)
    return found


def active_job(workspace: Path, kind: str | None = None, **labels: Any) -> Path | None:
    """The newest job of that kind (and labels) that is still running, if any."""
    return next((job for job in list_jobs(workspace, kind, **labels) if is_running(status(job))), None)


def _remove_partials(paths: list[str]) -> None:
    """Remove half-written outputs; only paths carrying PARTIAL_MARK, so a bad record cannot delete real data."""
    for path in map(Path, paths):
        if PARTIAL_MARK not in path.name:
            continue
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


class Progress:
    """What a running job reports: progress.json (when it has a job directory) and a line on stdout."""

    def __init__(self, job_dir: Path | None):
        self.job_dir = Path(job_dir) if job_dir else None
        self.state: dict[str, Any] = {"state": "running", "pid": os.getpid(), "started_at": time.time(), "partials": []}
        self._last_line = ""

    def update(self, phase: str | None = None, done: int | None = None, total: int | None = None, **extra: Any) -> None:
        """Record the current phase and how far it is (``done`` of ``total`` units)."""
        if phase is not None:
            self.state.update(phase=phase, done=None, total=None)
        if done is not None:
            self.state["done"] = done
        if total is not None:
            self.state["total"] = total
        self.state.update(extra)
        self._write()
        line = self.state.get("phase", "")
        if self.state.get("total"):
            line += f" ({self.state.get('done') or 0}/{self.state['total']})"
        if line != self._last_line:
            print(line, flush=True)
            self._last_line = line

    def add_partial(self, path: Path) -> None:
        """Register a half-written output to remove if the job fails, is cancelled or dies."""
        if PARTIAL_MARK not in Path(path).name:
            raise ValueError(f"a partial output's name must contain {PARTIAL_MARK!r}: {path}")
        self.state["partials"].append(str(path))
        self._write()

    def drop_partial(self, path: Path) -> None:
        """The output is complete (renamed into place): nothing to clean up any more."""
        self.state["partials"] = [p for p in self.state["partials"] if p != str(path)]
        self._write()

    def finish(self, state: str, error: str | None = None, result: dict[str, Any] | None = None) -> None:
        """Record the final state (completed, failed, cancelled), removing half-written outputs first."""
        _remove_partials(self.state["partials"])
        self.state.update(state=state, error=error, partials=[], ended_at=time.time())
        if result is not None:
            self.state["result"] = result
        self._write()
        if self.job_dir is not None:
            release_reserve(self.job_dir)  # the end is recorded: the space set aside for recording it goes back

    def _write(self) -> None:
        if self.job_dir is not None:
            self.state["updated_at"] = time.time()
            _write_json(self.job_dir / PROGRESS_FILE, self.state)


# The cancel signals this process received. A library may catch the Cancelled raised inside it and fail later with
# an error of its own (a benchmark job cancelled while lm-eval loaded its task once ended "ImportError: cannot import
# name io"): a job that fails after a cancel was cancelled, not crashed. One that completes anyway keeps its result.
_received_signals: list[str] = []


def _raise_cancelled(signum: int, _frame: object) -> None:
    # Ignore further signals: the clean-up that follows must not be interrupted in turn.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _received_signals.append(signal.Signals(signum).name)
    raise Cancelled(_received_signals[-1])


def _finish_cancelled(progress: Progress) -> int:
    """Record a cancel: the user's (``cancelled``), or one with a reason (``failed``, why: a time limit)."""
    reason = cancel_reason(progress.job_dir) if progress.job_dir is not None else None
    progress.finish("failed" if reason else "cancelled", error=reason or USER_CANCEL)
    print(f"error: {reason}" if reason else "cancelled", flush=True)
    return EXIT_FAILED if reason else EXIT_CANCELLED


def run_job(job_dir: Path | None, work: Callable[[Progress], dict[str, Any]], input_errors: tuple[type, ...]) -> int:
    """Run ``work`` as a job's body: progress, cancel on SIGTERM / SIGINT, and a final state that says why.

    ``work`` returns the result (stored in progress.json). An exception of ``input_errors`` (or JobError) is a
    clear refusal (exit 2, message only); any other exception is a crash (exit 1, traceback in the log).
    Returns the exit code.
    """
    progress = Progress(job_dir)
    signal.signal(signal.SIGTERM, _raise_cancelled)
    signal.signal(signal.SIGINT, _raise_cancelled)
    try:
        progress.update("starting")
        result = work(progress)
    except Cancelled:
        return _finish_cancelled(progress)
    except Exception as exc:  # noqa: BLE001 - any crash must end as a final state that says what happened
        if _received_signals:  # the work's own error after the cancel (see _received_signals)
            traceback.print_exc()
            return _finish_cancelled(progress)
        return _finish_failed(progress, exc, job_dir, input_errors)
    progress.finish("completed", result=result)
    return EXIT_OK


def _finish_failed(progress: Progress, exc: Exception, job_dir: Path | None, input_errors: tuple[type, ...]) -> int:
    """Record ``exc`` as a clear refusal (exit 2, message only) or a crash (exit 1, traceback in the log)."""
    if isinstance(exc, (JobError, *input_errors)):
        progress.finish("failed", error=str(exc), result=getattr(exc, "result", None))
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return EXIT_BAD_INPUT
    full = disk_full_words(exc, job_dir or Path.cwd(), saving=False)
    if full is None:
        traceback.print_exc()
    # The half-written output is removed first (finish), which also frees the space to record the failure.
    error = f"the disk is full: {full}. Free some space, then run it again" if full else None
    progress.finish("failed", error=error or f"{type(exc).__name__}: {exc}")
    if full:
        with contextlib.suppress(OSError):  # the log may be on the full disk too
            print(f"error: {error}", file=sys.stderr, flush=True)
    return EXIT_FAILED
