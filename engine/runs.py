"""The API the studio (or any program) uses to create, start, watch, stop, abort and resume runs.

Everything goes through the run directory and signals, so a run outlives the program that started it: the
supervisor is started in its own process session, and any later reader can reconcile the status against the
live processes. Only the standard library and the config are imported (no torch).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.config import RunConfig, save_config
from engine.rundir import (
    ACTIVE_STATES,
    CONFIG_FILE,
    FINAL_STATES,
    checkpoint_steps,
    iter_metrics,
    log_tail,
    read_status,
    update_status,
)
from engine.rundir import read_metrics as _read_metrics

RUNS_DIR = "runs"
START_LOCK_FILE = ".start.lock"


class RunError(RuntimeError):
    """An action that does not fit the run's state (resume a running run, start a missing one, ...)."""


def runs_root(workspace: Path) -> Path:
    """The directory holding a workspace's runs."""
    return Path(workspace) / RUNS_DIR


def new_run_id(name: str | None) -> str:
    """A sortable, readable, unique id: time stamp plus a slug of the name."""
    slug = re.sub(r"[^a-z0-9]+", "-", (name or "run").lower()).strip("-")[:40] or "run"
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{os.urandom(2).hex()}-{slug}"


def create_run(config: RunConfig, workspace: Path | None = None, run_dir: Path | None = None) -> Path:
    """Make a run directory holding the config and a ``queued`` status; returns its path."""
    if run_dir is None:
        if workspace is None:
            raise ValueError("give a workspace or a run directory")
        run_dir = runs_root(workspace) / new_run_id(config.name)
    run_dir = Path(run_dir).resolve()
    if (run_dir / CONFIG_FILE).exists():
        raise RunError(f"{run_dir} already holds a run; resume it or choose another directory")
    run_dir.mkdir(parents=True, exist_ok=True)
    save_config(config, run_dir / CONFIG_FILE)
    update_status(run_dir, state="queued", name=config.name or run_dir.name, created_at=time.time())
    return run_dir


_children: dict[int, subprocess.Popen[bytes]] = {}


def _reap_in_background(process: subprocess.Popen[bytes]) -> None:
    """Wait for a supervisor we started so it never lingers as a zombie that looks alive."""
    _children[process.pid] = process
    threading.Thread(target=process.wait, daemon=True, name=f"reap-{process.pid}").start()


def start(run_dir: Path, checkpoint: int | None = None) -> int:
    """Start the run's supervisor in its own session (it survives its starter); returns its pid."""
    run_dir = Path(run_dir).resolve()
    if not (run_dir / CONFIG_FILE).is_file():
        raise RunError(f"{run_dir} is not a run directory (no {CONFIG_FILE})")
    current = status(run_dir)
    if is_active(current):
        raise RunError("the run is already running")
    _wait_for_exit(current.get("supervisor_pid"))
    update_status(
        run_dir,
        state="starting",
        error=None,
        exit_code=None,
        ended_at=None,
        pid=None,
        supervisor_pid=None,
        bad_loss_step=None,
    )
    warm = _claim_standby(run_dir, checkpoint)
    if warm:  # the standby records itself as the supervisor before its worker touches the status
        keep_standby(workspace_of(run_dir))  # the next one warms up once this run is over
        return warm
    command = [sys.executable, "-m", "engine", "supervise", str(run_dir)]
    if checkpoint is not None:
        command += ["--checkpoint", str(checkpoint)]
    process = subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        cwd=str(run_dir),
        env=dict(os.environ, PYTHONPATH=_engine_pythonpath()),
    )
    update_status(run_dir, supervisor_pid=process.pid)
    _reap_in_background(process)
    return process.pid


def workspace_of(run_dir: Path) -> Path:
    """The workspace a run directory belongs to (WORKSPACE/runs/<id>)."""
    return Path(run_dir).resolve().parent.parent


def _claim_standby(run_dir: Path, checkpoint: int | None) -> int | None:
    """Hand the run to a warm standby of its workspace when one is ready (single-process runs only)."""
    from engine import standby
    from engine.supervisor import launch_settings

    num_processes, threads = launch_settings(run_dir)
    if num_processes != 1 or not standby.standby_dir(workspace_of(run_dir)).is_dir():
        return None
    return standby.claim(workspace_of(run_dir), run_dir, checkpoint, threads or (os.cpu_count() or 1))


def keep_standby(workspace: Path) -> None:
    """Make sure the workspace has a warm standby for its next run (see engine.standby)."""
    from engine import standby

    process = standby.start_standby(workspace)
    if process:
        _reap_in_background(process)


def _wait_for_exit(pid: int | None, timeout: float = 15.0) -> None:
    """Let the previous supervisor finish recording its exit before a new one takes over the run."""
    deadline = time.time() + timeout
    while is_alive(pid) and time.time() < deadline:
        time.sleep(0.05)


def _engine_pythonpath() -> str:
    """PYTHONPATH that lets ``python -m engine`` import this very engine from any working directory."""
    root = str(Path(__file__).resolve().parent.parent)
    return os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))


