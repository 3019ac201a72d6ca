"""Warm starts: a standby supervisor whose worker has already imported the training libraries.

A cold start pays several seconds of imports (torch, transformers, TRL, peft) before it can even read its
config. So a studio keeps one standby per workspace: a supervisor process (standard library only) whose
worker child has done those imports and waits on its stdin. ``claim`` hands it a run directory; from then on
it is an ordinary supervised run (output to train.log, signals forwarded, exit code recorded).

Handshake, all through files in ``WORKSPACE/.standby/`` so any process may claim:
``<pid>.pending`` while the worker imports, renamed to ``<pid>.ready`` when it can take a run; a claimant
renames ``ready`` to ``claimed`` (atomic, so exactly one claimant wins) and writes ``<pid>.claim.json``.

A run that a standby trained and that was stopped keeps its warm worker: the worker says so on its pipe, the
standby releases the run (its status names no process of it any more) and writes ``<pid>.kept``, holding the
run directory, so that the run's Resume is claimed at once instead of paying the imports again (the next fresh
standby can only import once the run has stopped, which takes longer than a person takes to click Resume).
A kept standby serves only the run it kept: a process that trained one config never trains another.

A standby takes no CPU from an active run of its workspace: it imports nothing while one is active, and if a run
becomes active while its worker imports, the worker is frozen (SIGSTOP) until the workspace is quiet again. An
unclaimed standby exits when the studio that started it is gone; a kept one also when another run becomes
active or its own run is started some other way. Standard library only.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from engine.runs.status import active_runs
from engine.store.processes import engine_command, pid_alive, spawn_detached
from engine.store.rundir import COMPLETED, LOG_FILE, PRUNED, is_run_dir, read_status, update_status, write_text_atomic
from engine.store.workspace import standby_dir

READY_LINE = b"standby ready\n"
KEPT_LINE = b"standby kept\n"  # the worker's word that its run stopped and it can take the run's resume
POLL_SECONDS = 0.02
QUIET_POLL_SECONDS = 1.0  # how often a waiting standby asks whether a run is active (reads every run's status)
FREEZE_POLL_SECONDS = 0.25  # while importing: how soon a run that became active gets the CPU back
CLAIM_WRITE_TIMEOUT = 10.0  # a claimant that renamed but never wrote its claim has died


def _marker(workspace: Path, pid: int, state: str) -> Path:
    return standby_dir(workspace) / f"{pid}.{state}"


def live_standbys(workspace: Path) -> list[int]:
    """Pids of the workspace's standbys that are importing or ready (stale markers of dead ones are removed).
    Kept standbys are not among them: they serve one stopped run, not the next Start."""
    pids = []
    for marker in [*standby_dir(workspace).glob("*.pending"), *standby_dir(workspace).glob("*.ready")]:
        pid = int(marker.name.split(".")[0])
        if pid_alive(pid):
            pids.append(pid)
        else:
            marker.unlink(missing_ok=True)
    return pids


def kept_standbys(workspace: Path) -> dict[int, Path]:
    """The workspace's kept standbys (pid -> the run each keeps its worker for); stale markers are removed."""
    kept = {}
    for marker in standby_dir(workspace).glob("*.kept"):
        pid = int(marker.name.split(".")[0])
        with contextlib.suppress(FileNotFoundError):  # claimed or retired meanwhile
            if pid_alive(pid):
                kept[pid] = Path(marker.read_text(encoding="utf-8"))
            else:
                marker.unlink()
    return kept


