"""Real runs of the demo model through the real supervisor and worker processes.

The reference run goes through the foreground CLI; the others go through engine.runs as the studio will.
They share one small config so their losses can be compared step by step.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from engine import runs
from engine.config import RunConfig, parse_config
from engine.store.paths import PROJECT_ROOT
from engine.store.rundir import iter_metrics
from tests.helpers.run_progress import stop_then_resume, wait_for_step

pytestmark = pytest.mark.integration

DEMO_MODEL = PROJECT_ROOT / "assets" / "demo-model"
MAX_STEPS = 10


def small_config(**overrides: Any) -> RunConfig:
    """The demo task, cut down to a few quick steps with a checkpoint every 3. Sections given are merged into
    the defaults'; a top-level value (``method="dpo"``) is set."""
    data = {
        "name": "integration",
        "model": {"name_or_path": str(DEMO_MODEL)},
        "data": {"path": "assets/datasets/demo_sft_train.jsonl", "max_samples": 64},
        "adapter": {"r": 8, "dropout": 0.1, "target_modules": "all-linear"},
        "train": {
            "max_steps": MAX_STEPS,
            "per_device_batch_size": 4,
            "learning_rate": 3e-3,
            "max_length": 64,
            "save_steps": 3,
            "logging_steps": 1,
        },
        # Resumed runs are compared with uninterrupted ones bit for bit: the engine's CPU share would change the
        # thread count with the machine's load, and with it the float sums of padding-free batches.
        "launch": {"threads_per_process": 1},
    }
    for section, values in overrides.items():
        if isinstance(values, dict):
            data.setdefault(section, {}).update(values)
        else:
            data[section] = values
    return parse_config(data)


def train_losses(run_dir: Path) -> dict[int, float]:
    """step -> loss of the train events; fails if a step was written twice."""
    events = [event for event in iter_metrics(run_dir) if event["event"] == "train"]
    steps = [event["step"] for event in events]
    assert len(steps) == len(set(steps)), f"duplicated steps: {steps}"
    return {event["step"]: event["loss"] for event in events}


