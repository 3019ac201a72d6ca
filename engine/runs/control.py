"""Acting on runs: create, start, resume, stop, abort and delete them.

Everything goes through the run directory and signals, so a run outlives the program that started it: the
supervisor is started in its own process session, and any later reader reconciles the status against the
live processes (engine.runs.status). Only the standard library and the config are imported (no torch).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import time
import unicodedata
from collections.abc import Iterator
from pathlib import Path

from engine.config import RunConfig, save_config
from engine.runs import standby
from engine.runs.devices import CPU, Device, fits_standby, has_gpus, pick_devices
from engine.runs.lineage import pinned
from engine.runs.status import status
from engine.store import forks
from engine.store.hosts import ABORT, STOP, clear_request, is_remote, send_request, this_host
from engine.store.locks import file_lock
from engine.store.processes import (
    command_line,
    is_alive,
    kill_all,
    pid_alive,
    proc_pids,
    process_tree,
    spawn_detached,
)
from engine.store.rundir import (
    ABORTED,
    COMPLETED,
    CONFIG_FILE,
    FAILED,
    STATUS_FILE,
    RunStatus,
    checkpoint_steps,
    is_run_dir,
    next_segment,
    read_status,
    status_lock,
    update_status,
)
from engine.store.workspace import runs_dir, standby_dir, start_lock_file, workspace_of

ABORTED_BY_USER = "aborted by the user"


class RunError(RuntimeError):
    """An action that does not fit the run's state (resume a running run, start a missing one, ...)."""


class RunAlreadyRunning(RunError):
    """A start of a run that another start has already begun."""


def new_run_id(name: str | None) -> str:
    """A sortable, readable, unique id: time stamp plus a slug of the name."""
    slug = re.sub(r"[^a-z0-9]+", "-", (name or "run").lower()).strip("-")[:40] or "run"
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{os.urandom(2).hex()}-{slug}"


def create_run(
    config: RunConfig,
    workspace: Path | None = None,
    run_dir: Path | None = None,
    owner: str | None = None,
    time_limit_s: float | None = None,
) -> Path:
    """Make a run directory holding the config and a ``queued`` status; returns its path.

    A ``model.init_from`` run id is looked up in ``workspace`` (else in the workspace of ``run_dir``) and saved as
    the absolute directory it names (engine.runs.lineage.pinned), so the worker finds it from any directory.
    ``owner`` (a demo visitor's tag) and ``time_limit_s`` are in the first status, so the run is never queued
    without them.
    """
    if run_dir is None:
        if workspace is None:
            raise ValueError("give a workspace or a run directory")
        run_dir = runs_dir(workspace) / new_run_id(config.name)
    problem = new_run_dir_problem(run_dir)
    if problem:
        raise RunError(problem)
    run_dir = Path(run_dir).resolve()
    config = pinned(config, workspace if workspace is not None else workspace_of(run_dir))
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # under a file, in a read-only folder, ...
        raise RunError(f"cannot create the run directory {run_dir}: {exc.strerror or exc}") from None
    save_config(config, run_dir / CONFIG_FILE)
    limits = {"owner": owner, "time_limit_s": time_limit_s}
    first = {key: value for key, value in limits.items() if value is not None}
    update_status(run_dir, state="queued", name=config.name or run_dir.name, created_at=time.time(), **first)
    return run_dir


def create_and_start(config: RunConfig, workspace: Path | None = None, run_dir: Path | None = None) -> Path:
    """``create_run`` and then ``start``, under the workspace's start lock; returns the run directory.

    A run is created ``queued``, and a studio open on the workspace starts queued runs by itself (engine.runs.queue):
    between the two calls it could start this one, and the ``start`` here would then fail with RunAlreadyRunning.
    Under the lock the run is ``starting`` before any scheduler sees it. A run directory outside every workspace
    has no scheduler and needs no lock."""
    workspace_locked = workspace if run_dir is None else workspace_of(Path(run_dir))
    with start_lock(workspace_locked) if workspace_locked is not None else contextlib.nullcontext():
        made = create_run(config, workspace=workspace, run_dir=run_dir)
        start(made)
    return made


