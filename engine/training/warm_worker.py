"""The standby's worker (``python -m engine standby-worker``): it imports the training libraries ahead of time,
says it is ready, and trains the run a claim hands it (see engine.runs.standby for the handshake).

When that run is stopped, the worker does not exit: it tells its standby it is kept and waits for the run's
resume, which then starts at the run's config instead of at the imports. It trains nothing else (one process,
one config: no setting of one run's can leak into another's).
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import json
import os
import signal
import sys
from pathlib import Path
from typing import IO, Any

from engine.runs.standby import KEPT_LINE, READY_LINE
from engine.store.rundir import LOG_FILE, STOPPED, checkpoint_steps, read_status
from engine.training.trackers import writers_open

PR_SET_PDEATHSIG = 1


def warm_imports() -> None:
    """Import what every run needs, and run autograd once, so a claimed run starts at its config."""
    import torch
    import transformers

    training_imports()
    transformers.logging.set_verbosity_error()
    layer = torch.nn.Linear(8, 8)
    layer(torch.randn(2, 8)).sum().backward()


def training_imports() -> None:
    """Import what every run needs, and nothing more: a warm fork server (engine.store.forks) runs no torch
    operation, whose thread pools would not survive a fork."""
    import datasets  # noqa: F401
    import torch  # noqa: F401
    import transformers  # noqa: F401
    import trl  # noqa: F401
    from transformers import LlamaForCausalLM  # noqa: F401  (transformers imports model classes lazily)

    import engine.data  # noqa: F401
    import engine.training.builders  # noqa: F401
    import engine.training.callbacks  # noqa: F401
    import engine.training.methods  # noqa: F401
    import engine.training.modeling  # noqa: F401
    import engine.training.recipe  # noqa: F401


def _die_with_standby(die: bool) -> None:
    """While importing, end with the standby: it may have frozen this process (SIGSTOP while a run is active),
    and a frozen orphan would never notice that its stdin closed. A claimed worker is a run's worker, which
    outlives its supervisor like any other (a reader reconciles the status from the worker's pid). Linux only."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)  # this process's own symbols, the C library's among them
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL if die else 0)


def _redirect_output(log_path: Path) -> None:
    """From here on, everything this process prints goes to the run's train.log."""
    sys.stdout.flush()
    sys.stderr.flush()
    fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def train_request(request: dict[str, Any]) -> int:
    """Train the run a claim names (output to its train.log); returns the run's exit code."""
    from engine.training.stopping import StopRequest

    run_dir = Path(request["run_dir"])
    stop = StopRequest()  # a fresh one per run: the last run's may have been asked to stop
    stop.install()
    _die_with_standby(False)
    _redirect_output(run_dir / LOG_FILE)
    os.chdir(run_dir)
    import torch

    torch.set_num_threads(int(request["threads"]))  # the last run's CPU share may have lowered them
    from engine.training.recipe import run

    return run(run_dir, request.get("checkpoint"), stop)


def can_keep(run_dir: Path, code: int) -> bool:
    """Whether the worker may wait for the run's resume: it stopped cleanly with a checkpoint to resume from, and
    no tracker writer that must flush at exit was opened (engine.training.trackers.writers_open)."""
    if code != 0 or writers_open():
        return False
    return read_status(run_dir).state == STOPPED and bool(checkpoint_steps(run_dir))


def settle_heap() -> None:
    """Collect the garbage, then move every object still alive (modules, classes, caches: they stay for good)
    out of the collector's sight. Trainer.train starts with accelerate's free_memory, a full gc.collect, which
    walks the libraries' objects: 0.27-0.29 s before the first step of every run on the demo model, 0.0 s once
    they are frozen."""
    gc.collect()
    gc.freeze()


def _free_memory() -> None:
    """Drop what the stopped run left (its model, optimizer and data are garbage by now)."""
    settle_heap()
    import torch

    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def _say(pipe: IO[bytes], line: bytes) -> bool:
    """Tell the standby ``line``; False when it is gone."""
    try:
        pipe.write(line)
        pipe.flush()
    except (BrokenPipeError, OSError):
        return False
    return True


def serve_standby_worker() -> int:
    """Entry point of ``python -m engine standby-worker``: import, say ready, train the runs it is given."""
    standby = os.getppid()
    _die_with_standby(True)
    if os.getppid() != standby:  # it died before the line above could tell: nobody will claim this worker
        return 0
    warm_imports()
    settle_heap()
    # The pipe to the standby, kept apart from stdout, which goes to the run's train.log once a run is claimed.
    to_standby = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    if not _say(to_standby, READY_LINE):
        return 0
    code = 0
    while line := sys.stdin.readline():  # no line: the standby retired
        request = json.loads(line)
        code = train_request(request)
        if not can_keep(Path(request["run_dir"]), code):
            return code
        if not _say(to_standby, KEPT_LINE):  # first: the Stop is done once the standby has released the run
            return code
        _free_memory()  # a resume claimed meanwhile waits in the pipe until this is done
    return code
