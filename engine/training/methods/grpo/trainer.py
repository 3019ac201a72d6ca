"""Group relative policy optimisation with TRL's GRPOTrainer: the model samples ``num_generations`` answers per
prompt with transformers' ``generate`` (or vLLM on a GPU, when asked), the reward functions score them
(engine.training.rewards), and each answer is pushed up or down by how it fares against its group.

Generation is the slow part of a step, so TRL generates for ``steps_per_generation`` optimizer steps at once and
reuses the samples (the "subclassing Trainer" guide's reason for it); the config exposes that knob. The prompts,
the reward check and the samples written to the run directory are the sampling methods'
(engine.training.methods.online).
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
    """GRPOConfig's own arguments, from the grpo section."""
    grpo = config.grpo
    return {**sampling_kwargs(grpo), "loss_type": grpo.loss_type, "scale_rewards": grpo.scale_rewards}


def args_class() -> type:
    """TRL's GRPOConfig."""
    from trl import GRPOConfig

    return GRPOConfig


def build_trainer(parts: TrainerParts) -> Any:
    """TRL's GRPOTrainer with the run's reward functions, writing samples of its answers (sampling_trainer_class)."""
    from trl import GRPOTrainer

    return sampling_trainer_class(GRPOTrainer)(reward_funcs=reward_functions_of(parts), **parts.trainer_kwargs())