def resume(run_dir: Path, checkpoint: int | None = None) -> int:
    """Continue a stopped or failed run from its newest (or the given) checkpoint; returns the supervisor pid."""
    current = status(run_dir)
    if is_active(current):
        raise RunError("the run is still running; stop it before resuming")
    if current.get("state") == "completed":
        raise RunError("the run has completed; there is nothing to resume")
    if current.get("state") == "failed" and current.get("bad_loss_step") is not None:
        # The checkpoint restores the optimizer, the schedule and the data order: resuming would replay the
        # very steps that went bad. The checkpoints stay for chat and export.
        raise RunError(
            f"the run failed because its loss went bad at step {current['bad_loss_step']}; resuming would repeat "
            "the same steps and fail again. Start a new run with a lower learning rate."
        )
    steps = checkpoint_steps(Path(run_dir))
    if not steps:
        raise RunError("the run has no checkpoint to resume from; start it again instead")
    if checkpoint is None:
        checkpoint = steps[-1]
    elif checkpoint not in steps:
        raise RunError(f"no checkpoint {checkpoint}; the run has {', '.join(map(str, steps))}")
    return start(run_dir, checkpoint)


def is_alive(pid: int | None) -> bool:
    """Whether ``pid`` is a live (not zombie) process and, where /proc tells, an engine process."""
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    proc = Path(f"/proc/{pid}")
    if not proc.exists():
        return True
    try:
        if proc.joinpath("stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
            return False
        # A recycled pid belongs to some other program: an engine process names the engine.
        cmdline = proc.joinpath("cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return False
    return "engine" in cmdline


def is_active(run_status: dict[str, Any]) -> bool:
    """Whether a (reconciled) status belongs to a run that is still going."""
    return run_status.get("state") in ACTIVE_STATES and run_status.get("state") != "queued"


def status(run_dir: Path) -> dict[str, Any]:
    """The run's status, reconciled against its processes.

    A status that says starting / running / stopping while neither the supervisor nor the worker lives is a
    crashed run: it is recorded as failed. Failed runs carry the tail of train.log.
    """
    run_dir = Path(run_dir)
    current = read_status(run_dir)
    state = current.get("state")
    if state in ACTIVE_STATES and state != "queued":
        alive = is_alive(current.get("supervisor_pid")) or is_alive(current.get("pid"))
        if not alive and not _just_started(current):
            code = current.get("exit_code")
            why = f"exit code {code}" if code is not None else "exit code unknown"
            current = _record(
                run_dir, current, state="failed", ended_at=time.time(), error=f"the training process is gone ({why})"
            )
    if current.get("state") == "failed":
        current["log_tail"] = log_tail(run_dir)
    current["checkpoints"] = checkpoint_steps(run_dir)
    current["run_dir"] = str(run_dir)
    return current


def _record(run_dir: Path, current: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """Write a reconciled status; a reader on a full (or read-only) disk still gets the reconciled view."""
    try:
        return update_status(run_dir, **changes)
    except OSError as exc:
        changes["error"] = f"{changes.get('error')}; the status could not be saved: {exc.strerror or exc}"
        return {**current, **changes}


def _just_started(current: dict[str, Any]) -> bool:
    """A status written a moment ago may not have its pid yet; give the supervisor a grace period."""
    return current.get("supervisor_pid") is None and time.time() - current.get("updated_at", 0) < 5


def _run_roots(run_dir: Path) -> list[int]:
    """The live processes that head a run: its supervisor, and its worker (rank 0) in case the supervisor died."""
    current = read_status(run_dir)
    return [pid for pid in (current.get("supervisor_pid"), current.get("pid")) if is_alive(pid)]


def stop(run_dir: Path) -> bool:
    """Ask the run to stop after its current step, saving a checkpoint. False if it was not running."""
    roots = _run_roots(Path(run_dir))
    if not roots:
        return False
    os.kill(roots[0], signal.SIGTERM)  # the supervisor passes it on; a worker without one catches it itself
    return True


def _proc_entries() -> list[Path]:
    """/proc/<pid> of every process (none where there is no /proc)."""
    proc = Path("/proc")
    return [entry for entry in proc.iterdir() if entry.name.isdigit()] if proc.joinpath("self").exists() else []


def process_tree(root: int) -> list[int]:
    """``root`` and all its descendants, from /proc (just ``root`` where there is no /proc).

    A run's processes do not share one process group: torchrun starts every rank in a session of its own, so
    killing the supervisor's group would leave the ranks training as orphans.
    """
    children: dict[int, list[int]] = {}
    for entry in _proc_entries():
        try:
            parent = int(entry.joinpath("stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
        children.setdefault(parent, []).append(int(entry.name))
    tree, pending = [], [root]
    while pending:
        pid = pending.pop()
        tree.append(pid)
        pending.extend(children.get(pid, []))
    return tree


def _workers_of(run_dir: Path) -> list[int]:
    """Processes whose command line is ``... -m engine worker RUN_DIR``: the ranks of the run, found even
    when torchrun died before them and left them orphaned (outside any tree of the run)."""
    target = str(Path(run_dir).resolve())
    found = []
    for entry in _proc_entries():
        try:
            args = entry.joinpath("cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        if target in args and any(args[i : i + 2] == ["engine", "worker"] for i in range(len(args))):
            found.append(int(entry.name))
    return found


def run_processes(run_dir: Path) -> list[int]:
    """Every live process of a run, parents first: the supervisor's and the worker's trees, and any orphaned
    rank (see _workers_of)."""
    roots = [*_run_roots(run_dir), *_workers_of(run_dir)]
    return list(dict.fromkeys(pid for root in roots for pid in process_tree(root)))


def _kill_all(pids: list[int]) -> None:
    """SIGKILL ``pids`` and their process groups (which take along any helper a rank started)."""
    own_group = os.getpgrp()
    for pid in pids:  # parents first: a killed torchrun restarts no rank
        with contextlib.suppress(ProcessLookupError, PermissionError):
            group = os.getpgid(pid)
            if group != own_group:  # never the caller's own group (a foreground run in a terminal)
                os.killpg(group, signal.SIGKILL)
            os.kill(pid, signal.SIGKILL)


def abort(run_dir: Path, timeout: float = 10.0) -> bool:
    """Kill the run and every process it started (torchrun ranks included), even a hung or stopped one; no
    checkpoint is saved. Returns once they are gone; False if the run was not running."""
    run_dir = Path(run_dir)
    pids = run_processes(run_dir)
    if not any(is_alive(pid) for pid in pids):
        return False
    _kill_all(pids)
    deadline = time.time() + timeout
    # A dying worker could still write its status: wait for the end before saying "aborted".
    while any(is_alive(pid) for pid in pids) and time.time() < deadline:
        time.sleep(0.02)
    update_status(run_dir, state="failed", ended_at=time.time(), error="aborted by the user")
    return True


def wait(run_dir: Path, timeout: float = 600, poll: float = 0.2) -> dict[str, Any]:
    """Block until the run reaches a final state (or the timeout passes); returns the status."""
    deadline = time.time() + timeout
    while True:
        current = status(run_dir)
        if current.get("state") in FINAL_STATES or time.time() > deadline:
            return current
        time.sleep(poll)


def read_metrics(run_dir: Path, offset: int = 0) -> tuple[list[dict[str, Any]], int]:
    """Metric events written since byte ``offset``, and the next offset (see engine.rundir.read_metrics)."""
    return _read_metrics(Path(run_dir), offset)


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
    started_at: float | None
    ended_at: float | None


def summarize(run_dir: Path) -> RunSummary:
    """The run list's view of one run (reads its whole metrics file; fine for a list refresh)."""
    current = status(run_dir)
    losses = [e["loss"] for e in iter_metrics(run_dir) if e.get("event") == "train" and "loss" in e]
    return RunSummary(
        run_id=run_dir.name,
        run_dir=run_dir,
        name=current.get("name") or run_dir.name,
        state=current.get("state", "unknown"),
        step=current.get("step") or 0,
        max_steps=current.get("max_steps") or 0,
        last_loss=losses[-1] if losses else None,
        best_loss=min(losses) if losses else None,
        created_at=current.get("created_at"),
        started_at=current.get("started_at"),
        ended_at=current.get("ended_at"),
    )


def run_dirs(workspace: Path) -> list[Path]:
    """The run directories of a workspace (any order)."""
    root = runs_root(workspace)
    return [child for child in root.iterdir() if (child / CONFIG_FILE).is_file()] if root.is_dir() else []


def active_runs(workspace: Path) -> list[Path]:
    """Runs of the workspace that are still going; reads only their statuses, so it is cheap to ask often."""
    return [run_dir for run_dir in run_dirs(workspace) if is_active(status(run_dir))]


def list_runs(workspace: Path) -> list[RunSummary]:
    """Every run of a workspace, newest first."""
    return sorted(
        (summarize(child) for child in run_dirs(workspace)), key=lambda run: run.created_at or 0, reverse=True
    )


@contextlib.contextmanager
def start_lock(workspace: Path) -> Iterator[None]:
    """Hold the workspace's start lock: one starter at a time across threads and processes.

    Two studios on one workspace (or two browser tabs of one) check "is another run active?" and then start
    a run; without the lock both could pass the check before either run is visible. ``flock`` on a file in
    the workspace (beside, not in, the runs directory) serialises them; the kernel drops it if the holder dies.
    """
    Path(workspace).mkdir(parents=True, exist_ok=True)
    with open(Path(workspace) / START_LOCK_FILE, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def delete(run_dir: Path) -> None:
    """Remove a run directory with its checkpoints; refuses (RunError) while the run is going."""
    run_dir = Path(run_dir)
    if not (run_dir / CONFIG_FILE).is_file():
        raise RunError(f"{run_dir.name} is not a run")
    current = status(run_dir)
    if is_active(current):
        raise RunError(f"{current.get('name') or run_dir.name} is {current['state']}; stop it before deleting it")
    shutil.rmtree(run_dir)
