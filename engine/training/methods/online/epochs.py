"""The sampling methods' train sampler, made resumable in any epoch.

TRL's GRPOTrainer, RLOOTrainer and DistillationTrainer draw their prompts with ``RepeatSampler``, which shuffles
with one generator seeded once and draws the next permutation at each pass over the data. It has no
``set_epoch``, so a run resumed in its second or a later epoch builds a fresh sampler whose first pass is epoch 0's
order: Trainer then skips the batches already trained in *that* order, and the resumed run trains some prompts
twice, others not at all, and not the steps an unbroken run takes (measured: a GRPO, RLOO or distill run resumed
past its first epoch differed from the unbroken one at every later step). Trainer and accelerate call
``set_epoch(epoch)`` on a train sampler that has one before each pass (the resumed pass included), which is where
this wrapper sets the generator to the state an unbroken run's sampler has at that epoch.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch
from torch.utils.data import Sampler


class EpochReplayedSampler(Sampler):
    """A RepeatSampler whose ``set_epoch(n)`` re-seeds its generator and replays the ``n`` permutations an unbroken
    run draws before epoch ``n``: every pass is the unbroken run's, in TRL's own order (an unresumed run trains as
    with TRL's sampler). Replaying costs one ``randperm`` of the prompts per past epoch, nothing beside a step."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __iter__(self) -> Iterator[int]:
        return iter(self.inner)

    def __len__(self) -> int:
        return len(self.inner)

    def set_epoch(self, epoch: int) -> None:
        inner = self.inner
        if not inner.shuffle or inner.seed is None:  # no order to restore: unshuffled, or an unseeded generator
            return
        inner.generator.manual_seed(inner.seed)
        for _ in range(epoch):
            torch.randperm(inner.num_samples, generator=inner.generator)  # RepeatSampler draws one per pass
