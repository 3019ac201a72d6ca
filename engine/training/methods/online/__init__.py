"""What the methods that sample their own answers and learn from reward functions share (each lists this in its
own package): their Monitor charts and the rules on how a round of generation splits into groups.

A sampling method's config section is named after the method and derives from ``section.SamplingSection``: the
knobs TRL's GRPOConfig and RLOOConfig share, ``rewards``, ``num_generations``, ``steps_per_generation`` and ``beta``
among them (the two take the same batch arithmetic)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from engine.config.schema import Problem
from engine.training.methods.base import MetricChart, QualityMetric, RunConfig

# What the group rules say (each sampling method lists them in its ``rule_messages``), ``{method}`` the method's name.
RULE_MESSAGES = {
    "reward_missing": "{method} needs at least one reward function",
    "generation_round": "each round of generation samples {samples} answers (batch size x processes x steps per "
    "generation), which must be a multiple of {method}.num_generations ({num_generations})",
    "eval_whole_groups": "must be a multiple of {method}.num_generations ({num_generations}): evaluation samples "
    "whole groups",
}


# A sampling method's losses are its policy loss on the answers it just sampled (0 whenever a group's answers score
# alike), not how well it does: its rewards are, the held-out prompts' first.
SAMPLING_METRICS = (QualityMetric("eval_reward", "maximize"), QualityMetric("reward", "maximize"))


def sampling_charts(name: str) -> tuple[MetricChart, ...]:
    """The charts a sampling method's trainer logs alike (TRL's keys), for the method ``name``: its KL chart only
    when its section's beta keeps a reference."""
    return (
        MetricChart("reward", "Reward (weighted sum)", "reward"),
        MetricChart("reward_std", "Reward spread within groups", "reward"),
        MetricChart("completions/mean_length", "Answer length", "tokens"),
        MetricChart("completions/clipped_ratio", "Answers cut at max length", "share"),
        MetricChart("kl", "KL to the reference", "nats", logged_by=lambda config: getattr(config, name).beta > 0),
        MetricChart("entropy", "Entropy of the policy", "nats"),
    )


def group_rules(name: str) -> Callable[[RunConfig], list[Problem]]:
    """The rule of the method ``name``: what TRL refuses only after the model has loaded (sampling_problems)."""

    def group_problems(config: RunConfig) -> list[Problem]:
        return sampling_problems(config, name)

    return group_problems


def group_fits(name: str) -> Callable[[RunConfig], dict[str, Any]]:
    """The fit of the method ``name``: the eval batch size its group rule takes (eval_batch_fit)."""

    def fit(config: RunConfig) -> dict[str, Any]:
        return eval_batch_fit(config, name)

    return fit


def eval_batch_fit(config: RunConfig, name: str) -> dict[str, Any]:
    """``train.eval_batch_size`` as a sampling method evaluates: whole groups of ``num_generations`` answers across
    the processes. The nearest size below that does (less memory than the size given), at least one group;
    {} when the size given does. Fitted whether or not the run evaluates, so that turning evaluation on later
    finds it right."""
    groups, processes = getattr(config, name).num_generations, config.launch.num_processes
    size = config.train.eval_batch_size
    if (size * processes) % groups == 0:
        return {}
    step = groups // math.gcd(groups, processes)  # the sizes that split into whole groups are its multiples
    return {"train.eval_batch_size": max(step, size // step * step)}


def sampling_problems(config: RunConfig, name: str) -> list[Problem]:
    """What a sampling method cannot take: no reward, or batches that do not split into whole groups of answers
    (TRL 1.16 refuses those batch sizes only after the model has loaded)."""
    section, train = getattr(config, name), config.train
    problems, groups = [], {"method": name, "num_generations": section.num_generations}
    if not section.rewards:
        problems.append(Problem(f"{name}.rewards", RULE_MESSAGES["reward_missing"].format(method=name)))
    processes = config.launch.num_processes
    steps = section.steps_per_generation or train.gradient_accumulation_steps
    samples = train.per_device_batch_size * processes * steps
    if samples % section.num_generations:
        message = RULE_MESSAGES["generation_round"].format(samples=samples, **groups)
        problems.append(Problem("train.per_device_batch_size", message))
    if train.eval_strategy != "no" and (train.eval_batch_size * processes) % section.num_generations:
        problems.append(Problem("train.eval_batch_size", RULE_MESSAGES["eval_whole_groups"].format(**groups)))
    return problems
