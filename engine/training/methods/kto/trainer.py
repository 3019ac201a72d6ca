"""Kahneman-Tversky optimisation with TRL's KTOTrainer: single answers labelled desirable or not, each weighed
against a reference model and a KL estimate taken from the other answers of the batch."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.training.methods.base import TrainerParts
from engine.training.methods.paired import trainer as paired

if TYPE_CHECKING:
    from engine.config import RunConfig
    from engine.training.hardware import Hardware


# A full or freeze fine-tune's reference, loaded beside the model (for the memory estimate).
frozen_models = paired.frozen_reference
check_lines = paired.reference_lines


def training_kwargs(config: RunConfig, hardware: Hardware) -> dict[str, Any]:
    """KTOConfig's own arguments, from the kto section."""
    kto = config.kto
    kwargs: dict[str, Any] = {
        "max_length": config.train.max_length,
        "loss_type": kto.loss_type,
        "beta": kto.beta,
        "desirable_weight": kto.desirable_weight,
        "undesirable_weight": kto.undesirable_weight,
        "precompute_ref_log_probs": kto.precompute_ref_log_probs,
    }
    if kto.loss_type == "kto":
        # TRL pairs each answer with its neighbour's for the KL estimate when it prepares the data, so the batches
        # must come in the dataset's order (KTOTrainer refuses another sampler).
        kwargs["train_sampling_strategy"] = "sequential"
    return kwargs


def prepare_data(config: RunConfig, tokenizer: Any) -> Any:
    """The run's rows as KTO's labelled answers. Paired preference data (dpo_en_demo.json, the demo set) is unpaired
    with TRL's own ``unpair_preference_dataset``: each pair gives its chosen answer labelled desirable and its
    rejected one labelled undesirable. The training rows are then shuffled once (seeded): TRL unpairs a batch into
    all its chosen answers followed by all its rejected ones, and KTO trains in the dataset's order, so unshuffled
    a batch would hold only desirable or only undesirable answers."""
    from trl.data_utils import unpair_preference_dataset

    prepared = paired.prepare_data(config, tokenizer)
    if "chosen" not in prepared.train.column_names:
        return prepared
    prepared.train = unpair_preference_dataset(prepared.train).shuffle(seed=config.train.seed)
    if prepared.eval is not None:
        prepared.eval = unpair_preference_dataset(prepared.eval)
    return prepared


def args_class() -> type:
    """TRL's KTOConfig."""
    from trl import KTOConfig

    return KTOConfig


def build_trainer(parts: TrainerParts) -> Any:
    """TRL's KTOTrainer over the labelled answers."""
    from trl import KTOTrainer

    return paired.without_copied_reference(KTOTrainer(**parts.trainer_kwargs()), parts.config)
