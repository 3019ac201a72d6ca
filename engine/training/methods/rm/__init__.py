"""Reward modeling (method rm): TRL's RewardTrainer puts a one-score head on the base and trains it, with the
adapter or the whole model, to score the chosen answer of each preference pair above the rejected one
(LLaMA-Factory's "rm" stage). Its result scores answers and writes none: Chat leaves it out, Evaluate ranks the
held-out pairs by its scores (the head it started from against the trained one), and an export loads with
``AutoModelForSequenceClassification``."""

from engine.training.methods.base import LOSS_METRICS, SEQUENCE_SCORE, Method, MetricChart, QualityMetric
from engine.training.methods.rm.section import RmSection

METHOD = Method(
    name="rm",
    title="Reward modeling (a score head trained on preference pairs)",
    summary="rm (a reward model: the same pairs train a head that scores the chosen answer above the rejected)",
    formats=("preference",),
    package=__name__,
    section=RmSection,
    section_help="Reward modeling's knobs (method rm).",
    trains_on="whole pairs",
    charts=(
        MetricChart("accuracy", "Pairs scored the right way round", "share"),
        MetricChart("margin", "Score margin (chosen − rejected)", "score"),
        MetricChart("mean_reward", "Mean score", "score"),
    ),
    quality_metrics=(*LOSS_METRICS, QualityMetric("eval_accuracy", "maximize")),
    scoring="preference",
    model=SEQUENCE_SCORE,
)
