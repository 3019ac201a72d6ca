"""Direct preference optimisation with TRL's DPOTrainer: a chosen and a rejected answer per prompt, the loss
TRL's ``loss_type`` names, against a reference model (for LoRA the base with the adapter off; for a full
fine-tune a frozen copy, or none with ``precompute_ref_log_probs``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.training.methods.base import TrainerParts
from engine.training.methods.paired import trainer as paired

if TYPE_CHECKING:
    from engine.config import RunConfig
    from engine.training.hardware import Hardware


# The run's rows as TRL's conversational preference pairs (what the preference methods share).
prepare_data = paired.prepare_data
# A full or freeze fine-tune's reference, loaded beside the model (for the memory estimate).
frozen_models = paired.frozen_reference
check_lines = paired.reference_lines


def training_kwargs(config: RunConfig, hardware: Hardware) -> dict[str, Any]:
    """DPOConfig's own arguments, from the dpo section."""
    dpo = config.dpo
    return {
        "max_length": config.train.max_length,
        "truncation_mode": dpo.truncation_mode,
        # TRL combines several losses, each weighted: RPO is the preference loss plus the chosen answers' NLL.
        "loss_type": [dpo.loss_type, "sft"] if dpo.sft_loss_weight else [dpo.loss_type],
        "loss_weights": [1.0, dpo.sft_loss_weight] if dpo.sft_loss_weight else None,
        "beta": dpo.beta,
        "label_smoothing": dpo.label_smoothing,
        "precompute_ref_log_probs": dpo.precompute_ref_log_probs,
    }


def args_class() -> type:
    """TRL's DPOConfig."""
    from trl import DPOConfig

    return DPOConfig


def build_trainer(parts: TrainerParts) -> Any:
    """TRL's DPOTrainer over the prepared pairs."""
    from trl import DPOTrainer

    return paired.without_copied_reference(DPOTrainer(**parts.trainer_kwargs()), parts.config)
