"""DPO, KTO and ORPO on the GPU through ``python -m engine train``: a few steps of the bundled preference set (KTO
unpairs it), each with finite losses (falling, for DPO and ORPO) and an adapter that loads."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.gpu.gpu_runs import DATASETS, check_trained, result_logits, run_config, train

# KTO's loss on unpaired rows, 4 a batch, swings more in a few steps than it falls (on the CPU: 0.505 over the first
# three steps, 0.487 over the last): finite losses and an adapter that loads are its check.
FALLS = {"dpo": True, "kto": False, "orpo": True}


@pytest.mark.parametrize("method", sorted(FALLS))
def test_a_preference_method_trains_and_its_adapter_loads(method: str, device: str, tmp_path: Path) -> None:
    config = run_config(
        device,
        method,
        data={"path": str(DATASETS / "demo_preference.jsonl"), "eval_path": None, "max_samples": 48},
        train={"per_device_batch_size": 4, "learning_rate": 3e-3},
    )
    run_dir = train(config, tmp_path / method)
    check_trained(run_dir, device, falls=FALLS[method])
    result_logits(run_dir, device)


def test_a_reward_model_trains_and_its_adapter_scores(device: str, tmp_path: Path) -> None:
    """Reward modeling: a one-score head on the demo base, its loss falling, the adapter loaded with peft's
    sequence-classification class scoring a pair on ``device``."""
    import torch
    from peft import AutoPeftModelForSequenceClassification
    from transformers import AutoTokenizer

    config = run_config(
        device,
        "rm",
        data={"path": str(DATASETS / "demo_preference.jsonl"), "eval_path": None, "max_samples": 48},
        train={"per_device_batch_size": 4, "learning_rate": 3e-3},
    )
    run_dir = train(config, tmp_path / "rm")
    check_trained(run_dir, device, falls=True)
    model = (
        AutoPeftModelForSequenceClassification.from_pretrained(str(run_dir / "adapter"), num_labels=1).to(device).eval()
    )
    tokenizer = AutoTokenizer.from_pretrained(run_dir / "adapter")
    model.config.pad_token_id = tokenizer.pad_token_id
    batch = tokenizer(["Hello there", "Goodbye"], return_tensors="pt", padding=True).to(device)
    with torch.inference_mode():
        scores = model(**batch).logits.float()
    assert scores.shape == (2, 1) and torch.isfinite(scores).all()
