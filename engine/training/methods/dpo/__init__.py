"""Direct preference optimisation (method dpo): TRL's DPOTrainer on chosen / rejected pairs, against a reference."""

from __future__ import annotations

from engine.config.schema import Problem
from engine.training.methods import paired
from engine.training.methods.base import LOSS_METRICS, Method, QualityMetric, RunConfig
from engine.training.methods.dpo.section import SMOOTHED_DPO_LOSSES, DpoSection
from engine.training.methods.paired import ACCURACY_CHART, REWARD_CHARTS, lm_head_problems

# What DPO's own rule says (engine.training.methods.base.Method.rule_messages).
RULE_MESSAGES = {"label_smoothing_unused": "the {loss_type} loss ignores it; use {losses} or set it to 0"}


def smoothing_problems(config: RunConfig) -> list[Problem]:
    """label_smoothing does nothing with a loss that does not smooth labels."""
    dpo = config.dpo
    if dpo.label_smoothing == 0 or dpo.loss_type in SMOOTHED_DPO_LOSSES:
        return []
    losses = ", ".join(SMOOTHED_DPO_LOSSES)
    message = RULE_MESSAGES["label_smoothing_unused"].format(loss_type=dpo.loss_type, losses=losses)
    return [Problem("dpo.label_smoothing", message)]


METHOD = Method(
    name="dpo",
    title="Direct preference optimisation (DPO)",
    summary="dpo (preference pairs: a chosen and a rejected answer per prompt)",
    formats=("preference",),
    package=__name__,
    section=DpoSection,
    section_help="DPO's knobs (method dpo).",
    rules=(lm_head_problems, smoothing_problems),
    rule_messages={**paired.RULE_MESSAGES, **RULE_MESSAGES},
    trains_on="whole pairs",
    charts=(*REWARD_CHARTS, ACCURACY_CHART),
    quality_metrics=(*LOSS_METRICS, QualityMetric(f"eval_{ACCURACY_CHART.key}", "maximize")),
    scoring="preference",
    reference=True,
)
