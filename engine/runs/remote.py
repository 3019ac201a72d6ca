"""A run driven in the foreground on the machine that calls ``run_here``: a sweep's trial as a Ray task on whichever
node of the cluster Ray picked (engine.sweeps.ray_executor). No torch, no ray: the caller wraps it.

It starts the run's supervisor (``python -m engine supervise RUN_DIR``, as engine.runs.start does) as its own
child, not detached, and waits for it, so the task holds its GPUs and CPUs for exactly as long as the run trains and
a task that is killed takes the run with it. While it waits it stands in for this node towards the machine that
follows the run over the shared storage, which cannot see this node's processes (engine.store.hosts):

- status.json records this node as the run's ``host``;
- the heartbeat file is touched every few seconds, so a reader elsewhere knows the run lives (and, once the beats
  stop, that it does not);
- a Stop or Abort requested elsewhere (engine.runs.stop / abort write a request file) becomes SIGTERM to the
  supervisor here (it stops after the current step with a checkpoint) or an abort of the run here;
- a supervisor that dies without a final state (SIGKILL, out of memory) leaves the run ``failed``, saying so.
"""

from __future__ import annotations

import signal
import subprocess
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from engine.runs.control import RunError, abort
from engine.runs.supervisor import describe_exit
from engine.store.hosts import (
    ABORT,
    HEARTBEAT_S,
    STOP,
    WAITING_FOR_NODE,
    beat,
    clear_request,
    read_request,
    this_host,
)
from engine.store.processes import engine_command, engine_env
from engine.store.rundir import (
    FAILED,
    OPEN_STATES,
    STOPPED,
    STORED_FIELDS,
    is_run_dir,
    next_segment,
    read_status,
    update_status,
)

POLL_S = 0.5  # how soon a request from elsewhere is acted on


def run_here(run_dir: str, checkpoint: int | None = None, poll_s: float = POLL_S) -> dict[str, Any]:
    """Train the run on this machine to its end (from ``checkpoint`` when given) and return its final status.json.

    RunError when this machine cannot see the run directory (the workspace is not on storage every node mounts at
    the same path) or the run is already active.
    """
    path = Path(run_dir)
    host = this_host()
    if not path.is_absolute() or not is_run_dir(path):
        raise RunError(
            f"{run_dir} is not a run directory on {host}: the workspace must be on storage that every node of the "
            "cluster mounts at the same absolute path"
        )
    current = read_status(path)
    if current.is_active and current.host != WAITING_FOR_NODE:  # (else: a driver handed it to this task)
        raise RunError(f"{run_dir} is already {current.state} (on {current.host or 'its host'})")
    beat(path)  # before the status names this host: a reader elsewhere then finds a fresh heartbeat at once
    update_status(
        path,
        state="starting",
        host=host,
        error=None,
        exit_code=None,
        pid=None,
        supervisor_pid=None,
        bad_loss_step=None,
        # Ray gave the task its GPUs (CUDA_VISIBLE_DEVICES, which the supervisor then leaves alone): the run holds
        # none of the devices a studio's scheduler hands out (engine.runs.devices), here or on any other machine.
        devices=[],
        **next_segment(current),
    )
    if read_request(path) is not None:  # stopped or aborted while it waited for a node: it does not begin
        clear_request(path)
        return _ended(path, STOPPED)
    args = ["supervise", str(path)] + (["--checkpoint", str(checkpoint)] if checkpoint is not None else [])
    supervisor = subprocess.Popen(
        engine_command(*args),
        cwd=str(path),
        env=engine_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,  # the supervisor writes train.log itself
        stderr=subprocess.DEVNULL,
    )
    update_status(path, supervisor_pid=supervisor.pid)
    try:
        code = _wait(path, supervisor, poll_s)
    finally:
        if supervisor.poll() is None:  # the task is being cancelled or its worker is going away
            supervisor.send_signal(signal.SIGTERM)
    _record_end(path, supervisor.pid, code)
    clear_request(path)
    return _stored(path)


def _stored(run_dir: Path) -> dict[str, Any]:
    return {key: value for key, value in asdict(read_status(run_dir)).items() if key in STORED_FIELDS}


def _ended(run_dir: Path, state: str) -> dict[str, Any]:
    update_status(run_dir, state=state, ended_at=time.time())
    return _stored(run_dir)


def _wait(run_dir: Path, supervisor: subprocess.Popen[bytes], poll_s: float) -> int:
    """Wait for the supervisor, beating the heartbeat and acting on requests; returns its exit code."""
    acted: str | None = None
    next_beat = time.monotonic() + HEARTBEAT_S
    while True:
        try:
            return supervisor.wait(timeout=poll_s)
        except subprocess.TimeoutExpired:
            pass
        if time.monotonic() >= next_beat:
            beat(run_dir)
            next_beat = time.monotonic() + HEARTBEAT_S
        request = read_request(run_dir)
        if request is None or request[0] == acted:
            continue
        action, reason = request
        if action == STOP and acted is None:
            supervisor.send_signal(signal.SIGTERM)  # it passes it on: the worker saves a checkpoint and stops
        elif action == ABORT:
            abort(run_dir, reason=reason or "aborted by the user")  # this host's pids: a local abort
        acted = action


def _record_end(run_dir: Path, supervisor_pid: int, code: int) -> None:
    """A supervisor records how its run ended; one that was killed cannot: the run is then failed here."""
    update_status(
        run_dir,
        when=lambda stored: stored.state in OPEN_STATES and stored.supervisor_pid == supervisor_pid,
        state=FAILED,
        exit_code=code,
        ended_at=time.time(),
        error=f"the run's supervisor {describe_exit(code)} on {this_host()} without recording the end of the run",
    )
