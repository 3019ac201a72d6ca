"""The knobs every sampling method's section has (TRL's GRPOConfig and RLOOConfig name them alike): the reward
functions, how many answers a prompt gets and how they are sampled, and how each round of samples trains.

A method's own section derives from ``SamplingSection``, gives ``rewards``, ``num_generations`` and ``beta`` its own
default and description where they differ, and adds its own knobs (they come after these in the form and YAML).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from engine.config.schema import MAX_COUNT, Section, advanced
from engine.training.methods.reward_spec import RewardSpec


class SamplingSection(Section):
    """What a method that samples answers and learns from their rewards is configured with."""

    rewards: list[RewardSpec] = Field(
        default_factory=list, max_length=16, description="The reward functions and their weights."
    )
    num_generations: int = Field(4, ge=2, le=64, description="Answers sampled per prompt.")
    max_completion_length: int = Field(
        64, ge=1, le=MAX_COUNT, description="Longest answer sampled, in tokens (longer ones are cut)."
    )
    temperature: float = Field(1.0, gt=0, le=10, description="Sampling temperature: higher, more varied answers.")
    top_p: float = Field(1.0, gt=0, le=1, description="Sample from the smallest set of tokens with this mass.")
    beta: float = Field(0.0, ge=0, le=100, description="Weight of the KL term to the reference model.")
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