def new_run_dir_problem(run_dir: Path) -> str | None:
    """Why a new run cannot be made in ``run_dir`` (it holds a run, or other files: a run writes checkpoints, logs
    and its result there, and Delete removes the whole folder); None for a new or empty folder."""
    try:
        run_dir = Path(run_dir).resolve()
        if (run_dir / CONFIG_FILE).exists():
            return f"{run_dir} already holds a run; resume it or choose another directory"
        if run_dir.exists() and not (run_dir.is_dir() and not any(run_dir.iterdir())):
            return f"{run_dir} already exists and is not a run directory; choose a new or empty folder"
    except (OSError, ValueError) as exc:  # a NUL byte, a name too long, a folder that cannot be read
        return f"{run_dir} cannot be a run directory: {getattr(exc, 'strerror', None) or exc}"
    return None


def find_run(workspace: Path, run_id: str) -> Path:
    """The directory of run ``run_id`` of the workspace (directly in its runs folder, symlinks followed, holding a
    config). RunError, never an OSError or ValueError, for an id that names no run: a path, a NUL byte or another
    control character, a folder without a run."""
    root = runs_dir(workspace)
    if (
        not run_id
        or run_id in (".", "..")
        or any(separator in run_id for separator in ("/", "\\"))
        or any(unicodedata.category(char) == "Cc" for char in run_id)
    ):
        raise RunError(f"{run_id!r} is not a run id (a folder name in {root})")
    try:
        real_root = root.resolve()
        run_dir = (real_root / run_id).resolve()
        found = run_dir.parent == real_root and (run_dir / CONFIG_FILE).is_file()
    except (OSError, ValueError):  # a name too long for the file system, a folder that cannot be read
        found = False
    if not found:
        raise RunError(f"no run {run_id!r} in {root}")
    return run_dir


def start(run_dir: Path, checkpoint: int | None = None, devices: list[Device] | None = None) -> int:
    """Start the run's supervisor in its own session (it survives its starter); returns its pid.

    ``devices``: those the queue chose (engine.runs.queue); without them the run takes free ones now, or, when
    none is free, those it asks for anyway (a start that does not wait: the queue is where runs wait). They are
    recorded in the status, and the supervisor gives them to the training process.
    """
    run_dir = Path(run_dir).resolve()
    if not (run_dir / CONFIG_FILE).is_file():
        raise RunError(f"{run_dir} is not a run directory (no {CONFIG_FILE})")
    current = status(run_dir)
    if current.is_active:
        raise RunAlreadyRunning("the run is already running")
    _wait_for_release(run_dir, current.supervisor_pid)
    claimed: list[bool] = []

    def unclaimed(stored: RunStatus) -> bool:
        # Checked and written under the status lock: of two starts at once (the studio's queue and a script), one
        # claims the run and the other is told it runs, instead of both starting a supervisor.
        claimed.append(not stored.is_active)
        return claimed[-1]

    update_status(
        run_dir,
        when=unclaimed,
        state="starting",
        host=this_host(),  # the pids recorded from here on are this machine's (engine.store.hosts)
        error=None,
        exit_code=None,
        pid=None,
        supervisor_pid=None,
        bad_loss_step=None,
        devices=devices or pick_devices(run_dir, workspace_of(run_dir)),
        **next_segment(current),  # the elapsed time of earlier segments is kept, not restarted
    )
    if not claimed[-1]:
        raise RunAlreadyRunning("the run is already running")
    warm = _claim_standby(run_dir, checkpoint)
    if warm:  # the standby records itself as the supervisor before its worker touches the status
        keep_standby(workspace_of(run_dir))  # the next one warms up once this run is over
        return warm
    args = ["supervise", str(run_dir)]
    if checkpoint is not None:
        args += ["--checkpoint", str(checkpoint)]
    pid = _start_forked(args, run_dir) or spawn_detached(args, cwd=str(run_dir)).pid
    update_status(run_dir, supervisor_pid=pid)
    return pid


def _start_forked(args: list[str], run_dir: Path) -> int | None:
    """Start the supervisor of a CPU run as a warm fork (engine.store.forks) on a machine without GPUs; None: start
    it cold. A GPU machine's fork server may have touched CUDA while importing, which a forked process then cannot
    use; a run given GPUs (``STUDIO_DEVICES`` can name some on any machine) starts cold too."""
    if has_gpus() or read_status(run_dir).devices != [CPU]:
        return None
    return forks.start_forked(args, cwd=str(run_dir))


