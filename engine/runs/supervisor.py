"""The supervisor: a light parent of the training worker that outlives nothing it should not.

It starts the worker (one process, or torchrun for several), sends its output to train.log (and to the
terminal for a foreground run), forwards SIGTERM / SIGINT so the worker stops gracefully, and records the exit
code in status.json. A worker killed with SIGKILL thus still leaves a status that says what happened.
It imports no ML library, so it starts in milliseconds; forked by a warm server (engine.store.forks), it has them
imported already, and forks a single worker from itself instead of starting ``python -m engine worker``.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import shutil
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path
from types import ModuleType

from engine.runs.devices import Device, cuda_visible
from engine.store import fork_server
from engine.store.disk import NEARLY_FULL_BYTES
from engine.store.hosts import this_host
from engine.store.processes import engine_env
from engine.store.rundir import LOG_FILE, OPEN_STATES, read_status, release_reserve, update_status

FORKED_WORKER = "engine.training.forked_worker"  # what a forked worker runs (train_forked, exit_forked)


def launch_settings(run_dir: Path) -> tuple[int, int | None]:
    """Processes and threads per process from the run's config."""
    from engine.config import load_config
    from engine.store.rundir import CONFIG_FILE

    launch = load_config(run_dir / CONFIG_FILE).launch
    return launch.num_processes, launch.threads_per_process


def worker_command(run_dir: Path, checkpoint: int | None, num_processes: int) -> list[str]:
    """The command line of the training worker: ``python -m engine worker`` or torchrun around it."""
    args = ["-m", "engine", "worker", str(run_dir)]
    if checkpoint is not None:
        args += ["--checkpoint", str(checkpoint)]
    if num_processes == 1:
        return [sys.executable, *args]
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc_per_node={num_processes}",
        *args,
    ]


def worker_environment(num_processes: int, threads: int | None, devices: list[Device] | None = None) -> dict[str, str]:
    """The worker's environment: an engine child's, with a fair share of CPU threads per process, and only the
    run's GPUs visible (``devices``, engine.runs.devices; None leaves what this process sees)."""
    threads_env = {"OMP_NUM_THREADS": str(threads or max(1, (os.cpu_count() or 1) // num_processes))}
    return engine_env({**threads_env, **cuda_visible(devices)})


def describe_exit(code: int) -> str:
    """'exited with code 1' or 'was killed by SIGKILL'."""
    if code < 0:
        return f"was killed by {signal.Signals(-code).name}"
    return f"exited with code {code}"


def record_exit(run_dir: Path, code: int) -> None:
    """Store the exit code; a worker that died without a final state becomes a failed run that says why."""
    status = read_status(run_dir)
    if status.supervisor_pid != os.getpid():
        return  # the run was started again meanwhile; its status belongs to the new supervisor
    try:
        if status.state in OPEN_STATES:
            update_status(
                run_dir,
                state="failed",
                exit_code=code,
                ended_at=time.time(),
                error=f"the training process {describe_exit(code)} without finishing{_disk_note(run_dir)}",
            )
        else:
            update_status(run_dir, exit_code=code)
    except OSError as exc:  # nothing left to tell it with; a reader reconciles the status from the processes
        print(f"cannot record the exit of the run: {exc}", file=sys.stderr, flush=True)
    release_reserve(run_dir)  # the run is over: its final status is written


def _disk_note(run_dir: Path) -> str:
    """'; the disk is full ...' when the run directory's disk has (almost) no space left, else ''."""
    with contextlib.suppress(OSError):
        if shutil.disk_usage(run_dir).free < NEARLY_FULL_BYTES:
            return "; the disk is full (no space left on device, ENOSPC)"
    return ""


class ForkedWorker:
    """The training worker as a fork of this (warm) supervisor: what ``supervise`` uses of a Popen."""

    def __init__(self, pid: int):
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            with contextlib.suppress(ChildProcessError):  # reaped meanwhile by ``wait``
                pid, wait_status = os.waitpid(self.pid, os.WNOHANG)
                if pid == self.pid:
                    self.returncode = os.waitstatus_to_exitcode(wait_status)
        return self.returncode

    def wait(self) -> int:
        while self.returncode is None:
            try:
                _pid, wait_status = os.waitpid(self.pid, 0)
            except ChildProcessError:  # a signal handler's ``poll`` reaped it (and set the code) first
                break
            self.returncode = os.waitstatus_to_exitcode(wait_status)
        return self.returncode if self.returncode is not None else 1

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, signum)


def _forked_worker() -> ModuleType:
    """The worker's code in a forked worker. A cold start names the worker by its command (``python -m engine
    worker``), not by an import: the supervisor's side (no torch) stays below the training code it starts. The fork
    names it by module for the same reason; the fork server has imported it already."""
    return importlib.import_module(FORKED_WORKER)


def fork_worker(run_dir: Path, checkpoint: int | None, env: dict[str, str], output: int) -> ForkedWorker:
    """Start the worker as a fork of this supervisor, which a warm server forked with the training libraries
    imported (engine.store.forks): the same process as ``python -m engine worker`` without its seconds of imports.
    It stays in this process group and is this process's child, like the worker it stands for."""
    pid = os.fork()
    if pid == 0:  # the worker: whatever happens, it never returns into the supervisor's code
        code = 1
        try:
            os.dup2(output, 1)
            os.dup2(output, 2)
            os.environ.clear()
            os.environ.update(env)
            code = _forked_worker().train_forked(run_dir, checkpoint)
        except BaseException:
            traceback.print_exc()
        finally:
            try:
                _forked_worker().exit_forked(code)
            finally:
                os._exit(code)
    return ForkedWorker(pid)


def supervise(run_dir: Path, checkpoint: int | None = None) -> int:
    """Run the worker to its end and return its exit code."""
    num_processes, threads = launch_settings(run_dir)
    update_status(run_dir, supervisor_pid=os.getpid(), host=this_host())
    with open(run_dir / LOG_FILE, "ab") as log:
        how = ", warm fork" if fork_server.forked() else ""  # a fork of the warm server (engine.store.forks)
        log.write(f"\n=== {time.strftime('%Y-%m-%d %H:%M:%S')} start (checkpoint {checkpoint}{how}) ===\n".encode())
        log.flush()
        env = worker_environment(num_processes, threads, read_status(run_dir).devices)
        if fork_server.forked() and num_processes == 1:
            worker: subprocess.Popen[bytes] | ForkedWorker = fork_worker(run_dir, checkpoint, env, log.fileno())
        else:
            worker = subprocess.Popen(
                worker_command(run_dir, checkpoint, num_processes),
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
            )

        def forward(signum: int, _frame: object) -> None:
            if worker.poll() is None:
                worker.send_signal(signum)

        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, forward)
        code = worker.wait()
    record_exit(run_dir, code)
    return code
