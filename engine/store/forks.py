"""Warm forks: a per-machine server that has imported the training libraries once and forks each run's supervisor
from itself, so neither the supervisor nor its worker (forked in turn, engine.runs.supervisor) pays the imports
(torch, transformers, TRL, peft, datasets: about 4.5 CPU-seconds per process on the demo machine, more than a
short run's training). Standard library only.

A starter (``start_forked``) sends the server the engine command, working directory, environment and standard
streams (file descriptors, over a Unix socket) and gets the pid of a process that runs ``python -m engine ARGS``
as if started with ``spawn_detached``: in a session of its own, outliving its starter. When no server is ready, the
starter starts one for the next time and says so (None): the caller then starts the cold way. A CLI command
(``run_forked``) hands itself over the same way and waits: a waiter forked beside it reports its exit code.

Why not Python's own ``multiprocessing`` forkserver: it serves only the process that started it (its address and
key live in that process), while runs are started by the studio, the CLI, sweeps and schedulers alike.

One server serves one environment: modules read some variables once, when imported (huggingface_hub's offline
mode among them), so the server's key holds the interpreter, the engine's code (a changed file means a new
server) and every environment variable except those that only the started process reads (``VOLATILE``). It
exits after ``IDLE_S`` without a request, unless a live process holds it (a studio: ``prepare``). Only CPU work is
forked: a process whose parent may have touched CUDA cannot use it (engine.runs.control, engine.runs.jobs and the CLI
decide). Linux only (fork, SCM_RIGHTS); elsewhere nothing is forked. The server itself: engine.store.fork_server.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import socket
import stat
import sys
import tempfile
import time
from pathlib import Path

from engine.store.paths import PROJECT_ROOT
from engine.store.processes import engine_env, pid_alive, spawn_detached

# What a server forks: a run's supervisor (which forks its worker), and the background jobs (engine.runs.jobs).
FORKED_COMMANDS = ("supervise", "evaluate", "export", "benchmark")
# What a CLI command hands to the server, waiting for its exit code (``run_forked``): those that import the libraries.
# Not ``sweep``: its driver imports little, and a killed driver must be gone at once (the same command continues it).
# ``chat-worker`` too: the studio's Chat starts it as a child and talks on its stdin / stdout, which the fork gets,
# so a model loads without the imports' seconds (the started process stays as the waiter that its client sees).
WAITED_COMMANDS = ("train", "resume", "check", "evaluate", "export", "benchmark", "chat-worker")
# Read by the started process only, never at import: they may differ between two starts served by one server.
# (TOKENIZERS_PARALLELISM: read by the tokenizers library when it first runs in parallel; the chat worker sets it.)
VOLATILE = frozenset(
    {"PYTEST_CURRENT_TEST", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "CUDA_VISIBLE_DEVICES", "TOKENIZERS_PARALLELISM", "_"}
)
SWITCH_ENV = "STUDIO_WARM_FORKS"
IDLE_S = 300.0  # a server nobody asked for this long exits (it holds the libraries' memory)
CONNECT_TIMEOUT_S = 10.0  # a server that takes longer to fork is stuck: start the cold way
MAX_REQUEST = 1 << 20
STREAMS = 3  # stdin, stdout, stderr


def available() -> bool:
    """Whether this machine can fork warm (Linux: fork and passing file descriptors over Unix sockets), and the
    environment does not turn it off (``STUDIO_WARM_FORKS=0``: every run starts cold, as before this existed)."""
    if os.environ.get(SWITCH_ENV, "1").strip().lower() in ("0", "false", "no", "off"):
        return False
    return sys.platform.startswith("linux") and hasattr(socket, "send_fds")


def _runtime_dir() -> Path:
    return Path(tempfile.gettempdir()) / f"engine-forks-{os.getuid()}"


def _runtime_dir_safe() -> bool:
    """Create the sockets' folder, and check that it is this user's alone: in a shared temporary folder another
    user could have made it first, and then listen at a server's address."""
    runtime = _runtime_dir()
    with contextlib.suppress(FileExistsError):
        runtime.mkdir(mode=0o700)
    info = runtime.lstat()
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and not info.st_mode & 0o077


def _code_stamp() -> str:
    """The newest modification of the engine's code: a server started before an edit serves the old code."""
    files = (PROJECT_ROOT / "engine").rglob("*.py")
    return str(max((f.stat().st_mtime_ns for f in files), default=0))


def server_key(env: dict[str, str]) -> str:
    """The key of the server that may fork a process with ``env``."""
    kept = sorted((name, value) for name, value in env.items() if name not in VOLATILE)
    text = json.dumps([sys.executable, str(PROJECT_ROOT), _code_stamp(), kept])
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def socket_path(key: str) -> Path:
    return _runtime_dir() / f"{key}.sock"


# --- the starter's side ------------------------------------------------------------------------------------------


def start_forked(args: list[str], cwd: str, stdout: int | None = None) -> int | None:
    """Start ``python -m engine *args`` as a fork of this machine's warm server, in a session of its own, its output
    to ``stdout`` (a file descriptor; default /dev/null); returns its pid. None when no server is ready (one is then
    being started for the next time) or the server failed: start the cold way."""
    if not available() or args[0] not in FORKED_COMMANDS:
        return None
    try:
        if not _runtime_dir_safe():
            return None
    except OSError:
        return None
    env = engine_env()
    key = server_key(env)
    try:
        return _ask(socket_path(key), {"args": args, "cwd": cwd, "env": env}, stdout)
    except (OSError, ValueError):
        if _wanted_again(key):
            start_server(key)
        return None


