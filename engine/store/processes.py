"""The engine's child processes: how ``python -m engine …`` is started, and how its processes are told apart,
reaped and killed. Standard library only.

Every child runs this very engine from any working directory (PYTHONPATH names the project), prints
unbuffered (its output goes to a log that others tail) and shows no progress bars (they garble logs).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from engine.store.paths import PROJECT_ROOT

_HAS_PROC = Path("/proc/self").exists()

# Processes this process started, by pid, so their exit codes can be read once they are reaped.
_children: dict[int, subprocess.Popen[bytes]] = {}


def engine_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of an engine child: this environment, the engine importable, unbuffered output, no
    progress bars unless asked for, and ``extra`` on top (the place for per-child settings and secrets)."""
    paths = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    root = str(PROJECT_ROOT)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join([root, *(p for p in paths if p and p != root)])
    env.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    env.update(extra or {})
    return env


def engine_command(*args: str) -> list[str]:
    """The command line of ``python -m engine *args`` with this interpreter."""
    return [sys.executable, "-m", "engine", *args]


def spawn_detached(args: list[str], **popen: Any) -> subprocess.Popen[bytes]:
    """Start ``python -m engine *args`` in a session of its own, so it outlives its starter (a browser refresh,
    a studio restart), and reap it when it ends. ``popen`` is passed on (cwd, stdout, env=extra variables)."""
    extra = popen.pop("env", None)
    popen.setdefault("stdin", subprocess.DEVNULL)
    popen.setdefault("stdout", subprocess.DEVNULL)
    popen.setdefault("stderr", subprocess.DEVNULL if popen["stdout"] is subprocess.DEVNULL else subprocess.STDOUT)
    process = subprocess.Popen(engine_command(*args), start_new_session=True, env=engine_env(extra), **popen)
    reap_in_background(process)
    return process


def reap_in_background(process: subprocess.Popen[bytes]) -> None:
    """Wait for a child in a thread, so it never lingers as a zombie that looks alive."""
    _children[process.pid] = process
    threading.Thread(target=process.wait, daemon=True, name=f"reap-{process.pid}").start()


def exit_code_of(pid: int | None) -> int | None:
    """The exit code of a child this process started and that has ended; None otherwise."""
    child = _children.get(pid or -1)
    if child is None:
        return None
    code = child.poll()  # None too while the reaping thread holds the child (it is collecting the code)
    if code is None and not pid_alive(child.pid):
        with contextlib.suppress(subprocess.TimeoutExpired):
            code = child.wait(timeout=5)  # ended: the reaping thread has it in a moment
    return code


def pid_alive(pid: int | None) -> bool:
    """Whether ``pid`` runs (a zombie, dead but not yet reaped by its parent, does not)."""
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        return _proc_stat(pid)[0] != "Z"
    except (OSError, IndexError):
        return not _HAS_PROC  # no /proc here: the signal test is all there is; else it is gone meanwhile


def is_alive(pid: int | None) -> bool:
    """Whether ``pid`` is a live (not zombie) process and, where /proc tells, an engine process: a recycled pid
    belongs to some other program, whose command line does not name the engine."""
    if not pid_alive(pid):
        return False
    if not _HAS_PROC:
        return True
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return False
    return "engine" in cmdline


def _proc_stat(pid: int | str) -> list[str]:
    """The fields of /proc/<pid>/stat after the command name: state, parent pid, ..."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def proc_pids() -> list[int]:
    """The pid of every process (none where there is no /proc)."""
    return [int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit()] if _HAS_PROC else []


def command_line(pid: int) -> list[str]:
    """The arguments of a process ([] once it is gone)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def process_tree(root: int) -> list[int]:
    """``root`` and all its descendants, from /proc (just ``root`` where there is no /proc).

    A run's processes do not share one process group: torchrun starts every rank in a session of its own, so
    killing the supervisor's group would leave the ranks training as orphans.
    """
    children: dict[int, list[int]] = {}
    for pid in proc_pids():
        try:
            parent = int(_proc_stat(pid)[1])
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
        children.setdefault(parent, []).append(pid)
    tree, pending = [], [root]
    while pending:
        pid = pending.pop()
        tree.append(pid)
        pending.extend(children.get(pid, []))
    return tree


def kill_all(pids: list[int]) -> None:
    """SIGKILL ``pids`` and their process groups (which take along any helper they started), parents first so
    that a killed torchrun restarts no rank; never the caller's own group (a foreground run in a terminal)."""
    own_group = os.getpgrp()
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            group = os.getpgid(pid)
            if group != own_group:
                os.killpg(group, signal.SIGKILL)
            os.kill(pid, signal.SIGKILL)


def signal_group(pid: int, signum: int) -> bool:
    """Send ``signum`` to the process group of ``pid``; False when it is gone."""
    try:
        os.killpg(os.getpgid(pid), signum)
    except ProcessLookupError:
        return False
    return True
