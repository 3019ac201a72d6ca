"""The sampling methods' train sampler, made resumable in any epoch.

TRL's GRPOTrainer, RLOOTrainer and DistillationTrainer draw their prompts with ``RepeatSampler``, which shuffles
with one generator seeded once and draws the next permutation at each pass over the data. It has no
``set_epoch``, so a run resumed in its second or a later epoch builds a fresh sampler whose first pass is epoch 0's
order: Trainer then skips the batches already trained in *that* order, and the resumed run trains some prompts
twice, others not at all, and not the steps an unbroken run takes (measured: a run of each sampling method resumed
past its first epoch differed from the unbroken one at every later step). ``EpochReplayedSampler`` sets the
generator to the state an unbroken run's sampler has at the start of each epoch.

A callback (``SamplerEpochs``) tells it the epoch at the start of each of Trainer's epochs. Not ``set_epoch``,
which Trainer and accelerate call on a sampler that has one: they do not reach it through every wrapping (with
several processes the resumed pass's loader, accelerate's skip of the batches already trained around its
per-process shard, hides the sampler from them, and that pass alone went wrong), and one way to learn the epoch
on one process and on several is one to keep right.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import torch
from torch.utils.data import Sampler
from transformers import TrainerCallback


class EpochReplayedSampler(Sampler):
    """A RepeatSampler whose ``start_epoch(n)`` re-seeds its generator and replays the ``n`` permutations an unbroken
    run draws before epoch ``n``: every pass is the unbroken run's, in TRL's own order (an unresumed run trains as
    with TRL's sampler). Replaying costs one ``randperm`` of the prompts per past epoch, nothing beside a step."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __iter__(self) -> Iterator[int]:
        return iter(self.inner)

    def __len__(self) -> int:
        return len(self.inner)

    def start_epoch(self, epoch: int) -> None:
        inner = self.inner
        if not inner.shuffle or inner.seed is None:  # no order to restore: unshuffled, or an unseeded generator
            return
        inner.generator.manual_seed(inner.seed)
        for _ in range(epoch):
            torch.randperm(inner.num_samples, generator=inner.generator)  # RepeatSampler draws one per pass


class SamplerEpochs(TrainerCallback):
    """At the start of each epoch, sets it on the trainer's EpochReplayedSampler (``trainer.epoch_sampler``, made
    when the train loader is): the resumed epoch is ``floor(state.epoch)`` of the checkpoint's state, as Trainer's
    own count of the epochs trained (its steps over the steps of an epoch)."""

    def __init__(self, trainer: Any) -> None:
        self.trainer = trainer

    def on_epoch_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        sampler = getattr(self.trainer, "epoch_sampler", None)
        if sampler is not None:
            sampler.start_epoch(math.floor(state.epoch or 0))
