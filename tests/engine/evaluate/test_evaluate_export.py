"""Evaluate and export a real trained demo run through the real ``python -m engine`` job processes."""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
import torch

from engine.config import parse_config, save_config
from engine.evaluate import evaluations
from engine.export.exports import ExportError, plan_export, start_export
from engine.export.model_card import final_metrics
from engine.runs import jobs
from engine.runs.artifacts import ArtifactError
from engine.store.paths import PROJECT_ROOT
from engine.store.rundir import iter_metrics, update_status
from engine.store.workspace import exports_dir
from studio.runs.data import RunIndex
from tests.helpers.demo_run import trained_demo_run

pytestmark = pytest.mark.integration

DEMO_MODEL = PROJECT_ROOT / "assets" / "demo-model"
TOKEN = "hf_studioTEST" + "x7Qz" * 6  # a fake token that must never reach a file


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("workspace")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory, workspace: Path) -> Path:
    return trained_demo_run(tmp_path_factory, workspace)


@pytest.fixture
def live_engine_pid():
    """A live process whose command line names the engine, standing in for a training supervisor."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "engine-standin"])
    yield process.pid
    process.kill()
    process.wait()


def engine_cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "engine", *args],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, HF_HUB_OFFLINE="1", **(env or {})),
    )


def logits(model, text_ids: torch.Tensor) -> torch.Tensor:
    with torch.inference_mode():
        return model(input_ids=text_ids).logits.float()


def sample_ids(tokenizer) -> torch.Tensor:
    """A held-out request of the demo task. (On text far from anything it saw, this tiny model has positions
    where the final RMSNorm divides by a near-zero scale, so float32 rounding alone moves a logit by 1e-2.)"""
    first = json.loads((PROJECT_ROOT / "assets" / "datasets" / "demo_sft_eval.jsonl").read_text().splitlines()[0])
    messages = first["messages"][:1]
    encoded = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", return_dict=True)
    return encoded["input_ids"]


def test_evaluation_puts_the_tuned_model_ahead_and_lands_in_the_run_list(run_dir, workspace):
    job_dir = evaluations.start_evaluation(run_dir, max_rows=40, workspace=workspace)
    status = jobs.wait(job_dir, timeout=300)
    assert status.state == "completed", status
    result = evaluations.read_evaluation(Path(status.result["path"]))
    assert Path(status.result["path"]).parent == run_dir / "evaluations"
    base, tuned = result["base"], result["tuned"]
    print(f"\nexact match base {base['exact_match']:.0%} -> tuned {tuned['exact_match']:.0%}")
    assert tuned["eval_loss"] < base["eval_loss"]
    assert tuned["perplexity"] == pytest.approx(math.exp(tuned["eval_loss"]))
    assert 0.0 <= tuned["exact_match"] <= 1.0 and 0.0 <= base["exact_match"] <= 1.0
    data = result["data"]
    assert data["source"].endswith("demo_sft_eval.jsonl")
    assert (data["choice"], data["rows"], data["format"]) == ("eval", 40, "conversational")
    predictions = result["predictions"]
    assert len(predictions) == 40
    assert sum(p["tuned_correct"] for p in predictions) == round(tuned["exact_match"] * 40)
    assert all(p["tuned_correct"] == (p["tuned"].strip() == p["reference"].strip()) for p in predictions)
    # The trainer's eval loss on the same rows is of the same size (its batches weight tokens alike).
    trainer_eval = final_metrics(list(iter_metrics(run_dir))).eval_loss
    assert tuned["eval_loss"] == pytest.approx(trainer_eval, rel=0.1)
    row = next(row for row in RunIndex(workspace).rows() if row.run_id == run_dir.name)
    assert row.evaluation == evaluations.summary_text(result)
    assert f"loss {base['eval_loss']:.3g} → {tuned['eval_loss']:.3g}" in row.evaluation


def test_evaluate_cli_on_a_checkpoint_and_the_training_rows(run_dir):
    result = engine_cli("evaluate", str(run_dir), "--data", "train", "--checkpoint", "30", "--max-rows", "8")
    assert result.returncode == 0, result.stderr
    saved = evaluations.latest_evaluation(run_dir)
    assert saved["weights"] == "checkpoint-30" and saved["data"]["choice"] == "train" and saved["data"]["rows"] == 8
    assert saved["tuned"]["eval_loss"] < saved["base"]["eval_loss"]
    refused = engine_cli("evaluate", str(run_dir), "--checkpoint", "7")
    assert refused.returncode == 2 and "has no checkpoint 7 (checkpoints: 30, 60)" in refused.stderr


def test_merged_export_reloads_with_plain_transformers_and_matches_base_plus_adapter(run_dir, workspace):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    result = engine_cli("export", str(run_dir), "--kind", "merged", "--dtype", "float32")
    assert result.returncode == 0, result.stderr
    target = exports_dir(workspace) / f"{run_dir.name}-merged-float32"
    assert (target / "model.safetensors").is_file() and (target / "README.md").is_file()
    merged = AutoModelForCausalLM.from_pretrained(str(target), dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(str(target))
    assert tokenizer.chat_template == AutoTokenizer.from_pretrained(str(run_dir / "adapter")).chat_template
    base = AutoModelForCausalLM.from_pretrained(str(DEMO_MODEL), dtype=torch.float32)
    tuned = PeftModel.from_pretrained(base, str(run_dir / "adapter")).eval()
    ids = sample_ids(tokenizer)
    expected, got = logits(tuned, ids), logits(merged.eval(), ids)
    assert torch.allclose(got, expected, atol=1e-4), (got - expected).abs().max()
    with tuned.disable_adapter():  # the merge changed something: the adapter is not a no-op
        assert not torch.allclose(logits(tuned, ids), expected, atol=1e-3)


def test_adapter_export_loads_with_peft_and_carries_a_model_card(run_dir, workspace):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    result = engine_cli("export", str(run_dir), "--kind", "adapter", "--out", "my-adapter", "--zip")
    assert result.returncode == 0, result.stderr
    target = exports_dir(workspace) / "my-adapter"
    assert {"adapter_model.safetensors", "adapter_config.json", "tokenizer.json", "README.md"} <= {
        p.name for p in target.iterdir()
    }
    assert not {"optimizer.pt", "training_args.bin"} & {p.name for p in target.iterdir()}
    with zipfile.ZipFile(target.with_name("my-adapter.zip")) as archive:
        assert "my-adapter/adapter_model.safetensors" in archive.namelist()
    base = AutoModelForCausalLM.from_pretrained(str(DEMO_MODEL), dtype=torch.float32)
    exported = PeftModel.from_pretrained(base, str(target)).eval()
    ids = sample_ids(AutoTokenizer.from_pretrained(str(target)))
    base2 = AutoModelForCausalLM.from_pretrained(str(DEMO_MODEL), dtype=torch.float32)
    original = PeftModel.from_pretrained(base2, str(run_dir / "adapter")).eval()
    assert torch.equal(logits(exported, ids), logits(original, ids))
    card = (target / "README.md").read_text()
    final = final_metrics(list(iter_metrics(run_dir)))
    assert f"| final train loss | {final.train_loss:.4f} |" in card
    assert f"| final eval loss | {final.eval_loss:.4f} |" in card
    for line in ("learning_rate: 0.003", "max_steps: 60", "r: 16", "target_modules: all-linear", "library_name: peft"):
        assert line in card


def _run_copy(workspace: Path, run_id: str, **status) -> Path:
    run_dir = workspace / "runs" / run_id
    run_dir.mkdir(parents=True)
    save_config(parse_config({"name": run_id}), run_dir / "config.yaml")
    update_status(run_dir, name=run_id, created_at=time.time(), **status)
    return run_dir


def test_export_refuses_missing_running_and_weightless_runs_and_bad_targets(run_dir, workspace, live_engine_pid):
    with pytest.raises(ArtifactError, match="no run at .*nope"):
        plan_export(workspace / "runs" / "nope")
    running = _run_copy(workspace, "busy", state="running", supervisor_pid=live_engine_pid)
    with pytest.raises(ArtifactError, match="busy is still running, so it has no final result yet; press Save now"):
        plan_export(running)
    with pytest.raises(ArtifactError, match="busy has no checkpoint 3 \\(checkpoints: none\\)"):
        plan_export(running, checkpoint=3)  # a running run's checkpoint may be exported, when it has one
    stopped = _run_copy(workspace, "empty", state="stopped")
    with pytest.raises(ArtifactError, match="empty has no final adapter .* it has no checkpoint either"):
        plan_export(stopped)
    outside = workspace.parent / "elsewhere"
    for out, message in [
        (outside, "outside the workspace's exports directory"),
        ("../escape", "outside the workspace's exports directory"),
        (".hidden", "is not allowed"),
    ]:
        with pytest.raises(ExportError, match=message):
            plan_export(run_dir, out=out)
    root = exports_dir(workspace)
    (root / "taken").mkdir(parents=True)
    (root / "taken" / "x.txt").write_text("keep me")
    (root / "a-file").write_text("keep me")
    with pytest.raises(ExportError, match="already exists and is not empty"):
        plan_export(run_dir, out="taken")
    with pytest.raises(ExportError, match="exists and is a file"):
        plan_export(run_dir, out="a-file")
    (root / "empty-dir").mkdir()
    assert plan_export(run_dir, out="empty-dir").target == root / "empty-dir"  # an empty directory is fine
    cli = engine_cli("export", str(running), "--kind", "adapter")
    assert cli.returncode == 2 and "busy is still running" in cli.stderr
    assert not list(root.glob(f"*{jobs.PARTIAL_MARK}*"))


def _wait_for_partial(job_dir: Path) -> list[str]:
    deadline = time.time() + 60
    while time.time() < deadline:
        status = jobs.status(job_dir)
        if status.partials:
            return status.partials
        assert jobs.is_running(status), status
        time.sleep(0.05)
    raise AssertionError("the export never started writing")


def test_a_cancelled_or_killed_export_leaves_no_directory(run_dir, workspace):
    root = exports_dir(workspace)
    before = set(root.iterdir()) if root.is_dir() else set()
    job_dir = start_export(plan_export(run_dir, kind="merged", out="cancelled"))
    partials = _wait_for_partial(job_dir)
    assert all(Path(p).exists() for p in partials)
    assert jobs.cancel(job_dir)
    status = jobs.wait(job_dir, timeout=60)
    assert status.state == "cancelled" and status.error == "cancelled by the user"
    assert not (root / "cancelled").exists() and set(root.iterdir()) == before

    job_dir = start_export(plan_export(run_dir, kind="merged", out="killed"))
    partials = _wait_for_partial(job_dir)
    os.killpg(os.getpgid(jobs.status(job_dir).pid), signal.SIGKILL)
    status = jobs.wait(job_dir, timeout=30)  # the reader reconciles the dead job and removes its partial output
    assert status.state == "failed" and "ended without finishing" in status.error
    assert not any(Path(p).exists() for p in partials) and set(root.iterdir()) == before


def test_push_fails_offline_with_a_clear_message_and_the_token_never_reaches_a_file(run_dir, workspace):
    plan = plan_export(run_dir, out="for-the-hub")
    job_dir = start_export(plan, push_to="someone/demo-adapter", token=TOKEN, make_zip=True)
    status = jobs.wait(job_dir, timeout=120)
    assert status.state == "failed"
    assert "the export is saved at" in status.error and "pushing to someone/demo-adapter failed" in status.error
    assert "offline mode is enabled" in status.error
    assert (plan.target / "adapter_model.safetensors").is_file() and plan.zip_path.is_file()
    assert status.result["path"] == str(plan.target)
    leaks = [path for path in workspace.rglob("*") if path.is_file() and TOKEN.encode() in path.read_bytes()]
    assert leaks == []
    assert TOKEN not in " ".join(status.command) and TOKEN not in jobs.log_tail(job_dir, 10**6)


def test_push_without_any_token_says_so(run_dir, workspace, tmp_path):
    env = {"HF_TOKEN": "", "HF_HOME": str(tmp_path)}  # no token in the environment nor a stored login
    result = engine_cli("export", str(run_dir), "--out", "no-token", "--push-to", "someone/x", env=env)
    assert result.returncode == 2 and "no hub token: set HF_TOKEN" in result.stderr
    shutil.rmtree(exports_dir(workspace) / "no-token")
