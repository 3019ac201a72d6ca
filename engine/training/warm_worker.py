"""The standby's worker (``python -m engine standby-worker``): it imports the training libraries ahead of time,
says it is ready, and trains the run a claim hands it (see engine.runs.standby for the handshake)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from engine.runs.standby import READY_LINE
from engine.store.rundir import LOG_FILE


def warm_imports() -> None:
    """Import what every run needs, and run autograd once, so a claimed run starts at its config."""
    import datasets  # noqa: F401
    import torch
    import transformers
    import trl  # noqa: F401
    from transformers import LlamaForCausalLM  # noqa: F401  (transformers imports model classes lazily)

    import engine.data  # noqa: F401
    import engine.training.builders  # noqa: F401
    import engine.training.callbacks  # noqa: F401
    import engine.training.methods  # noqa: F401
    import engine.training.modeling  # noqa: F401
    import engine.training.recipe  # noqa: F401

    transformers.logging.set_verbosity_error()
    layer = torch.nn.Linear(8, 8)
    layer(torch.randn(2, 8)).sum().backward()


def _redirect_output(log_path: Path) -> None:
    """From here on, everything this process prints goes to the run's train.log."""
    sys.stdout.flush()
    sys.stderr.flush()
    fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def serve_standby_worker() -> int:
    """Entry point of ``python -m engine standby-worker``: import, say ready, train the run it is given."""
    from engine.training.stopping import StopRequest

    warm_imports()
    sys.stdout.buffer.write(READY_LINE)
    sys.stdout.flush()
    line = sys.stdin.readline()
    if not line:
        return 0  # the standby retired without a run
    request = json.loads(line)
    run_dir = Path(request["run_dir"])
    stop = StopRequest()
    stop.install()
    _redirect_output(run_dir / LOG_FILE)
    os.chdir(run_dir)
    import torch

    torch.set_num_threads(int(request["threads"]))
    from engine.training.recipe import run

    return run(run_dir, request.get("checkpoint"), stop)
