"""One reward function and its weight, as a config names it: the methods that learn from rewards (grpo) list them
in their section's ``rewards`` (engine.training.rewards turns each into the function TRL's trainers call)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from engine.config.schema import MAX_COUNT, Section
from engine.store.limits import Limits, OverLimit, run_limited

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
# A pattern is compiled in a child under these caps (engine.store.limits): a nested one such as
# ((a{100}){100}){100} took 2.2 s and 0.3 GB to compile, and a studio checks the config on every form change.
REGEX_LIMITS = Limits(memory_bytes=256 * 2**20, cpu_s=1.0, wall_s=15.0)
REGEX_CHILD = Path(__file__).with_name("regex_child.py")
MAX_PATTERN_CHARS = 1000
# What a reward's own check says, by name: English with ``{placeholders}``, the one definition of each message (the
# studio says it again in the visitor's language: studio.i18n.problems, keys ``check.<name>``). The check names the
# key at fault first (its error is the reward's); ``{problem}`` is another of these messages, said again in turn.
REWARD_MESSAGES = {
    "reward_needs": "{key}: a {kind} reward needs it",
    "reward_pattern": "pattern: {problem}",
    "pattern_invalid": "not a valid regular expression: {error}",
    "pattern_memory": "this regular expression takes more than {mib} MiB to compile; simplify it (fewer nested "
    "repeats)",
    "pattern_slow": "this regular expression takes too long to compile; simplify it (fewer nested repeats)",
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
    pattern: str | None = Field(
        None, max_length=MAX_PATTERN_CHARS, description="regex: the pattern the whole answer must match."
    )
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
            raise ValueError(REWARD_MESSAGES["reward_needs"].format(key=missing[0], kind=self.kind))
        if self.kind == "regex" and (problem := pattern_problem(self.pattern or "")):
            raise ValueError(REWARD_MESSAGES["reward_pattern"].format(problem=problem))
        return self

    @property
    def label(self) -> str:
        """The reward's name in metrics and messages: the kind, or the custom function's name."""
        return self.function if self.kind == "custom" and self.function else self.kind


@functools.lru_cache(maxsize=256)  # a form checks the same pattern again on every change; a verdict is a few bytes
def pattern_problem(pattern: str) -> str | None:
    """Why ``pattern`` cannot be a regex reward (not a valid expression, or too costly to compile), or None.

    It is compiled with the ``regex`` module, as the reward matches (engine.training.rewards.scoring, for its time
    limit), in a child under REGEX_LIMITS.
    """
    try:
        said = run_limited(REGEX_CHILD, pattern, REGEX_LIMITS).strip()
    except OverLimit as exc:
        if exc.kind == "memory":
            return REWARD_MESSAGES["pattern_memory"].format(mib=REGEX_LIMITS.memory_bytes // 2**20)
        return REWARD_MESSAGES["pattern_slow"]
    return None if said == "ok" else REWARD_MESSAGES["pattern_invalid"].format(error=said)
