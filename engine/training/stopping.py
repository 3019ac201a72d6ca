"""A graceful stop: SIGTERM / SIGINT set a flag that the trainer reads at the end of the current step.

Standard library only, so the worker installs it before its slow imports: a Stop pressed while the run is
still starting is caught too, instead of killing the process.
"""

from __future__ import annotations

import signal
from typing import Any


class StopRequest:
    """Set by SIGTERM / SIGINT; read by the callback at the end of the current step."""

    def __init__(self) -> None:
        self.requested = False
        self.signal_name: str | None = None

    def install(self) -> None:
        """Route SIGTERM and SIGINT here instead of killing the process mid-step."""
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._handle)

    def _handle(self, signum: int, _frame: Any) -> None:
        self.requested = True
        self.signal_name = signal.Signals(signum).name

    def agreed(self) -> bool:
        """Whether any process was asked to stop. Every rank must stop at the same step or DDP hangs, and a
        signal can reach the ranks a step apart, so several processes agree (see ``agree``)."""
        (stop,) = agree([self.requested])
        if stop and not self.requested:
            self.requested, self.signal_name = True, "stop on another rank"
        return stop


def agree(flags: list[bool]) -> list[bool]:
    """Each flag true on any process of the run, through one tiny all-reduce; a single process keeps its own.

    Every rank must call it at the same point (the end of a step, an evaluation, a save), as they all do.
    """
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1):
        return list(flags)
    import torch

    values = torch.tensor([int(flag) for flag in flags], device="cuda" if dist.get_backend() == "nccl" else "cpu")
    dist.all_reduce(values, op=dist.ReduceOp.MAX)
    return [bool(value) for value in values.tolist()]
