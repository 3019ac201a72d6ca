"""REINFORCE leave-one-out with TRL's RLOOTrainer: the model samples ``num_generations`` answers per prompt with
transformers' ``generate`` (or vLLM on a GPU, when asked), the reward functions score them
(engine.training.rewards), less ``beta`` times each answer's KL to the reference, and each answer's advantage is
its reward less the mean of the others' in its group.

The prompts, the reward check and the samples written to the run directory are the sampling methods'
(engine.training.methods.online): RLOOTrainer keeps its samples in the same ``_logs`` as GRPOTrainer and counts its
tokens the same way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.training.methods.base import TrainerParts
from engine.training.methods.online.trainer import (
    check_data,
    frozen_reference,
    prepare_data,
    reference_lines,
    reward_functions_of,
    sampling_kwargs,
    sampling_trainer_class,
)

if TYPE_CHECKING:
    from engine.config import RunConfig
    from engine.training.hardware import Hardware

# A full or freeze fine-tune with a KL term keeps a frozen copy of the model as its reference.
frozen_models, check_lines = frozen_reference, reference_lines
__all__ = [
    "args_class",
    "build_trainer",
    "check_data",
    "check_lines",
    "frozen_models",
    "prepare_data",
    "training_kwargs",
]


def training_kwargs(config: RunConfig, hardware: Hardware) -> dict[str, Any]:
    """RLOOConfig's own arguments, from the rloo section."""
    rloo = config.rloo
    return {**sampling_kwargs(rloo), "normalize_advantages": rloo.normalize_advantages}


def args_class() -> type:
    """TRL's RLOOConfig."""
    from trl import RLOOConfig

    return RLOOConfig


def build_trainer(parts: TrainerParts) -> Any:
    """TRL's RLOOTrainer with the run's reward functions, writing samples of its answers (sampling_trainer_class)."""
    from trl import RLOOTrainer

    return sampling_trainer_class(RLOOTrainer)(reward_funcs=reward_functions_of(parts), **parts.trainer_kwargs())
