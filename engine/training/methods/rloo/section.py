"""The config section of RLOO (method rloo): TRL's RLOOConfig knobs and the reward functions.

Read only by method rloo; the studio shows it when that method is chosen. The names are TRL 1.16's; the defaults
are TRL's but for num_generations and max_completion_length, which are GRPO's here, for a CPU. The knobs every
sampling method has are engine.training.methods.online.section's.
"""

from __future__ import annotations

from pydantic import Field

from engine.training.methods.online.section import SamplingSection
from engine.training.methods.reward_spec import RewardSpec


class RlooSection(SamplingSection):
    """REINFORCE leave-one-out (method rloo): TRL's RLOOTrainer samples several answers per prompt, scores them with
    the reward functions and moves the policy towards those that score above the mean of the others."""

    rewards: list[RewardSpec] = Field(
        default_factory=list,
        max_length=16,
        description="The reward functions and their weights; RLOO maximises their weighted sum.",
    )
    num_generations: int = Field(
        4,
        ge=2,
        le=64,
        description="Answers sampled per prompt; each answer's baseline is the mean reward of the others.",
    )
    beta: float = Field(
        0.05,
        ge=0,
        le=100,
        description="Weight of the KL penalty to the reference model, taken off each answer's reward; 0 keeps no "
        "reference (faster, less memory).",
    )
    normalize_advantages: bool = Field(
        False, description="Scale the advantages of each round of generation to mean 0 and standard deviation 1."
    )
