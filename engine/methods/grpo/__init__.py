"""Group relative policy optimisation (method grpo): TRL's GRPOTrainer samples several answers per prompt, the
run's reward functions score them, and each answer is pushed up or down by how it fares against its group."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.methods.base import Method, MetricChart
from engine.methods.grpo.section import GrpoSection
from engine.schema import Problem

if TYPE_CHECKING:
    from engine.config import RunConfig


def group_problems(config: RunConfig) -> list[Problem]:
    """What GRPO cannot take (TRL 1.16 refuses the batch sizes only after the model has loaded)."""
    grpo, train = config.grpo, config.train
    problems = []
    if not grpo.rewards:
        problems.append(Problem("grpo.rewards", "grpo needs at least one reward function"))
    processes = config.launch.num_processes
    samples = train.per_device_batch_size * processes * (grpo.steps_per_generation or train.gradient_accumulation_steps)
    if samples % grpo.num_generations:
        problems.append(
            Problem(
                "train.per_device_batch_size",
                f"each round of generation samples {samples} answers (batch size x processes x steps per "
                f"generation), which must be a multiple of grpo.num_generations ({grpo.num_generations})",
            )
        )
    if train.eval_strategy != "no" and (train.eval_batch_size * processes) % grpo.num_generations:
        problems.append(
            Problem(
                "train.eval_batch_size",
                f"must be a multiple of grpo.num_generations ({grpo.num_generations}): evaluation samples whole groups",
            )
        )
    return problems


METHOD = Method(
    name="grpo",
    title="Group relative policy optimisation (GRPO) with reward functions",
    summary="grpo (prompts and reward functions: the model samples answers and learns from their rewards)",
    formats=("conversational", "alpaca", "prompt_completion", "prompt"),
    package=__name__,
    section=GrpoSection,
    section_help="GRPO's knobs and rewards (method grpo).",
    rules=(group_problems,),
    trains_on="sampled answers",
    charts=(
        MetricChart("reward", "Reward (weighted sum)", "reward"),
        MetricChart("reward_std", "Reward spread within groups", "reward"),
        MetricChart("completions/mean_length", "Answer length", "tokens"),
        MetricChart("completions/clipped_ratio", "Answers cut at max length", "share"),
        MetricChart("kl", "KL to the reference", "nats", logged_by=lambda config: config.grpo.beta > 0),
        MetricChart("entropy", "Entropy of the policy", "nats"),
    ),
    scoring="rewards",
    writes_samples=True,
    demo_caps={"num_generations": "generations", "max_completion_length": "completion_tokens"},
)
