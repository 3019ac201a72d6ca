"""The worker side the preference methods share: their data, and the reference model TRL's preference trainers
take from a fresh adapter."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engine.config import RunConfig


def prepare_data(config: RunConfig, tokenizer: Any) -> Any:
    """The run's rows in TRL's conversational preference (or unpaired kto) form (engine.data)."""
    from engine.data import prepare_paired_datasets

    return prepare_paired_datasets(config, tokenizer)


def frozen_reference(config: RunConfig) -> list[dict[str, Any]]:
    """The reference a preference method with one (dpo, kto) loads beside a full or freeze fine-tune, for the
    memory estimate (Method.frozen_models; engine.training.methods.reference); none with
    ``precompute_ref_log_probs`` (the reference scores the data before training and is freed)."""
    from engine.training.methods import method_of
    from engine.training.methods.reference import frozen_copy

    return [] if method_of(config).settings(config).precompute_ref_log_probs else frozen_copy(config)


def reference_lines(config: RunConfig) -> list[str]:
    """What the check says of a preference method's reference (dpo, kto): where its scores come from."""
    from engine.training.methods import method_of
    from engine.training.methods.reference import kept_reference_line

    if method_of(config).settings(config).precompute_ref_log_probs:
        return ["reference: scored once before training (precompute_ref_log_probs), then freed"]
    if config.adapter.is_lora and config.model.init_from:
        return ["reference: a frozen copy of the adapter the run starts from"]
    return [kept_reference_line(config)]


def without_copied_reference(trainer: Any, config: RunConfig) -> Any:
    """The trainer, its reference taken from the base with the adapter switched off when the adapter is fresh.

    Handed a peft model, TRL's DPOTrainer and KTOTrainer copy its adapter into a frozen "ref" adapter and run
    the reference pass through it. That is what a run continuing another run's adapter needs (model.init_from:
    the reference is then that adapter). A fresh adapter's copy computes exactly the base model (LoRA's B
    starts at zero), but with the adapter's matrices in every reference forward: about 15 % of a DPO step on
    the demo model (benchmarks/throughput_dpo.py). Without a "ref" adapter TRL disables the adapters instead."""
    model = trainer.model
    if not config.model.init_from and "ref" in getattr(model, "peft_config", {}):
        model.delete_adapter("ref")
        model.set_adapter("default")
    return trainer
