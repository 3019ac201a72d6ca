"""The config section of RLOO (method rloo): TRL's RLOOConfig knobs and the reward functions.

Read only by method rloo; the studio shows it when that method is chosen. The names are TRL 1.16's; the defaults
are TRL's but for num_generations and max_completion_length, which are GRPO's here, for a CPU.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from engine.schema import MAX_COUNT, Section, advanced
from engine.training.methods.reward_spec import RewardSpec


class RlooSection(Section):
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
    max_completion_length: int = Field(
        64, ge=1, le=MAX_COUNT, description="Longest answer sampled, in tokens (longer ones are cut)."
    )
    temperature: float = Field(1.0, gt=0, le=10, description="Sampling temperature: higher, more varied answers.")
    top_p: float = Field(1.0, gt=0, le=1, description="Sample from the smallest set of tokens with this mass.")
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
    steps_per_generation: int | None = Field(
        None,
        ge=1,
        le=1024,
        description="Optimizer steps that share one round of generation (empty: gradient_accumulation_steps). "
        "Generating is the slow part, so several steps reuse one large batch of samples.",
        json_schema_extra=advanced(),
    )
    num_iterations: int = Field(
        1, ge=1, le=64, description="Updates on each batch of samples (mu in the paper).", json_schema_extra=advanced()
    )
    epsilon: float = Field(0.2, gt=0, le=10, description="Clipping range of the policy ratio.")
    epsilon_high: float | None = Field(
        None,
        gt=0,
        le=10,
        description="Upper clipping bound (empty: epsilon; DAPO uses 0.28).",
        json_schema_extra=advanced(),
    )
    mask_truncated_completions: bool = Field(
        False, description="Leave answers cut at max_completion_length out of the loss.", json_schema_extra=advanced()
    )
    use_vllm: bool = Field(
        False,
        description="Generate with vLLM (GPU only, when installed) instead of transformers' generate.",
        json_schema_extra=advanced(),
    )

    def to_yaml_data(self) -> dict[str, Any]:
        """The section as YAML shows it: each reward as its kind and what differs from the defaults."""
        data = self.model_dump(mode="json")
        data["rewards"] = [reward.model_dump(mode="json", exclude_defaults=True) for reward in self.rewards]
        return data
