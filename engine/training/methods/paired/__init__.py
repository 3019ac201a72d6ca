"""What the methods that learn from preferences share (each lists this in its own package): their reward charts
and the rules every one of them follows. TRL computes their log-probabilities from the LM head's weight."""

from __future__ import annotations

from engine.config.schema import Problem
from engine.training.methods.base import MetricChart, RunConfig

# The reward charts DPO and KTO log alike (TRL: beta times the policy's log-ratio to the reference).
REWARD_CHARTS = (
    MetricChart("rewards/margins", "Reward margin (chosen − rejected)", "reward"),
    MetricChart("rewards/chosen", "Reward of chosen answers", "reward"),
    MetricChart("rewards/rejected", "Reward of rejected answers", "reward"),
)
ACCURACY_CHART = MetricChart("rewards/accuracies", "Preference accuracy (chosen ranked first)", "share")
# What the shared rules say (each method lists them in its ``rule_messages``).
RULE_MESSAGES = {
    "lm_head_adapter": "{method} reads log-probabilities from lm_head's weight, so an adapter there would never "
    "train; remove lm_head",
}


def lm_head_problems(config: RunConfig) -> list[Problem]:
    """An adapter on lm_head would never train: TRL reads the log-probabilities from its weight."""
    modules = config.adapter.target_modules
    if config.adapter.method != "lora" or "lm_head" not in ([modules] if isinstance(modules, str) else modules):
        return []
    return [Problem("adapter.target_modules", RULE_MESSAGES["lm_head_adapter"].format(method=config.method))]
