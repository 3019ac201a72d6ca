"""What the preference methods (dpo, kto, orpo) share: their data, and the trainer keyword arguments TRL's
preference trainers take alike."""

from __future__ import annotations

from typing import Any

from engine.config import RunConfig
from engine.training.methods.base import MetricChart, TrainerParts

# The reward charts DPO and KTO log alike (TRL: beta times the policy's log-ratio to the reference).
REWARD_CHARTS = (
    MetricChart("rewards/margins", "Reward margin (chosen − rejected)", "reward"),
    MetricChart("rewards/chosen", "Reward of chosen answers", "reward"),
    MetricChart("rewards/rejected", "Reward of rejected answers", "reward"),
)
ACCURACY_CHART = MetricChart("rewards/accuracies", "Preference accuracy (chosen ranked first)", "share")


def prepare_data(config: RunConfig, tokenizer: Any) -> Any:
    """The run's rows in TRL's conversational preference (or unpaired kto) form (engine.data)."""
    from engine.data import prepare_paired_datasets

    return prepare_paired_datasets(config, tokenizer)


def trainer_kwargs(parts: TrainerParts) -> dict[str, Any]:
    """The keyword arguments TRL's preference trainers take alike. The model arrives with its adapter attached,
    so no peft_config is passed; with LoRA, DPO and KTO then take the base with the adapter switched off as
    their reference (no second copy in memory)."""
    return {
        "model": parts.model,
        "args": parts.args,
        "train_dataset": parts.data.train,
        "eval_dataset": parts.data.eval,
        "processing_class": parts.tokenizer,
        "callbacks": parts.callbacks,
    }