def run_forked(args: list[str]) -> int | None:
    """Run this very command, ``python -m engine ARGS``, as a fork of the warm server on this process's standard
    streams, and wait for it; returns its exit code (None: run it here, cold; no server is ready, and one is being
    started for the next time). Ctrl-C, SIGTERM and a closed terminal reach it as they would have reached this
    process; killed by a signal, it ends this process with the same signal."""
    if not available() or not args or args[0] not in WAITED_COMMANDS:
        return None
    key = server_key(engine_env())
    try:
        if not _runtime_dir_safe():
            return None
        request = {"args": args, "cwd": os.getcwd(), "env": dict(os.environ), "wait": True}
        conn, pid = _request(socket_path(key), request, [0, 1, 2])
    except (OSError, ValueError):
        if _wanted_again(key):
            start_server(key)
        return None
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, lambda number, _frame: _pass_on(pid, number))
    with conn:
        conn.settimeout(None)
        answer = conn.recv(64)
    code = int(answer) if answer.lstrip(b"-").isdigit() else 1
    if code < 0:  # killed by a signal: end the same way, for whoever waits on this process
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    return code


def _pass_on(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signum)


def prepare(holder: int) -> bool:
    """Have this environment's server ready for the starts to come (a studio calls this as it opens, instead of
    keeping a warm standby), and keep it while process ``holder`` lives, idle or not. False where nothing can be
    forked (engine.runs.control then keeps a standby)."""
    if not available():
        return False
    try:
        if not _runtime_dir_safe():
            return False
        key = server_key(engine_env())
        (_runtime_dir() / f"{key}.held-by-{holder}").touch()
        if not _answers(socket_path(key)):
            start_server(key)
    except OSError:
        return False
    return True


def held_server(holder: int) -> Path | None:
    """The socket of a listening server that ``holder`` holds (``prepare``), if any (for benchmarks and tests)."""
    for mark in _runtime_dir().glob(f"*.held-by-{holder}"):
        path = socket_path(mark.name.split(".", 1)[0])
        if path.exists():
            return path
    return None


def _answers(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as probe:
        try:
            probe.connect(str(path))
        except OSError:
            return False
    return True


def _wanted_again(key: str) -> bool:
    """Whether the key was asked for before, within ``IDLE_S``: a server pays the imports once more, which only a
    second start repays (a script's one-off environment never gets one)."""
    with contextlib.suppress(OSError):
        wanted = _runtime_dir() / f"{key}.wanted"
        again = wanted.exists() and time.time() - wanted.stat().st_mtime < IDLE_S
        wanted.touch()
        return again
    return False


def _ask(path: Path, request: dict, stdout: int | None) -> int:
    devnull = os.open(os.devnull, os.O_RDWR)
    try:
        out = devnull if stdout is None else stdout
        conn, pid = _request(path, request, [devnull, out, out])
        conn.close()
    finally:
        os.close(devnull)
    return pid


def _request(path: Path, request: dict, fds: list[int]) -> tuple[socket.socket, int]:
    """Send ``request`` with the standard streams ``fds`` to the server at ``path``; the open connection and the pid
    of the process it forked. OSError when no server answers, ValueError when it refuses."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        conn.settimeout(CONNECT_TIMEOUT_S)
        conn.connect(str(path))
        socket.send_fds(conn, [json.dumps(request).encode()], fds)
        answer = conn.recv(64)
        if not answer.isdigit():
            raise ValueError(f"the fork server answered {answer!r}")
    except BaseException:
        conn.close()
        raise
    return conn, int(answer)


def start_server(key: str) -> None:
    """Start the key's server unless one is starting (its pid in ``KEY.starting``)."""
    runtime = _runtime_dir()
    with contextlib.suppress(OSError):
        if not _runtime_dir_safe():
            return
        starting = runtime / f"{key}.starting"
        with contextlib.suppress(ValueError, OSError):
            if pid_alive(int(starting.read_text() or 0)):
                return
        starting.unlink(missing_ok=True)
        _tidy(runtime)
        fd = os.open(starting, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with open(runtime / f"{key}.log", "ab") as log:  # what went wrong, when a server never comes up
            process = spawn_detached(["fork-server", str(socket_path(key))], cwd=str(PROJECT_ROOT), stdout=log)
        os.write(fd, str(process.pid).encode())
        os.close(fd)


def _tidy(runtime: Path) -> None:
    """Remove what says nothing any more: marks of starts older than ``IDLE_S``, and the empty logs of servers that
    are gone (a log that says something stays: why a server never came up)."""
    now = time.time()
    for path in runtime.iterdir():
        with contextlib.suppress(OSError):
            info = path.stat()
            stale = now - info.st_mtime > IDLE_S
            quiet_log = path.suffix == ".log" and not info.st_size and not path.with_suffix(".sock").exists()
            if stale and (path.suffix == ".wanted" or quiet_log):
                path.unlink()


def wait_for_server(key: str, timeout: float) -> bool:
    """Whether the key's server listens within ``timeout`` seconds (for tests and benchmarks)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if socket_path(key).exists():
            return True
        time.sleep(0.05)
    return False
