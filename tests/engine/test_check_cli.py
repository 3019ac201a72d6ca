"""``python -m engine check`` on good and bad inputs, through the real CLI process."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from engine.store.paths import PROJECT_ROOT

pytestmark = pytest.mark.integration

SHARED = PROJECT_ROOT.parent / "shared" / "datasets"


def run_check(tmp_path: Path, config: dict) -> subprocess.CompletedProcess:
    import yaml

    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return subprocess.run(
        [sys.executable, "-m", "engine", "check", str(path)],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=tmp_path,
        env=dict(os.environ, PYTHONPATH=str(PROJECT_ROOT)),
    )


def test_good_config_prints_a_summary(tmp_path: Path):
    result = run_check(tmp_path, {"data": {"eval_size": 0.1}, "train": {"max_length": 64, "num_epochs": 2}})
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "format: conversational" in out
    train_rows = len((PROJECT_ROOT / "assets/datasets/demo_sft_train.jsonl").read_text().splitlines())
    eval_rows = round(train_rows * 0.1)
    assert f"rows: {train_rows - eval_rows:,} train, {eval_rows:,} eval" in out
    assert "trainable of" in out and "device: cpu, precision fp32" in out
    assert f"optimizer steps: {2 * -(-(train_rows - eval_rows) // 4)}" in out
    # The predicted peak and its parts (engine.training.memory), for the CPU this run would train on.
    assert re.search(r"predicted peak memory: \d+\.\d\d GB \(CPU RSS; weights [\d.]+, .*activations [\d.]+", out), out


def test_bad_field_exits_non_zero_naming_it(tmp_path: Path):
    result = run_check(tmp_path, {"train": {"learning_rate": 0}})
    assert result.returncode == 2
    assert "train.learning_rate: must be > 0" in result.stderr
    assert "Traceback" not in result.stderr


def test_unknown_target_module_lists_the_real_ones(tmp_path: Path):
    result = run_check(tmp_path, {"adapter": {"target_modules": "q_proj,query_key_value"}})
    assert result.returncode == 2
    assert "adapter.target_modules" in result.stderr and "gate_proj" in result.stderr


def test_bad_row_is_named_by_number(tmp_path: Path):
    rows = [{"instruction": "a", "output": "b"}] * 4 + [{"instruction": "c", "output": ""}]
    (tmp_path / "bad.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    result = run_check(tmp_path, {"data": {"path": str(tmp_path / "bad.jsonl")}})
    assert result.returncode == 2
    assert "row 5" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.skipif(not SHARED.is_dir(), reason="shared datasets not present")
def test_preference_data_for_sft_is_refused_before_launch_and_checks_for_dpo(tmp_path: Path):
    data = {"path": str(SHARED / "dpo_en_demo.json"), "max_samples": 8}
    result = run_check(tmp_path, {"data": data})
    assert result.returncode == 2
    assert "dpo_en_demo.json is preference data" in result.stderr
    assert "set method to dpo or kto or orpo" in result.stderr
    result = run_check(tmp_path, {"method": "dpo", "data": data, "train": {"max_length": 2048}})
    assert result.returncode == 0, result.stderr
    assert "format: preference" in result.stdout and "rows: 8 train" in result.stdout


def test_missing_model_is_a_clear_error(tmp_path: Path):
    result = run_check(tmp_path, {"model": {"name_or_path": str(tmp_path / "no-such-model")}})
    assert result.returncode == 2
    assert "model.name_or_path" in result.stderr
    assert "Traceback" not in result.stderr


def test_train_refuses_an_unreachable_model_like_check_before_anything_starts(tmp_path: Path):
    """``train`` runs check's pre-flight: one clear line and exit 2, no traceback, no run directory."""
    import yaml

    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"model": {"name_or_path": "someone/does-not-exist"}}))
    workspace = tmp_path / "workspace"
    env = dict(os.environ, PYTHONPATH=str(PROJECT_ROOT), HF_HUB_OFFLINE="1")
    train = subprocess.run(
        [sys.executable, "-m", "engine", "train", str(config), "--workspace", str(workspace)],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=tmp_path,
        env=env,
    )
    check = run_check(tmp_path, {"model": {"name_or_path": "someone/does-not-exist"}})
    assert (train.returncode, check.returncode) == (2, 2)
    assert "Traceback" not in train.stderr and "model.name_or_path" in train.stderr
    errors = [line for line in train.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "someone/does-not-exist" in errors[0]
    assert not (workspace / "runs").exists() or not any((workspace / "runs").iterdir())
