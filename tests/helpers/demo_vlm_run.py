"""One tiny LoRA run of the demo vision-language model (assets/demo-vlm) on the coloured shapes, for the tests that
chat about images: trained once per test session through the real CLI (``python -m engine train CFG --run-dir
DIR``, about 15 s on a CPU), then copied into each module's workspace. 20 steps are enough for the adapter to
answer differently from the base (the base has never seen an image or the chat format)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.store.paths import PROJECT_ROOT
from tests.helpers.demo_run import cached_run

VLM_RUN_ID = "demo-vlm-run"
VLM_RUN_NAME = "demo-shapes"
DEMO_VLM = PROJECT_ROOT / "assets" / "demo-vlm"
SHAPES = PROJECT_ROOT / "assets" / "datasets" / "demo_vlm_images"


def vlm_config() -> dict:
    """20 LoRA steps of the demo VLM on the shapes task (its vision tower frozen, as by default)."""
    return {
        "name": VLM_RUN_NAME,
        "model": {"name_or_path": "assets/demo-vlm"},
        "data": {"path": "assets/datasets/demo_vlm_train.jsonl"},
        "adapter": {"method": "lora", "target_modules": "all-linear"},
        "train": {"max_steps": 20, "max_length": 64, "per_device_batch_size": 8, "learning_rate": 0.002},
    }


def trained_vlm_run(tmp_path_factory: pytest.TempPathFactory, workspace: Path) -> Path:
    """A completed demo VLM run at ``workspace/runs/demo-vlm-run`` (trained on first use in the session, then
    copied)."""
    return cached_run(tmp_path_factory, workspace, "demo-vlm-run-cache", VLM_RUN_ID, vlm_config())