def _claim_standby(run_dir: Path, checkpoint: int | None) -> int | None:
    """Hand the run to a warm standby of its workspace when one is ready (single-process runs on every GPU of the
    machine, or on the CPU)."""
    from engine.runs.supervisor import launch_settings

    workspace = workspace_of(run_dir)
    num_processes, threads = launch_settings(run_dir)
    if workspace is None or num_processes != 1 or not standby_dir(workspace).is_dir():
        return None
    if not fits_standby(read_status(run_dir).devices):
        return None  # some of the GPUs only: a process that may have initialised CUDA cannot be narrowed to them
    return standby.claim(workspace, run_dir, checkpoint, threads or (os.cpu_count() or 1))


def keep_standby(workspace: Path) -> None:
    """Make sure the workspace's next run starts warm, for as long as this process (a studio) lives: on a machine
    without GPUs, the fork server that its CPU runs are forked from (engine.store.forks: one for every studio and
    CLI of this environment, where a standby would serve one workspace); elsewhere a warm standby (see
    engine.runs.standby)."""
    if not has_gpus() and forks.prepare(holder=os.getpid()):
        return
    standby.start_standby(workspace)


def _wait_for_release(run_dir: Path, pid: int | None, timeout: float = 15.0) -> None:
    """Let the previous supervisor finish recording the run's end before a new one takes over the run: until it
    has exited, or (a standby that keeps the stopped run's worker for its resume, engine.runs.standby) until the
    status no longer names it."""
    deadline = time.time() + timeout
    while is_alive(pid) and read_status(run_dir).supervisor_pid == pid and time.time() < deadline:
        time.sleep(0.02)


def resume(run_dir: Path, checkpoint: int | None = None) -> int:
    """Continue a stopped, failed or aborted run from its newest (or the given) checkpoint; returns the
    supervisor pid."""
    return start(run_dir, resume_point(run_dir, checkpoint))


def resume_point(run_dir: Path, checkpoint: int | None = None) -> int:
    """The checkpoint a resume continues from: the given one, else the newest. RunError when the run cannot be
    resumed (not a run, active, completed, failed on a bad loss, never started, no such checkpoint)."""
    if not is_run_dir(Path(run_dir)):
        raise RunError(f"{run_dir} is not a run directory (it has no {CONFIG_FILE} and {STATUS_FILE})")
    current = status(run_dir)
    if current.is_active:
        raise RunError("the run is still running; stop it before resuming")
    if current.state == COMPLETED:
        raise RunError("the run has completed; there is nothing to resume. Start a new run to train more")
    if current.state == FAILED and current.bad_loss_step is not None:
        # The checkpoint restores the optimizer, the schedule and the data order: resuming would replay the
        # very steps that went bad. The checkpoints stay for chat and export.
        raise RunError(
            f"the run failed because its loss went bad at step {current.bad_loss_step}; resuming would repeat "
            "the same steps and fail again. Start a new run with a lower learning rate."
        )
    if not current.is_resumable:
        raise RunError(f"the run is {current.state}; only a stopped, failed or aborted run can be resumed")
    steps = checkpoint_steps(Path(run_dir))
    if not steps:
        raise RunError("the run has no checkpoint to resume from; start a new run instead")
    if checkpoint is None:
        return steps[-1]
    if checkpoint not in steps:
        raise RunError(f"no checkpoint {checkpoint}; the run has {', '.join(map(str, steps))}")
    return checkpoint


def _run_roots(run_dir: Path) -> list[int]:
    """The live processes that head a run: its supervisor, and its worker (rank 0) in case the supervisor died."""
    current = read_status(run_dir)
    if is_remote(current.host):  # another machine's pids: signalling them here would hit unrelated processes
        return []
    return [pid for pid in (current.supervisor_pid, current.pid) if is_alive(pid)]


def stop(run_dir: Path, signum: int = signal.SIGTERM) -> bool:
    """Ask the run to stop after its current step, saving a checkpoint. False if it was not running. ``signum``:
    SIGTERM, or SIGINT for a Ctrl-C passed on (the worker's log names the signal it got)."""
    if is_remote(read_status(run_dir).host):
        # A run on another node: the process that runs it there watches for this request (engine.runs.remote).
        if not status(run_dir).is_active:
            return False
        send_request(Path(run_dir), STOP)
        _drop_unanswerable_request(Path(run_dir))
        return True
    roots = _run_roots(Path(run_dir))
    if not roots:
        return False
    os.kill(roots[0], signum)  # the supervisor passes it on; a worker without one catches it itself
    return True


