"""Group relative policy optimisation (method grpo): TRL's GRPOTrainer samples several answers per prompt, the
run's reward functions score them, and each answer is pushed up or down by how it fares against its group."""

from __future__ import annotations

from engine.training.methods import online
from engine.training.methods.base import Method
from engine.training.methods.grpo.section import GrpoSection
from engine.training.methods.online import group_fits, group_rules, sampling_charts

METHOD = Method(
    name="grpo",
    title="Group relative policy optimisation (GRPO) with reward functions",
    summary="grpo (prompts and reward functions: the model samples answers and learns from their rewards)",
    formats=("conversational", "alpaca", "prompt_completion", "prompt"),
    package=__name__,
    section=GrpoSection,
    section_help="GRPO's knobs and rewards (method grpo).",
    rules=(group_rules("grpo"),),
    rule_messages=online.RULE_MESSAGES,
    fits=(group_fits("grpo"),),
    trains_on="sampled answers",
    charts=sampling_charts("grpo"),
    quality_metrics=online.SAMPLING_METRICS,
    scoring="rewards",
    writes_samples=True,
    demo_caps={"num_generations": "generations", "max_completion_length": "completion_tokens"},
)
