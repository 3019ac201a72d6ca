"""The warm fork server (engine.store.forks has the starters' side): ``python -m engine fork-server SOCKET`` imports
the training libraries once, then forks a process for each request, which becomes ``python -m engine ARGS`` with the
starter's directory, environment and standard streams. A waited request (a CLI command handing itself over) gets a
waiter forked beside it, which reports its exit code. Standard library only.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import sys
import traceback
from collections.abc import Callable
from pathlib import Path

from engine.store.forks import CONNECT_TIMEOUT_S, FORKED_COMMANDS, IDLE_S, MAX_REQUEST, STREAMS, WAITED_COMMANDS
from engine.store.processes import pid_alive

_in_fork = False  # True in a process forked by a server: it has the training libraries imported


def forked() -> bool:
    """Whether this process was forked by a warm server (its training libraries are imported already)."""
    return _in_fork


def serve(
    path: Path, warm_up: Callable[[], None], main: Callable[[list[str]], int], idle_s: float | None = None
) -> int:
    """Entry point of ``python -m engine fork-server PATH``: import (``warm_up``), listen at ``path``, fork a process
    for each request that runs ``main(args)`` (the engine's CLI), until idle for ``idle_s`` (default ``IDLE_S``) and
    held by no live process (``prepare``)."""
    idle_s = IDLE_S if idle_s is None else idle_s
    warm_up()
    import gc

    gc.collect()
    gc.freeze()  # the libraries' objects stay for good: the collector of each fork need not walk them
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the forks end on their own: no zombie waits for this server
    listener = _listen(path)
    bound = path.stat().st_ino  # a later server of the same key may have replaced the file: leave that one
    try:
        while select.select([listener], [], [], idle_s)[0] or _held(path):
            if not select.select([listener], [], [], 0)[0]:
                continue  # idle, but held: wait on
            with contextlib.suppress(OSError, ValueError, LookupError, TypeError):  # a bad request: the next one
                conn, _ = listener.accept()
                with conn:
                    _serve_one(conn, listener, main)
    finally:
        with contextlib.suppress(OSError):
            if path.stat().st_ino == bound:
                path.unlink()
        listener.close()
    return 0


def _listen(path: Path) -> socket.socket:
    """Listen at ``path``, appearing there whole (bound under a temporary name, then renamed)."""
    path.parent.mkdir(mode=0o700, exist_ok=True)
    temporary = path.with_name(f"{path.stem}.{os.getpid()}.tmp")
    temporary.unlink(missing_ok=True)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(str(temporary))
    os.chmod(temporary, 0o600)
    listener.listen(16)
    os.replace(temporary, path)
    path.with_name(f"{path.stem}.starting").unlink(missing_ok=True)
    return listener


def _serve_one(conn: socket.socket, listener: socket.socket, main: Callable[[list[str]], int]) -> None:
    conn.settimeout(CONNECT_TIMEOUT_S)
    message, fds, _flags, _address = socket.recv_fds(conn, MAX_REQUEST, STREAMS)
    try:
        if not message:
            return  # a probe (``prepare``): it only wanted to know that this server answers
        request = json.loads(message)
        allowed = WAITED_COMMANDS if request.get("wait") else FORKED_COMMANDS
        if len(fds) != STREAMS or request["args"][0] not in allowed:
            conn.sendall(b"refused")
            return
        if request.get("wait"):
            _fork_waited(request, fds, conn, listener, main)
            return
        pid = os.fork()
        if pid == 0:
            _become(request, fds, [conn, listener], main)
        conn.sendall(str(pid).encode())
    finally:
        for fd in fds:
            os.close(fd)


def _fork_waited(
    request: dict, fds: list[int], conn: socket.socket, listener: socket.socket, main: Callable[[list[str]], int]
) -> None:
    """Fork a waiter that forks the command and tells the starter its pid, then its exit code. The server cannot
    wait for it itself (it serves the next request meanwhile), and only a parent can read a process's exit code."""
    if os.fork() != 0:
        return
    try:  # the waiter: whatever happens, it never returns into the server's loop
        listener.close()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the server ignores it, which would reap the command unseen
        pid = os.fork()
        if pid == 0:
            _become(request, fds, [conn], main)
        for fd in fds:
            os.close(fd)  # the starter's streams end when the command ends, not when this waiter does
        conn.sendall(str(pid).encode())
        code = _wait_watching(pid, conn)
        with contextlib.suppress(OSError):
            conn.sendall(str(code).encode())
    finally:
        os._exit(0)


def _wait_watching(pid: int, conn: socket.socket) -> int:
    """Wait for the command to end; if its starter goes first (its end of the connection closes), hang it up, as a
    closed terminal would. Returns its exit code (negative: the signal that killed it)."""
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):  # before Linux 5.3: wait without watching the starter
        return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    watched = [pidfd, conn]
    while pidfd not in select.select(watched, [], [])[0]:
        watched = [pidfd]  # the starter is gone
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGHUP)
    os.close(pidfd)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def _become(request: dict, fds: list[int], sockets: list[socket.socket], main: Callable[[list[str]], int]) -> None:
    """In the fork: become ``python -m engine ARGS`` as the starter asked (its session, streams, directory and
    environment), run it, and exit with its code; never return into the server's loop."""
    global _in_fork
    code = 1
    try:
        for held in sockets:
            held.close()
        os.setsid()
        for number, fd in enumerate(fds):
            os.dup2(fd, number)
            os.close(fd)
        for signum in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, signal.SIG_DFL)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv = [sys.argv[0], *request["args"]]
        _match_threads()
        _in_fork = True
        code = main(request["args"])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _match_threads() -> None:
    """Give torch the thread count the new environment asks for: it read the server's when it was imported."""
    torch = sys.modules.get("torch")
    if torch is not None:
        threads = os.environ.get("OMP_NUM_THREADS", "")
        torch.set_num_threads(int(threads) if threads.isdigit() and int(threads) > 0 else len(os.sched_getaffinity(0)))


def _held(path: Path) -> bool:
    """Whether a live process holds the server at ``path`` (``prepare``); the marks of gone ones are removed."""
    held = False
    for mark in path.parent.glob(f"{path.stem}.held-by-*"):
        with contextlib.suppress(ValueError, OSError):
            if pid_alive(int(mark.name.rsplit("-", 1)[1])):
                held = True
            else:
                mark.unlink()
    return held
