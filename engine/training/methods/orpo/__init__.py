"""Odds-ratio preference optimisation (method orpo): the supervised loss on the chosen answer plus a term on the
odds of chosen over rejected; no reference model. ORPO is experimental in TRL 1.16 (``trl.experimental``)."""

from engine.training.methods import paired
from engine.training.methods.base import Method, MetricChart
from engine.training.methods.orpo.section import OrpoSection
from engine.training.methods.paired import ACCURACY_CHART, lm_head_problems

METHOD = Method(
    name="orpo",
    title="Odds-ratio preference optimisation (ORPO, experimental in TRL)",
    summary="orpo (the same pairs, with no reference model)",
    formats=("preference",),
    package=__name__,
    section=OrpoSection,
    section_help="ORPO's knobs (method orpo).",
    rules=(lm_head_problems,),
    rule_messages=paired.RULE_MESSAGES,
    trains_on="whole pairs",
    charts=(
        MetricChart("log_odds_ratio", "Log odds ratio (chosen vs rejected)", "log odds"),
        ACCURACY_CHART,
        MetricChart("nll_loss", "Supervised loss on chosen", "loss"),
    ),
    scoring="preference",
)
