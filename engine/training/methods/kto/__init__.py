"""Kahneman-Tversky optimisation (method kto): TRL's KTOTrainer on single answers labelled desirable or not."""

from __future__ import annotations

from engine.config.schema import Problem
from engine.training.methods import paired
from engine.training.methods.base import Method, MetricChart, RunConfig
from engine.training.methods.kto.section import KtoSection
from engine.training.methods.paired import REWARD_CHARTS, lm_head_problems

# What KTO's own rule says (engine.training.methods.base.Method.rule_messages).
RULE_MESSAGES = {
    "kl_batch_size": "kto estimates its KL term from the other answers of a batch: use a batch of at least 2",
}


def batch_problems(config: RunConfig) -> list[Problem]:
    """KTO's loss estimates its KL term from the other answers of a batch."""
    if config.kto.loss_type != "kto" or config.train.per_device_batch_size >= 2:
        return []
    return [Problem("train.per_device_batch_size", RULE_MESSAGES["kl_batch_size"])]


METHOD = Method(
    name="kto",
    title="Kahneman-Tversky optimisation (KTO)",
    summary="kto (answers labelled desirable or not)",
    formats=("kto", "preference"),
    package=__name__,
    section=KtoSection,
    section_help="KTO's knobs (method kto).",
    rules=(lm_head_problems, batch_problems),
    rule_messages={**paired.RULE_MESSAGES, **RULE_MESSAGES},
    trains_on="whole pairs",
    charts=(MetricChart("kl", "KL estimate (policy ‖ reference)", "nats"), *REWARD_CHARTS),
    scoring="preference",
    reference=True,
)
