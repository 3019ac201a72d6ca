"""Runs for the chat tests: a run directory whose adapter/ is a real LoRA adapter of the demo model, built by the
engine's own builder from the run's config (random LoRA weights: a chat test needs a loadable adapter, not a
trained one)."""

from __future__ import annotations

from pathlib import Path

from engine.store.paths import PROJECT_ROOT

DEMO_MODEL = PROJECT_ROOT / "assets" / "demo-model"


def save_demo_adapter(run_dir: Path) -> Path:
    """Write the LoRA adapter of ``run_dir``'s config on the demo model to ``run_dir/adapter``; returns that folder."""
    from peft import get_peft_model
    from transformers import AutoModelForCausalLM

    from engine.config import load_config
    from engine.training.builders import to_lora_config

    config = load_config(run_dir / "config.yaml")
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(DEMO_MODEL), to_lora_config(config))
    model.save_pretrained(run_dir / "adapter")
    return run_dir / "adapter"
