"""A sweep whose objective is Evaluate's exact match: each completed trial is scored by a real evaluation job on
the first rows of its eval set, the score is stored with the run as any evaluation is, and the study is told the
tuned model's exact match recomputed here from the listed answers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engine.sweeps import sweep_status
from tests.engine.sweeps.sweep_files import demo_base, engine_cli, write_sweep

pytestmark = pytest.mark.integration

EVAL_ROWS = 6


def stored_evaluations(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(path.read_text()) for path in sorted((run_dir / "evaluations").glob("*.json"))]


def test_exact_match_is_scored_by_evaluate_after_each_trial(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    sweep: dict[str, Any] = {
        "name": "em",
        "base": demo_base(max_steps=10),
        "space": {"train.learning_rate": {"low": 1e-3, "high": 5e-3, "log": True}},
        "objective": {"metric": "exact_match", "direction": "maximize", "eval_rows": EVAL_ROWS},
        "trials": 2,
        "sampler": "random",
        "pruner": "none",
    }
    done = engine_cli("sweep", str(write_sweep(tmp_path, sweep)), "--workspace", str(workspace), timeout=600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert "scoring its run" in done.stdout

    summary = sweep_status(workspace, "em")
    assert [trial.state for trial in summary.trials] == ["complete", "complete"]
    for trial in summary.trials:
        evaluations = stored_evaluations(workspace / "runs" / trial.run_id)
        assert len(evaluations) == 1, evaluations
        (result,) = evaluations
        assert result["data"]["choice"] == "eval" and result["data"]["rows"] == EVAL_ROWS
        predictions = result["predictions"]
        assert len(predictions) == EVAL_ROWS
        share = sum(bool(row["tuned_correct"]) for row in predictions) / EVAL_ROWS
        assert trial.value == pytest.approx(share)
    status = engine_cli("sweep-status", str(workspace), "em")
    assert status.returncode == 0, status.stderr
    assert status.stdout.splitlines()[1].split()[:4] == ["rank", "trial", "state", "exact_match"]
