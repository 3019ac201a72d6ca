"""A two-trial sweep on the GPU through ``python -m engine sweep``: each trial an ordinary run of the workspace,
trained on the device, evaluated, and told to the study."""

from __future__ import annotations

import math
from pathlib import Path

import yaml

from engine.sweeps import sweep_status
from tests.engine.sweeps.sweep_files import engine_cli
from tests.gpu.gpu_runs import STEPS, check_trained, run_config


def test_a_two_trial_sweep_completes_both_trials(device: str, tmp_path: Path) -> None:
    base = run_config(device, train={"eval_strategy": "steps", "eval_steps": STEPS, "eval_batch_size": 50})
    sweep = {
        "name": "gpu-sweep",
        "base": base,
        "space": {"train.learning_rate": {"low": 1e-3, "high": 5e-3, "log": True}},
        "trials": 2,
        "sampler": "random",
        "pruner": "none",
        "seed": 7,
    }
    path = tmp_path / "gpu-sweep.yaml"
    path.write_text(yaml.safe_dump(sweep, sort_keys=False), encoding="utf-8")
    workspace = tmp_path / "ws"
    done = engine_cli("sweep", str(path), "--workspace", str(workspace), timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    trials = sweep_status(workspace, "gpu-sweep").trials
    assert [trial.state for trial in trials] == ["complete", "complete"]
    for trial in trials:
        assert math.isfinite(trial.value)  # the trial's last eval loss
        check_trained(workspace / "runs" / trial.run_id, device)
