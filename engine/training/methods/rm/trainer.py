"""Reward modeling with TRL's RewardTrainer: each pair's prompt + chosen and prompt + rejected go through the base
with its one-score head (``AutoModelForSequenceClassification``, one label), and the loss is
``-log sigmoid(score(chosen) - score(rejected))``. The data are the preference methods' conversational pairs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.training.methods.base import TrainerParts
from engine.training.methods.paired import trainer as paired

if TYPE_CHECKING:
    from engine.config import RunConfig
    from engine.training.hardware import Hardware


def prepare_data(config: RunConfig, tokenizer: Any) -> Any:
    """The run's pairs in TRL's conversational preference form (RewardTrainer tokenizes them itself)."""
    return paired.prepare_data(config, tokenizer)


def training_kwargs(config: RunConfig, hardware: Hardware) -> dict[str, Any]:
    """RewardConfig's own arguments, from the rm section."""
    coefficient = config.rm.center_rewards_coefficient
    return {"max_length": config.train.max_length, "center_rewards_coefficient": coefficient or None}


def args_class() -> type:
    """TRL's RewardConfig."""
    from trl import RewardConfig

    return RewardConfig


def build_trainer(parts: TrainerParts) -> Any:
    """TRL's RewardTrainer over the prepared pairs, on the model with its score head."""
    from trl import RewardTrainer

    with_pad_token(parts.model, parts.tokenizer)
    return RewardTrainer(**parts.trainer_kwargs())


def with_pad_token(model: Any, tokenizer: Any) -> Any:
    """The model, told which token pads: a sequence-classification head scores the last token that is not padding,
    and the base's config may name none (the tokenizer's pad token is the eos token then, engine.training.modeling)."""
    model.config.pad_token_id = tokenizer.pad_token_id
    return model
