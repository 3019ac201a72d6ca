"""Odds-ratio preference optimisation with TRL's ORPOTrainer: the supervised loss on the chosen answer plus a
term on the odds of chosen over rejected; no reference model.

ORPO lives in ``trl.experimental`` in TRL 1.16, whose API may change between releases: the project pins TRL
(pyproject.toml) and this file is the only place that touches it.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from engine.training.methods.base import TrainerParts
from engine.training.methods.paired import trainer as paired

if TYPE_CHECKING:
    from engine.config import RunConfig
    from engine.training.hardware import Hardware


# The run's rows as TRL's conversational preference pairs (what the preference methods share).
prepare_data = paired.prepare_data


def training_kwargs(config: RunConfig, hardware: Hardware) -> dict[str, Any]:
    """ORPOConfig's own arguments, from the orpo section."""
    return {"max_length": config.train.max_length, "beta": config.orpo.beta}


def _experimental() -> Any:
    """trl.experimental.orpo, without the warning it prints on import (the README says ORPO is experimental)."""
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    from trl.experimental import orpo

    return orpo


def args_class() -> type:
    """TRL's ORPOConfig."""
    return _experimental().ORPOConfig


def build_trainer(parts: TrainerParts) -> Any:
    """TRL's ORPOTrainer over the prepared pairs, counting the tokens it trains on."""
    return counted_orpo_trainer_class()(**parts.trainer_kwargs())


def counted_orpo_trainer_class() -> type:
    """ORPOTrainer that counts its tokens for the throughput chart. Trainer counts the tokens of
    ``inputs["input_ids"]``, and ORPO's batches have none: they hold prompt + chosen and prompt + rejected as
    ``chosen_*`` and ``rejected_*`` tensors, so every step would read 0 tokens per second."""
    import torch

    class CountedORPOTrainer(_experimental().ORPOTrainer):
        def _track_num_input_tokens(self, inputs: dict[str, Any]) -> None:
            if self.args.include_num_input_tokens_seen == "no":
                return
            masks = [inputs[key] for key in ("chosen_attention_mask", "rejected_attention_mask") if key in inputs]
            seen = torch.as_tensor(sum(int(mask.sum()) for mask in masks), device=self.args.device)
            self.state.num_input_tokens_seen += self.accelerator.gather(seen).sum().item()

    return CountedORPOTrainer
