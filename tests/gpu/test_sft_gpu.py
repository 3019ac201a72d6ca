"""SFT on the GPU through ``python -m engine train``: LoRA, QLoRA on a 4-bit and an 8-bit base, and a full fine-tune,
each a few steps of the demo date task with losses that fall and a result that loads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.gpu.gpu_runs import check_trained, result_logits, run_config, train

VARIANTS: dict[str, dict[str, Any]] = {
    "lora": {},
    "qlora-4bit": {"quantization": {"mode": "4bit"}},
    "qlora-8bit": {"quantization": {"mode": "8bit"}},
    # Every weight moves: a learning rate for that, not for an adapter.
    "full": {"adapter": {"method": "full"}, "train": {"learning_rate": 1e-4}},
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_sft_trains_and_its_result_loads(variant: str, device: str, tmp_path: Path) -> None:
    run_dir = train(run_config(device, **VARIANTS[variant]), tmp_path / variant)
    check_trained(run_dir, device)
    assert (run_dir / ("model" if variant == "full" else "adapter")).is_dir()
    result_logits(run_dir, device)
