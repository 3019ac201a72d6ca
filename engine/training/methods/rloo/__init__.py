"""REINFORCE leave-one-out (method rloo): TRL's RLOOTrainer samples several answers per prompt, the run's reward
functions score them, and each answer's advantage is its reward less the mean reward of the other answers to the
same prompt (Ahmadian et al., 2024). The charts, rules, prompts and samples are the sampling methods'
(engine.training.methods.online), as GRPO's are."""

from __future__ import annotations

from engine.training.methods import online
from engine.training.methods.base import Method
from engine.training.methods.online import group_fits, group_rules, sampling_charts
from engine.training.methods.rloo.section import RlooSection

METHOD = Method(
    name="rloo",
    title="REINFORCE leave-one-out (RLOO) with reward functions",
    summary="rloo (prompts and reward functions, as grpo: each sampled answer is compared with the mean reward of "
    "the others)",
    formats=("conversational", "alpaca", "prompt_completion", "prompt"),
    package=__name__,
    section=RlooSection,
    section_help="RLOO's knobs and rewards (method rloo).",
    rules=(group_rules("rloo"),),
    rule_messages=online.RULE_MESSAGES,
    fits=(group_fits("rloo"),),
    trains_on="sampled answers",
    charts=sampling_charts("rloo"),
    quality_metrics=online.SAMPLING_METRICS,
    scoring="rewards",
    writes_samples=True,
    demo_caps={"num_generations": "generations", "max_completion_length": "completion_tokens"},
)
