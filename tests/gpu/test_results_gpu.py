"""What a trained run is for, on the GPU: Chat streams a reply from its adapter, Evaluate scores the base against it
(``python -m engine evaluate``), and a merged export (``python -m engine export --kind merged``) loads with plain
transformers and gives the logits of the base with the adapter."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from engine.chat.client import ChatClient, ModelSpec, SamplingParams
from engine.evaluate.evaluations import latest_evaluation
from engine.store.workspace import exports_dir, runs_dir
from tests.engine.sweeps.sweep_files import engine_cli
from tests.gpu.gpu_runs import PROMPT, check_trained, folder_logits, result_logits, run_config, train

# One trained run serves every test here: with the check's --dist loadgroup they stay on one worker.
pytestmark = pytest.mark.xdist_group("trained-run")


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("gpu-workspace")


@pytest.fixture(scope="module")
def run_dir(workspace: Path, device: str) -> Path:
    """A LoRA run of the demo preset trained a few steps on the device, in the workspace (it keeps the preset's
    eval set, which Evaluate scores)."""
    trained = train(run_config(device), runs_dir(workspace) / "gpu-sft")
    check_trained(trained, device)
    return trained


def test_chat_streams_a_reply_from_the_adapter_on_the_device(run_dir: Path, workspace: Path, device: str) -> None:
    client = ChatClient(workspace)
    try:
        list(client.load(ModelSpec(run_dir=run_dir)))
        assert client.info.is_adapter and client.info.device.startswith(device)
        reply = "".join(client.generate([{"role": "user", "content": PROMPT}], SamplingParams(temperature=0)))
        assert reply.strip() and client.last_finish["reason"] in ("stop", "length")
    finally:
        client.unload()


def test_evaluate_scores_the_base_and_the_tuned_model(run_dir: Path) -> None:
    done = engine_cli("evaluate", str(run_dir), "--max-rows", "8", timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = latest_evaluation(run_dir)
    assert result is not None and result["data"]["rows"] == 8
    for arm in ("base", "tuned"):
        assert math.isfinite(result[arm]["eval_loss"]) and 0.0 <= result[arm]["exact_match"] <= 1.0


def test_a_merged_export_loads_and_matches_the_adapter(run_dir: Path, workspace: Path, device: str) -> None:
    done = engine_cli("export", str(run_dir), "--kind", "merged", "--dtype", "float32", "--out", "merged", timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    merged = folder_logits(exports_dir(workspace) / "merged", device)
    assert (merged - result_logits(run_dir, device)).abs().max().item() < 1e-3  # the adapter, merged
