"""KTO's config section (``kto:``): the knobs of TRL 1.16's KTOConfig that the studio offers."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from engine.config.schema import Section, advanced


class KtoSection(Section):
    """Kahneman-Tversky optimisation (method kto): TRL's KTOTrainer on answers labelled desirable or not."""

    loss_type: Literal["kto", "apo_zero_unpaired"] = Field(
        "kto", description="kto (the paper's loss, with its KL estimate) or apo_zero_unpaired."
    )
    beta: float = Field(0.1, gt=0, le=100, description="How far the model may move from the reference.")
    desirable_weight: float = Field(
        1.0, gt=0, le=100, description="Weight of the desirable answers' loss (raise it when they are fewer)."
    )
    undesirable_weight: float = Field(1.0, gt=0, le=100, description="Weight of the undesirable answers' loss.")
    precompute_ref_log_probs: bool = Field(
        False,
        description="Score the data with the reference model once before training (full fine-tune: no second "
        "model in memory).",
        json_schema_extra=advanced(),
    )
