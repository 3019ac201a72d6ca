"""A list of datasets through the real CLI: ``python -m engine check`` reports each one, and ``python -m engine
train`` trains on them (the demo model, a few steps)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

from engine import runs
from engine.data import DatasetRows
from engine.store.paths import PROJECT_ROOT
from engine.store.rundir import iter_metrics
from engine.training.check import CheckReport
from tests.helpers.engine_cli import run_check, run_train

pytestmark = pytest.mark.integration

SHARED = PROJECT_ROOT.parent / "shared" / "datasets"
ALPACA = SHARED / "alpaca_en_demo.json"
DEMO_TRAIN = "assets/datasets/demo_sft_train.jsonl"


def list_config(tmp_path: Path, **train: object) -> Path:
    """A config file whose data.path lists the shared alpaca set (20 rows) and the bundled chat set (10, twice)."""
    data = {
        "name": "two-datasets",
        "data": {
            "path": [{"path": str(ALPACA), "max_samples": 20}, {"path": DEMO_TRAIN, "max_samples": 10, "weight": 2}]
        },
        "train": {"max_steps": 3, "per_device_batch_size": 4, "max_length": 64, "logging_steps": 1, **train},
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


@pytest.mark.skipif(not SHARED.is_dir(), reason="shared datasets not present")
def test_check_prints_one_line_per_dataset(tmp_path: Path) -> None:
    result = run_check(list_config(tmp_path), PROJECT_ROOT)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert lines[0] == "data: 2 datasets, 40 rows after their caps and weights"
    assert lines[1] == f"  data.path.0: {ALPACA}: alpaca, 20 rows used (the first 20 of 999)"
    assert lines[2] == (
        f"  data.path.1: {PROJECT_ROOT / DEMO_TRAIN}: conversational, 20 rows used (the first 10 of 2,000, weight 2)"
    )
    assert lines[3] == "format: alpaca+conversational"
    assert lines[-1] == "ok: the config and dataset are ready to train"


def test_one_dataset_keeps_the_single_line() -> None:
    report = CheckReport(
        data=_report([DatasetRows("data.path", "/x.jsonl", "text", 5, 5)]),
        parameters="p",  # type: ignore[arg-type]
        device="cpu",
        precision="fp32",
        steps=3,
    )
    assert report.lines()[:3] == ["data: /x.jsonl", "format: text", "rows: 5 train, 0 eval"]


def _report(datasets: list[DatasetRows]) -> object:
    from engine.data import DataReport

    return DataReport("text", "/x.jsonl", 5, 0, ["text"], 5, datasets=datasets)


@pytest.mark.skipif(not SHARED.is_dir(), reason="shared datasets not present")
def test_training_on_two_datasets_completes_with_finite_losses(tmp_path: Path) -> None:
    config, run_dir = list_config(tmp_path), tmp_path / "run"
    result = run_train(config, run_dir)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "data: 2 datasets, 40 rows after their caps and weights" in result.stdout
    status = runs.status(run_dir)
    assert (status.state, status.step) == ("completed", 3)
    losses = [event["loss"] for event in iter_metrics(run_dir) if event.get("event") == "train" and "loss" in event]
    assert len(losses) == 3 and all(math.isfinite(loss) for loss in losses)
    saved = yaml.safe_load((run_dir / "config.yaml").read_text(encoding="utf-8"))
    assert [entry.get("weight", 1) for entry in saved["data"]["path"]] == [1, 2.0]