def claim(workspace: Path, run_dir: Path, checkpoint: int | None, threads: int) -> int | None:
    """Give ``run_dir`` to a standby of ``workspace``: the one that kept the run's own worker when there is one,
    else a ready one. Returns its (supervisor) pid, None when none is ready."""
    run_dir = Path(run_dir).resolve()
    kept = sorted(
        _marker(workspace, pid, "kept") for pid, kept_run in kept_standbys(workspace).items() if kept_run == run_dir
    )
    for marker in [*kept, *sorted(standby_dir(workspace).glob("*.ready"))]:
        pid = int(marker.name.split(".")[0])
        claimed = _marker(workspace, pid, "claimed")
        try:
            marker.rename(claimed)  # atomic: of two claimants exactly one succeeds
        except FileNotFoundError:
            continue  # another claimant (or the standby retiring) was first
        if not pid_alive(pid):
            claimed.unlink(missing_ok=True)
            continue
        request = {"run_dir": str(run_dir), "checkpoint": checkpoint, "threads": threads}
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
    """One standby supervisor's life: wait for quiet, warm a worker, wait for a claim, supervise the run (and
    the run's resumes while the worker is kept)."""

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
            time.sleep(QUIET_POLL_SECONDS)
        return not self.owner_gone()

    def warm_worker(self) -> bool:
        """Start the worker and wait until it has imported everything, frozen while a run is active; False if
        it died or the studio went away."""
        from engine.runs.supervisor import worker_environment

        self.worker = subprocess.Popen(
            engine_command("standby-worker"),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=worker_environment(1, None),
        )
        ready: list[bool] = []
        reader = threading.Thread(target=_read_until_ready, args=(self.worker, ready), daemon=True)
        reader.start()
        frozen = False
        while reader.is_alive():
            reader.join(FREEZE_POLL_SECONDS)
            if self.owner_gone():
                return False
            frozen = self._freeze(frozen, bool(active_runs(self.workspace)) and reader.is_alive())
        self._freeze(frozen, False)
        return bool(ready)

    def _freeze(self, frozen: bool, busy: bool) -> bool:
        """Stop the importing worker while a run is active and continue it once quiet; returns whether frozen."""
        if busy != frozen:
            with contextlib.suppress(ProcessLookupError):
                self.worker.send_signal(signal.SIGSTOP if busy else signal.SIGCONT)
        return busy

    def wait_for_claim(self, marker: str = "ready", run_dir: Path | None = None) -> dict[str, Any] | None:
        """Poll for a claim while ``<pid>.<marker>`` is up; None when the standby retires first (the studio is
        gone, the worker died, or, for a kept run, the run no longer waits for this worker)."""
        offered = _marker(self.workspace, self.pid, marker)
        claim_file = _marker(self.workspace, self.pid, "claim.json")
        claimed_since: float | None = None
        next_check = 0.0
        while True:
            if claim_file.exists():
                return json.loads(claim_file.read_text(encoding="utf-8"))
            if offered.exists():
                if time.time() >= next_check or self.worker.poll() is not None:
                    next_check = time.time() + QUIET_POLL_SECONDS
                    if self._should_retire(run_dir):
                        with contextlib.suppress(FileNotFoundError):
                            offered.rename(_marker(self.workspace, self.pid, "retired"))
                            return None
            else:  # claimed: the claim file follows at once, unless the claimant died in between
                claimed_since = claimed_since or time.time()
                if time.time() - claimed_since > CLAIM_WRITE_TIMEOUT:
                    return None
            time.sleep(POLL_SECONDS)

    def _should_retire(self, kept_run: Path | None) -> bool:
        if self.owner_gone() or self.worker.poll() is not None:
            return True
        return kept_run is not None and (self._run_gone_elsewhere(kept_run) or self._other_run_active(kept_run))

    def _run_gone_elsewhere(self, run_dir: Path) -> bool:
        """Whether the kept run will not come back to this worker: deleted, completed, or supervised by another
        process (resumed some other way). A run that reads ``starting`` with no supervisor is being started, by
        a claimant that may be about to claim this very standby: it is not gone. A pruned run (a sweep's trial) is
        over like a completed one."""
        if not is_run_dir(run_dir):
            return True
        current = read_status(run_dir)
        return current.state in (COMPLETED, PRUNED) or current.supervisor_pid not in (None, self.pid)

    def _other_run_active(self, run_dir: Path) -> bool:
        """Whether another run of the workspace is going: the kept worker's memory (a GPU's too) is its now."""
        return any(active.resolve() != run_dir for active in active_runs(self.workspace))

    def supervise(self, request: dict[str, Any]) -> int | None:
        """Hand the run to the warm worker and supervise it like engine.runs.supervisor does. Returns the exit
        code, or None when the run stopped and the worker is kept for its resume."""
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
        worker.stdin.flush()  # kept open: a kept worker reads its run's resume here
        # The worker writes to train.log; its pipe carries only the word that it is kept.
        kept = any(line == KEPT_LINE for line in iter(worker.stdout.readline, b""))
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, signal.SIG_DFL)  # no run to stop any more: a signal ends the standby
        if kept and worker.poll() is None:
            record_exit(run_dir, 0)
            self._release(run_dir)
            return None
        code = worker.wait()
        record_exit(run_dir, code)
        return code

    def _release(self, run_dir: Path) -> None:
        """The stopped run no longer has a process: say so in its status, so that readers, Abort and the next
        start do not take this idle standby for the run's supervisor."""
        if read_status(run_dir).supervisor_pid == self.pid:
            update_status(run_dir, supervisor_pid=None, pid=None)

    def keep(self, run_dir: Path) -> dict[str, Any] | None:
        """Offer the kept worker for the run's resume; the claim, or None once the standby retires."""
        write_text_atomic(_marker(self.workspace, self.pid, "kept"), str(run_dir))
        return self.wait_for_claim("kept", run_dir)

    def clean_up(self) -> None:
        for state in ("pending", "ready", "kept", "claimed", "claim.json", "retired"):
            _marker(self.workspace, self.pid, state).unlink(missing_ok=True)
        if self.worker and self.worker.poll() is None:
            self.worker.kill()
            self.worker.wait()


def _read_until_ready(worker: subprocess.Popen[bytes], ready: list[bool]) -> None:
    """Read the importing worker's output until it says it is ready (then stop: later lines belong to the
    supervisor) or ends."""
    for line in iter(worker.stdout.readline, b""):
        if line == READY_LINE:
            ready.append(True)
            return


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
        while request:
            code = standby.supervise(request)
            if code is not None:
                return code
            _marker(workspace, standby.pid, "claimed").unlink(missing_ok=True)
            _marker(workspace, standby.pid, "claim.json").unlink(missing_ok=True)
            request = standby.keep(Path(request["run_dir"]))
        return 0
    finally:
        standby.clean_up()
