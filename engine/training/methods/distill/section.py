"""The config section of on-policy distillation (method distill): the teacher and TRL 1.16's DistillationConfig
knobs that the studio offers.

Read only by method distill; the studio shows it when that method is chosen. The defaults are TRL's but for
max_completion_length, which is the sampling methods' here, for a CPU.
"""

from __future__ import annotations

from pydantic import Field, field_validator

from engine.config.schema import MAX_COUNT, Section, advanced, blank_is_none, names_model, names_run


class DistillSection(Section):
    """On-policy distillation (method distill): the model answers the prompts itself and learns, token by token,
    the next-token distribution a teacher model gives those answers (TRL's DistillationTrainer)."""

    teacher: str | None = Field(
        None,
        description="The teacher whose next-token distribution the model learns: a hub id (org/name), a local "
        "model directory (a merged export of a run is one), or a finished run (its id in the workspace, its "
        "directory or one of its checkpoints, RUN/checkpoints/checkpoint-N), loaded with its adapter merged into "
        "its base. It must use the model's tokenizer.",
        json_schema_extra=names_model(**names_run()),
    )
    teacher_revision: str | None = Field(
        None,
        description="Hub branch, tag or commit of a teacher given by hub id; empty for the default.",
        json_schema_extra=advanced(),
    )
    beta: float = Field(
        1.0,
        ge=0,
        le=1,
        description="Which divergence the loss is: 0 forward KL (the model spreads over every answer the teacher "
        "would give), 1 reverse KL (the model settles on the teacher's likeliest answers: on-policy distillation's "
        "usual choice), 0.5 Jensen-Shannon; in between, the generalized Jensen-Shannon divergence.",
    )
    max_completion_length: int = Field(
        64, ge=1, le=MAX_COUNT, description="Longest answer the model samples, in tokens (longer ones are cut)."
    )
    temperature: float = Field(
        1.0,
        gt=0,
        le=10,
        description="Temperature of the sampling and of both models' distributions in the loss: higher, softer.",
    )
    top_p: float = Field(1.0, gt=0, le=1, description="Sample from the smallest set of tokens with this mass.")

    @field_validator("teacher", "teacher_revision")
    @classmethod
    def _blank_is_none(cls, value: str | None) -> str | None:
        """A blank field (a cleared form box) means none."""
        return blank_is_none(value)
