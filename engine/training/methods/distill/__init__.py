"""On-policy distillation (method distill): TRL's DistillationTrainer has the model answer the run's prompts
itself, and trains it to give each token of those answers the distribution a teacher model gives it (Agarwal et
al., 2024: generalized Jensen-Shannon divergence, reverse KL by default). The teacher is ``distill.teacher``
(engine.training.methods.distill.trainer): a bigger model with the same tokenizer, or a run that was tuned
before. Its prompts and samples are the sampling methods' (engine.training.methods.online), without rewards; like
the preference methods (engine.training.methods.paired) it reads lm_head's weight, so no adapter may sit there."""

from __future__ import annotations

from engine.config.schema import Problem
from engine.training.methods import paired
from engine.training.methods.base import Method, MetricChart, RunConfig
from engine.training.methods.distill.section import DistillSection

RULE_MESSAGES = {
    "teacher_missing": "distill needs a teacher: a hub id, a model directory or a finished run",
    "teacher_is_model": "the teacher is the model that trains, which has nothing to learn from itself: name a "
    "bigger or tuned model, or start the run from another run (model.init_from)",
}


def teacher_problems(config: RunConfig) -> list[Problem]:
    """What the distill section cannot take, read from the config alone (the teacher's files are checked before
    launch: engine.training.methods.distill.trainer)."""
    teacher = config.distill.teacher
    if not teacher:
        return [Problem("distill.teacher", RULE_MESSAGES["teacher_missing"])]
    if teacher == config.model.name_or_path and not config.model.init_from:
        return [Problem("distill.teacher", RULE_MESSAGES["teacher_is_model"])]
    return []


METHOD = Method(
    name="distill",
    title="On-policy distillation from a teacher model",
    summary="distill (prompts and a teacher model with the same tokenizer: the model answers them itself and learns "
    "the teacher's next-token distribution on its answers)",
    formats=("conversational", "alpaca", "prompt_completion", "prompt"),
    package=__name__,
    section=DistillSection,
    section_help="Distillation's teacher and knobs (method distill).",
    rules=(teacher_problems, paired.lm_head_problems),
    rule_messages={**RULE_MESSAGES, **paired.RULE_MESSAGES},
    trains_on="sampled answers",
    charts=(
        MetricChart("completions/mean_length", "Answer length", "tokens"),
        MetricChart("completions/clipped_ratio", "Answers cut at max length", "share"),
        MetricChart("entropy", "Entropy of the policy", "nats"),
    ),
    writes_samples=True,
    # Against the teacher's greedy answers to the held-out prompts (its package's scoring module).
    scoring="answers",
    demo_caps={"max_completion_length": "completion_tokens"},
)
