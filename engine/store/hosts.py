"""Which machine a run's processes live on, for runs started on another node of a cluster (a sweep's trial as a Ray
task, engine.sweeps.ray_executor) while the workspace sits on storage that every node mounts at the same path.
Standard library only.

A pid means something only on the machine that recorded it, so status.json's ``host`` names that machine (absent:
the machine reading it, as for every run recorded before hosts were). A reader on another machine cannot look at
such a run's processes; instead the process that runs it there (engine.runs.remote) touches a heartbeat file in
the run directory every few seconds, and watches a request file through which a Stop or an Abort from any machine
reaches it.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

from engine.store.rundir import write_text_atomic

HOST_VARIABLE = "ENGINE_HOST"  # overrides the hostname where nodes share one (containers, some schedulers)
HEARTBEAT_FILE = ".heartbeat"
REQUEST_FILE = ".request"
HEARTBEAT_S = 5.0
# Several missed beats, plus room for clocks that differ between nodes and for shared storage (NFS) that caches a
# file's times for up to a minute: past this a remote run is taken to be dead.
HEARTBEAT_LEASE_S = 120.0
# The host of a run handed to a cluster that has not yet placed it on a node (engine.sweeps.ray_executor): no
# machine is called this, so every reader judges such a run by the heartbeat its driver keeps meanwhile.
WAITING_FOR_NODE = "(waiting for a node)"
STOP = "stop"
ABORT = "abort"


def this_host() -> str:
    """The name status.json records for this machine: $ENGINE_HOST, else the hostname."""
    return os.environ.get(HOST_VARIABLE) or socket.gethostname()


def is_remote(host: str | None) -> bool:
    """Whether a status's ``host`` is another machine (its pids cannot be checked from here)."""
    return bool(host) and host != this_host()


def beat(run_dir: Path) -> None:
    """Say that the run's processes on this machine are alive (the heartbeat file's time is now)."""
    path = Path(run_dir) / HEARTBEAT_FILE
    path.touch()
    os.utime(path)  # touch() leaves the time of an existing file alone on some filesystems


def heartbeat_age(run_dir: Path) -> float | None:
    """Seconds since the run's last heartbeat; None when it never had one."""
    try:
        return max(0.0, time.time() - (Path(run_dir) / HEARTBEAT_FILE).stat().st_mtime)
    except FileNotFoundError:
        return None


def heartbeat_fresh(run_dir: Path) -> bool:
    """Whether the run's host was heard from within the lease."""
    age = heartbeat_age(run_dir)
    return age is not None and age < HEARTBEAT_LEASE_S


def send_request(run_dir: Path, action: str, reason: str | None = None) -> None:
    """Ask the process that runs the run on its host to stop (with a checkpoint) or to abort it."""
    write_text_atomic(Path(run_dir) / REQUEST_FILE, json.dumps({"action": action, "reason": reason}))


def read_request(run_dir: Path) -> tuple[str, str | None] | None:
    """The pending request (action, reason), or None."""
    try:
        stored = json.loads((Path(run_dir) / REQUEST_FILE).read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    return (stored.get("action"), stored.get("reason")) if isinstance(stored, dict) else None


def clear_request(run_dir: Path) -> None:
    """Forget a request (one left from an earlier segment of the run must not stop the next)."""
    (Path(run_dir) / REQUEST_FILE).unlink(missing_ok=True)
