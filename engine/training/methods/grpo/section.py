"""The config section of GRPO (method grpo): TRL's GRPOConfig knobs and the reward functions.

Read only by method grpo; the studio shows it when that method is chosen. The names and choices are TRL 1.16's; the
knobs every sampling method has are engine.training.methods.online.section's.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from engine.training.methods.online.section import SamplingSection
from engine.training.methods.reward_spec import RewardSpec

# GRPOConfig.loss_type in TRL 1.16.
GrpoLoss = Literal["grpo", "dr_grpo", "dapo", "bnpo", "cispo", "sapo", "luspo", "vespo"]


class GrpoSection(SamplingSection):
    """Group relative policy optimisation (method grpo): TRL's GRPOTrainer samples several answers per prompt,
    scores them with the reward functions and moves the policy towards the better ones of each group."""

    rewards: list[RewardSpec] = Field(
        default_factory=list,
        max_length=16,
        description="The reward functions and their weights; GRPO maximises their weighted sum.",
    )
    num_generations: int = Field(
        4, ge=2, le=64, description="Answers sampled per prompt; each is judged against the others of its group."
    )
    beta: float = Field(
        0.0,
        ge=0,
        le=100,
        description="Weight of the KL term to the reference model; 0 keeps no reference (faster, less memory).",
    )
    loss_type: GrpoLoss = Field(
        "dapo", description="TRL's GRPO loss: dapo (the default), grpo, dr_grpo, bnpo, cispo, sapo, luspo, vespo."
    )
    scale_rewards: Literal["group", "batch", "none"] = Field(
        "group", description="Divide the advantages by the rewards' spread within each group, the batch, or not."
    )