def _workers_of(run_dir: Path) -> list[int]:
    """Processes whose command line is ``... -m engine worker RUN_DIR``: the ranks of the run, found even
    when torchrun died before them and left them orphaned (outside any tree of the run)."""
    target = str(Path(run_dir).resolve())
    found = []
    for pid in proc_pids():
        args = command_line(pid)
        if target in args and any(args[i : i + 2] == ["engine", "worker"] for i in range(len(args))):
            found.append(pid)
    return found


def run_processes(run_dir: Path) -> list[int]:
    """Every live process of a run, parents first: the supervisor's and the worker's trees, and any orphaned
    rank (see _workers_of)."""
    roots = [*_run_roots(run_dir), *_workers_of(run_dir)]
    return list(dict.fromkeys(pid for root in roots for pid in process_tree(root)))


def abort(run_dir: Path, timeout: float = 10.0, reason: str = ABORTED_BY_USER) -> bool:
    """Kill the run and every process it started (torchrun ranks included), even a hung or stopped one; no
    checkpoint is saved. The run reads ``aborted`` (not failed: nothing went wrong in it), with ``reason`` as
    its error. Returns once they are gone; False if the run was not running."""
    run_dir = Path(run_dir)
    if is_remote(read_status(run_dir).host):
        return _abort_remote(run_dir, timeout, reason)
    pids = run_processes(run_dir)
    if not any(is_alive(pid) for pid in pids):
        return False
    kill_all(pids)  # first: a killed process drops the status lock it may hold
    # Under the status lock from here to "aborted": a reader that finds the processes gone meanwhile waits, then
    # sees "aborted" instead of recording a crash ("the training process is gone").
    with status_lock(run_dir):
        deadline = time.time() + timeout
        # A dying worker could still write its status: wait for the end before saying "aborted". Not is_alive: a
        # process tearing down its memory has no command line any more, yet it holds that memory (a GPU's too).
        while any(pid_alive(pid) for pid in pids) and time.time() < deadline:
            time.sleep(0.02)
        update_status(run_dir, state=ABORTED, ended_at=time.time(), error=reason)
    return True


def _abort_remote(run_dir: Path, timeout: float, reason: str) -> bool:
    """Abort a run on another node: its process there kills the run and records ``aborted`` (engine.runs.remote);
    wait up to ``timeout`` for that. A node that is gone cannot answer: its heartbeat stops and readers record the
    run failed."""
    if not status(run_dir).is_active:
        return False
    send_request(run_dir, ABORT, reason)
    _drop_unanswerable_request(run_dir)
    deadline = time.time() + timeout
    while status(run_dir).is_active and time.time() < deadline:
        time.sleep(0.1)
    return True


def _drop_unanswerable_request(run_dir: Path) -> None:
    """A run that ended between the look at its status and the request (its task clears the request file as it
    ends) will never read it: drop it, or it would stop the run's next segment at once."""
    if not status(run_dir).is_active:
        clear_request(run_dir)


@contextlib.contextmanager
def start_lock(workspace: Path) -> Iterator[None]:
    """Hold the workspace's start lock: one starter at a time across threads and processes.

    Two studios on one workspace (or two browser tabs of one) check "is another run active?" and then start
    a run; without the lock both could pass the check before either run is visible. ``flock`` on a file in
    the workspace (beside, not in, the runs directory) serialises them; the kernel drops it if the holder dies.
    """
    Path(workspace).mkdir(parents=True, exist_ok=True)
    with file_lock(start_lock_file(workspace)):
        yield


def delete(run_dir: Path) -> None:
    """Remove a run directory with its checkpoints; refuses (RunError) while the run is going. A queued run may
    go: under the workspace's start lock, so no scheduler starts it while its folder is being removed."""
    run_dir = Path(run_dir)
    workspace = workspace_of(run_dir)
    with start_lock(workspace) if workspace is not None else contextlib.nullcontext():
        if not (run_dir / CONFIG_FILE).is_file():
            raise RunError(f"{run_dir.name} is not a run")
        current = status(run_dir)
        if current.is_active:
            raise RunError(f"{current.name or run_dir.name} is {current.state}; stop it before deleting it")
        shutil.rmtree(run_dir)
