"""The config section of GRPO (method grpo): TRL's GRPOConfig knobs and the reward functions.

Read only by method grpo; the studio shows it when that method is chosen. The names and choices are TRL 1.16's.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from engine.config.sections import MAX_COUNT, Section, advanced

# GRPOConfig.loss_type in TRL 1.16.
GrpoLoss = Literal["grpo", "dr_grpo", "dapo", "bnpo", "cispo", "sapo", "luspo", "vespo"]
RewardKind = Literal["exact_match", "math_match", "regex", "length", "contains", "custom"]
# What each kind of reward needs besides its weight (checked before launch, named at the field).
REWARD_NEEDS: dict[str, tuple[str, ...]] = {
    "exact_match": ("column",),
    "math_match": ("column",),
    "regex": ("pattern",),
    "length": ("target_tokens",),
    "contains": ("text",),
    "custom": ("file", "function"),
}


class RewardSpec(Section):
    """One reward function of a GRPO run and its weight. ``kind`` picks a built-in (engine.training.rewards) or a
    function of the user's own Python file."""

    kind: RewardKind = Field(
        ...,
        description="exact_match (the answer equals a reference column), math_match (the same number or math "
        "answer as the reference), regex (the whole answer matches a pattern), length (close to a token count), "
        "contains (holds, or with absent lacks, a text), or custom (a function of your own Python file).",
    )
    weight: float = Field(1.0, ge=-100, le=100, description="Weight of this reward in the sum GRPO maximises.")
    column: str = Field(
        "answer", min_length=1, description="exact_match, math_match: the dataset column holding the reference."
    )
    ignore_case: bool = Field(False, description="exact_match, contains: compare without regard to case.")
    pattern: str | None = Field(None, description="regex: the pattern the whole answer must match.")
    target_tokens: int | None = Field(
        None, ge=1, le=MAX_COUNT, description="length: the answer length (in tokens) that scores best."
    )
    text: str | None = Field(None, description="contains: the text to look for.")
    absent: bool = Field(False, description="contains: reward answers that do not hold the text instead.")
    file: str | None = Field(None, description="custom: the Python file that defines the function.")
    function: str | None = Field(
        None, description="custom: the function's name; it takes (prompts, completions, **columns) as TRL's do."
    )

    @model_validator(mode="after")
    def _has_what_its_kind_needs(self) -> RewardSpec:
        missing = [name for name in REWARD_NEEDS[self.kind] if getattr(self, name) in (None, "")]
        if missing:
            raise ValueError(f"{missing[0]}: a {self.kind} reward needs it")
        if self.kind == "regex":
            import regex  # the reward matches with it (engine.training.rewards.scoring), for its time limit

            try:
                regex.compile(self.pattern or "")
            except regex.error as exc:
                raise ValueError(f"pattern: not a valid regular expression: {exc}") from None
        return self

    @property
    def label(self) -> str:
        """The reward's name in metrics and messages: the kind, or the custom function's name."""
        return self.function if self.kind == "custom" and self.function else self.kind


class GrpoSection(Section):
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
    max_completion_length: int = Field(
        64, ge=1, le=MAX_COUNT, description="Longest answer sampled, in tokens (longer ones are cut)."
    )
    temperature: float = Field(1.0, gt=0, le=10, description="Sampling temperature: higher, more varied answers.")
    top_p: float = Field(1.0, gt=0, le=1, description="Sample from the smallest set of tokens with this mass.")
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
