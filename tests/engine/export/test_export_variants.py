"""Evaluate and export runs that are not plain LoRA: a full fine-tune and a QLoRA (4-bit base) run.

Both are trained for a few steps through the real CLI; evaluation and export run in this process (the same
functions the job processes call), which keeps the tests quick.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from engine.evaluate.worker import evaluate
from engine.export.exports import plan_export
from engine.export.worker import export
from engine.runs.artifacts import ArtifactError
from engine.runs.jobs import Progress
from engine.store.paths import PROJECT_ROOT

pytestmark = pytest.mark.integration

DEMO_MODEL = PROJECT_ROOT / "assets" / "demo-model"


def train(workspace: Path, run_id: str, **sections: dict) -> Path:
    config = {
        "name": run_id,
        "data": {"path": "assets/datasets/demo_sft_train.jsonl", "eval_path": "assets/datasets/demo_sft_eval.jsonl"},
        "train": {"max_steps": 3, "per_device_batch_size": 4, "learning_rate": 1e-3, "max_length": 64},
    }
    for section, values in sections.items():
        config.setdefault(section, {}).update(values)
    path = workspace / f"{run_id}.json"  # JSON is YAML
    path.write_text(json.dumps(config))
    run_dir = workspace / "runs" / run_id
    result = subprocess.run(
        [sys.executable, "-m", "engine", "train", str(path), "--run-dir", str(run_dir)],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ, HF_HUB_OFFLINE="1"),
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    return run_dir


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("variants")


def test_full_fine_tune_evaluates_its_model_and_exports_only_merged(workspace):
    from transformers import AutoModelForCausalLM

    run_dir = train(workspace, "full", adapter={"method": "full"})
    result = evaluate(run_dir, max_rows=4)
    assert result["weights"] == "model" and result["data"]["rows"] == 4
    assert result["base"]["eval_loss"] != result["tuned"]["eval_loss"]
    with pytest.raises(ArtifactError, match="trained the whole model .* export the merged kind instead"):
        plan_export(run_dir, kind="adapter")
    plan = plan_export(run_dir, kind="merged", dtype="bfloat16")
    export(plan, Progress(None))
    saved = AutoModelForCausalLM.from_pretrained(str(plan.target))
    assert saved.dtype == torch.bfloat16
    original = AutoModelForCausalLM.from_pretrained(str(run_dir / "model"), dtype=torch.float32)
    assert torch.equal(saved.lm_head.weight, original.lm_head.weight.to(torch.bfloat16))


def test_qlora_run_merges_into_an_unquantized_base(workspace):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    run_dir = train(workspace, "qlora", quantization={"mode": "4bit"}, adapter={"target_modules": "all-linear"})
    plan = plan_export(run_dir, kind="merged", dtype="float32")
    export(plan, Progress(None))
    config = json.loads((plan.target / "config.json").read_text())
    assert "quantization_config" not in config
    assert "QLoRA" in (plan.target / "README.md").read_text()
    merged = AutoModelForCausalLM.from_pretrained(str(plan.target), dtype=torch.float32).eval()
    base = AutoModelForCausalLM.from_pretrained(str(DEMO_MODEL), dtype=torch.float32)
    expected_model = PeftModel.from_pretrained(base, str(run_dir / "adapter")).eval()
    ids = torch.tensor([[1, 5, 9, 42, 7, 3]])
    with torch.inference_mode():
        assert torch.allclose(merged(input_ids=ids).logits, expected_model(input_ids=ids).logits, atol=1e-4)