@pytest.fixture(scope="module")
def reference_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An uninterrupted run, through the foreground CLI exactly as a user would type it."""
    root = tmp_path_factory.mktemp("reference")
    config_path = root / "config.yaml"
    config_path.write_text(small_config().to_yaml())
    run_dir = root / "run"
    result = subprocess.run(
        [sys.executable, "-m", "engine", "train", str(config_path), "--run-dir", str(run_dir)],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, PYTHONPATH=str(PROJECT_ROOT)),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"train step {MAX_STEPS}/{MAX_STEPS}" in result.stdout  # the foreground run echoes its log
    return run_dir


def test_run_completes_with_finite_falling_losses(reference_run: Path):
    status = runs.status(reference_run)
    assert status.state == "completed" and status.exit_code == 0
    assert status.step == MAX_STEPS and status.max_steps == MAX_STEPS
    assert status.trainable_params > 0
    losses = train_losses(reference_run)
    assert sorted(losses) == list(range(1, MAX_STEPS + 1))
    assert all(math.isfinite(loss) for loss in losses.values())
    first, last = [losses[s] for s in (1, 2, 3)], [losses[s] for s in (8, 9, 10)]
    assert sum(last) / 3 < 0.8 * sum(first) / 3, losses
    train_events = [event for event in iter_metrics(reference_run) if event["event"] == "train"]
    for key in ("learning_rate", "grad_norm", "epoch", "time", "tokens_per_second", "memory_mb"):
        assert all(isinstance(event[key], (int, float)) for event in train_events), key
    assert all(event["tokens_per_second"] > 0 for event in train_events)
    log = (reference_run / "train.log").read_text()
    assert "completed: 10 steps" in log and "train step 5/10" in log


def test_result_is_a_standard_peft_adapter(reference_run: Path):
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    adapter = reference_run / "adapter"
    config = json.loads((adapter / "adapter_config.json").read_text())
    assert config["r"] == 8 and config["peft_type"] == "LORA"
    base = AutoModelForCausalLM.from_pretrained(DEMO_MODEL)
    tokenizer = AutoTokenizer.from_pretrained(adapter)
    ids = tokenizer("March 15, 2024", return_tensors="pt").input_ids
    with torch.no_grad():
        base_logits = base(ids).logits
        tuned_logits = PeftModel.from_pretrained(base, adapter)(ids).logits
    assert not torch.allclose(base_logits, tuned_logits)  # the adapter changes the model


def test_sigterm_stops_with_checkpoint_and_resume_matches(reference_run: Path, tmp_path: Path):
    run_dir = runs.create_run(small_config(), run_dir=tmp_path / "run")
    runs.start(run_dir)
    wait_for_step(run_dir, 4)
    assert runs.stop(run_dir)
    stopped = runs.wait(run_dir, timeout=120)
    assert stopped.state == "stopped", stopped
    assert stopped.checkpoints and stopped.checkpoints[-1] == stopped.step < MAX_STEPS
    runs.resume(run_dir)
    finished = runs.wait(run_dir, timeout=180)
    assert finished.state == "completed", finished
    assert train_losses(run_dir) == train_losses(reference_run)  # exactly, step by step
    markers = [event for event in iter_metrics(run_dir) if event["event"] == "resume"]
    assert [marker["step"] for marker in markers] == [stopped.step]
    # The first segment's time is kept: the total runs on from it, the current segment starts at the resume.
    assert finished.earlier_seconds == pytest.approx(stopped.ended_at - stopped.started_at)
    assert finished.started_at >= stopped.ended_at
    # When the run started is its first start, kept across the resume (what the Runs tab's Started column shows).
    assert stopped.first_started_at == stopped.started_at and finished.first_started_at == stopped.started_at
    assert finished.total_seconds() == pytest.approx(finished.earlier_seconds + finished.segment_seconds())


def test_status_of_a_vanished_process_reads_failed(tmp_path: Path):
    run_dir = runs.create_run(small_config(), run_dir=tmp_path / "run")
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    (run_dir / "train.log").write_text("step 1\nRuntimeError: out of memory\n")
    from engine.store.rundir import update_status

    update_status(run_dir, state="running", pid=gone.pid, supervisor_pid=gone.pid)
    status = runs.status(run_dir)
    assert status.state == "failed"
    assert "gone" in status.error
    assert "out of memory" in status.log_tail


@pytest.mark.parametrize("mode", ["4bit", "8bit"])
def test_qlora_runs_on_cpu(mode: str, tmp_path: Path):
    config = small_config(quantization={"mode": mode}, train={"max_steps": 4})
    run_dir = runs.create_run(config, run_dir=tmp_path / "run")
    runs.start(run_dir)
    status = runs.wait(run_dir, timeout=180)
    assert status.state == "completed", status
    losses = train_losses(run_dir)
    assert sorted(losses) == [1, 2, 3, 4] and all(math.isfinite(v) for v in losses.values())
    assert (run_dir / "adapter" / "adapter_model.safetensors").is_file()


def test_full_fine_tune_saves_a_transformers_model(tmp_path: Path):
    import torch
    from transformers import AutoModelForCausalLM

    config = small_config(adapter={"method": "full"}, train={"max_steps": 4, "learning_rate": 1e-3})
    run_dir = runs.create_run(config, run_dir=tmp_path / "run")
    runs.start(run_dir)
    status = runs.wait(run_dir, timeout=180)
    assert status.state == "completed", status
    assert status.trainable_params == status.total_params
    tuned = AutoModelForCausalLM.from_pretrained(run_dir / "model")
    base = AutoModelForCausalLM.from_pretrained(DEMO_MODEL)
    changed = [
        name
        for (name, a), (_, b) in zip(tuned.named_parameters(), base.named_parameters(), strict=True)
        if not torch.equal(a, b)
    ]
    assert len(changed) > 10


def test_two_processes_stop_together_and_resume(tmp_path: Path):
    """torchrun with 2 CPU processes (DDP over gloo): a stop reaches both ranks at the same step."""
    config = small_config(launch={"num_processes": 2}, train={"max_steps": 8})
    run_dir = runs.create_run(config, run_dir=tmp_path / "run")
    stop_then_resume(run_dir, 8)
    assert sorted(train_losses(run_dir)) == list(range(1, 9))
    log = (run_dir / "train.log").read_text()
    assert log.count("model: ") == 4  # two ranks, twice (start and resume)
