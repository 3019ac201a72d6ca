"""Warm starts: a standby supervisor whose worker has already imported the training libraries.

A cold start pays several seconds of imports (torch, transformers, TRL, peft) before it can even read its
config. So a studio keeps one standby per workspace: a supervisor process (standard library only) whose
worker child has done those imports and waits on its stdin. ``claim`` hands it a run directory; from then on
it is an ordinary supervised run (output to train.log, signals forwarded, exit code recorded).

Handshake, all through files in ``WORKSPACE/.standby/`` so any process may claim:
``<pid>.pending`` while the worker imports, renamed to ``<pid>.ready`` when it can take a run; a claimant
renames ``ready`` to ``claimed`` (atomic, so exactly one claimant wins) and writes ``<pid>.claim.json``.

A standby imports nothing while a run of its workspace is active (it would steal that run's CPU), and an
unclaimed standby exits when the studio that started it is gone. Standard library only.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from engine.runs.status import active_runs
from engine.store.processes import engine_command, pid_alive, spawn_detached
from engine.store.rundir import LOG_FILE, update_status, write_text_atomic
from engine.store.workspace import standby_dir

READY_LINE = b"standby ready\n"
POLL_SECONDS = 0.02
CLAIM_WRITE_TIMEOUT = 10.0  # a claimant that renamed but never wrote its claim has died


def _marker(workspace: Path, pid: int, state: str) -> Path:
    return standby_dir(workspace) / f"{pid}.{state}"


def live_standbys(workspace: Path) -> list[int]:
    """Pids of the workspace's standbys that are importing or ready (stale markers of dead ones are removed)."""
    pids = []
    for marker in [*standby_dir(workspace).glob("*.pending"), *standby_dir(workspace).glob("*.ready")]:
        pid = int(marker.name.split(".")[0])
        if pid_alive(pid):
            pids.append(pid)
        else:
            marker.unlink(missing_ok=True)
    return pids


def claim(workspace: Path, run_dir: Path, checkpoint: int | None, threads: int) -> int | None:
    """Give ``run_dir`` to a ready standby of ``workspace``; returns its (supervisor) pid, None when none is ready."""
    for ready in sorted(standby_dir(workspace).glob("*.ready")):
        pid = int(ready.name.split(".")[0])
        claimed = _marker(workspace, pid, "claimed")
        try:
            ready.rename(claimed)  # atomic: of two claimants exactly one succeeds
        except FileNotFoundError:
            continue  # another claimant (or the standby retiring) was first
        if not pid_alive(pid):
            claimed.unlink(missing_ok=True)
            continue
        request = {"run_dir": str(Path(run_dir).resolve()), "checkpoint": checkpoint, "threads": threads}
        write_text_atomic(_marker(workspace, pid, "claim.json"), json.dumps(request))
        return pid
    return None


def start_standby(workspace: Path) -> subprocess.Popen[bytes] | None:
    """Start a standby for ``workspace`` unless one is already importing or ready; returns the new process."""
    if live_standbys(workspace):
        return None
    standby_dir(workspace).mkdir(parents=True, exist_ok=True)
    # A session of its own: a claimed standby is a run's supervisor, and must outlive the studio.
    return spawn_detached(["standby", str(Path(workspace).resolve()), "--owner", str(os.getpid())])


# --- the standby supervisor ---------------------------------------------------------------------------------


class _Standby:
    """One standby supervisor's life: wait for quiet, warm a worker, wait for a claim, supervise the run."""

    def __init__(self, workspace: Path, owner: int):
        self.workspace, self.owner, self.pid = Path(workspace), owner, os.getpid()
        self.worker: subprocess.Popen[bytes] | None = None

    def owner_gone(self) -> bool:
        return not pid_alive(self.owner)

    def wait_for_quiet(self) -> bool:
        """Wait until no run of the workspace is active; False if the studio went away meanwhile."""
        while active_runs(self.workspace):
            if self.owner_gone():
                return False
            time.sleep(1.0)
        return not self.owner_gone()

    def warm_worker(self) -> bool:
        """Start the worker and wait until it has imported everything; False if it died."""
        from engine.runs.supervisor import worker_environment

        self.worker = subprocess.Popen(
            engine_command("standby-worker"),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=worker_environment(1, None),
        )
        return any(line == READY_LINE for line in iter(self.worker.stdout.readline, b""))

    def wait_for_claim(self) -> dict[str, Any] | None:
        """Poll for a claim; None when the studio is gone (and no claimant was first) or the worker died."""
        ready = _marker(self.workspace, self.pid, "ready")
        claim_file = _marker(self.workspace, self.pid, "claim.json")
        claimed_since: float | None = None
        while True:
            if claim_file.exists():
                return json.loads(claim_file.read_text(encoding="utf-8"))
            if ready.exists():
                if self.owner_gone() or self.worker.poll() is not None:
                    with contextlib.suppress(FileNotFoundError):
                        ready.rename(_marker(self.workspace, self.pid, "retired"))
                        return None
            else:  # claimed: the claim file follows at once, unless the claimant died in between
                claimed_since = claimed_since or time.time()
                if time.time() - claimed_since > CLAIM_WRITE_TIMEOUT:
                    return None
            time.sleep(POLL_SECONDS)

    def supervise(self, request: dict[str, Any]) -> int:
        """Hand the run to the warm worker and supervise it like engine.runs.supervisor does."""
        from engine.runs.supervisor import record_exit

        run_dir = Path(request["run_dir"])
        update_status(run_dir, supervisor_pid=self.pid)
        with open(run_dir / LOG_FILE, "ab") as log:
            header = (
                f"\n=== {time.strftime('%Y-%m-%d %H:%M:%S')} start (checkpoint {request['checkpoint']}, warm) ===\n"
            )
            log.write(header.encode())
        worker = self.worker

        def forward(signum: int, _frame: object) -> None:
            if worker.poll() is None:
                worker.send_signal(signum)

        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, forward)
        worker.stdin.write(json.dumps(request).encode() + b"\n")
        worker.stdin.close()
        worker.stdout.close()  # the worker writes to train.log from here on
        code = worker.wait()
        record_exit(run_dir, code)
        return code

    def clean_up(self) -> None:
        for state in ("pending", "ready", "claimed", "claim.json", "retired"):
            _marker(self.workspace, self.pid, state).unlink(missing_ok=True)
        if self.worker and self.worker.poll() is None:
            self.worker.kill()
            self.worker.wait()


def serve_standby(workspace: Path, owner: int) -> int:
    """Entry point of ``python -m engine standby WORKSPACE --owner PID``; returns the exit code."""
    standby = _Standby(workspace, owner)
    pending = _marker(workspace, standby.pid, "pending")
    pending.parent.mkdir(parents=True, exist_ok=True)
    pending.touch()
    try:
        if not (standby.wait_for_quiet() and standby.warm_worker()):
            return 0
        pending.rename(_marker(workspace, standby.pid, "ready"))
        request = standby.wait_for_claim()
        return standby.supervise(request) if request else 0
    finally:
        standby.clean_up()
