"""Real sweeps of the demo model through the CLI (``python -m engine sweep``): each trial an ordinary run of the
workspace, the study told each run's last eval loss, a failed run failing its trial only, a hopeless trial pruned,
and a driver killed (or interrupted) mid-trial continued by the same command without counting a trial twice."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import optuna
import pytest

from engine import runs
from engine.runs import RunError
from engine.store.rundir import PRUNED, read_status
from engine.sweeps import sweep_status
from engine.sweeps.study import storage_for, sweep_dir
from tests.engine.sweeps.sweep_files import (
    DEADLINE_S,
    EVAL_STEPS,
    demo_base,
    engine_cli,
    last_eval_loss,
    metrics,
    start_engine_cli,
    wait_for,
    write_sweep,
)

pytestmark = pytest.mark.integration


def trial_run(workspace: Path, sweep: str, number: int) -> Path | None:
    """The run directory of a sweep's trial, once it exists."""
    found = sorted((workspace / "runs").glob(f"*-{sweep}-trial-{number}"))
    return found[0] if found and (found[0] / "status.json").is_file() else None


def training(workspace: Path, sweep: str, number: int) -> Path | None:
    """The trial's run directory once its run is training (running, past its first step)."""
    run_dir = trial_run(workspace, sweep, number)
    current = read_status(run_dir) if run_dir else None
    return run_dir if current and current.state == "running" and (current.step or 0) >= 1 else None


def run_sweep_cli(path: Path, workspace: Path) -> str:
    done = engine_cli("sweep", str(path), "--workspace", str(workspace), timeout=600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    return done.stdout


def no_step_twice(run_dir: Path) -> None:
    seen = [(event["event"], event["step"]) for event in metrics(run_dir) if event["event"] in ("train", "eval")]
    assert len(seen) == len(set(seen)), seen


def test_a_sweep_runs_each_trial_as_an_ordinary_run(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    sweep: dict[str, Any] = {
        "name": "three",
        "base": demo_base(),
        "space": {
            "train.learning_rate": {"low": 1e-3, "high": 5e-3, "log": True},
            # A module name the demo model does not have: the config is valid, its run fails when peft looks.
            "adapter.target_modules": {"choices": ["all-linear", ["no_such_proj"]]},
        },
        "trials": 3,
        "sampler": "random",
        "pruner": "none",
        "seed": 7,
        "first_trials": [
            {"train.learning_rate": 3e-3, "adapter.target_modules": "all-linear"},
            {"adapter.target_modules": ["no_such_proj"]},
            {"adapter.target_modules": "all-linear"},
        ],
    }
    output = run_sweep_cli(write_sweep(tmp_path, sweep), workspace)

    lines = [line for line in output.splitlines() if line.startswith("trial ")]
    assert [line.split("  ")[0] for line in lines] == ["trial 0", "trial 1", "trial 2"], output
    trials = {trial.number: trial for trial in sweep_status(workspace, "three").trials}
    assert [trials[n].state for n in range(3)] == ["complete", "fail", "complete"]
    assert "no_such_proj" in (trials[1].note or "")  # the run's own error, and the sweep went on
    for number, trial in trials.items():
        run_dir = workspace / "runs" / trial.run_id
        current = runs.status(run_dir)
        assert current.sweep == {"name": "three", "trial": number}
        assert current.name == f"three-trial-{number}" and current.state == ("failed" if number == 1 else "completed")
    for number in (0, 2):
        assert trials[number].value == last_eval_loss(workspace / "runs" / trials[number].run_id)
    assert trials[0].params["train.learning_rate"] == 3e-3

    status = engine_cli("sweep-status", str(workspace), "three")
    assert status.returncode == 0, status.stderr
    header, *rows = status.stdout.splitlines()[1:]
    assert header.split()[:4] == ["rank", "trial", "state", "eval_loss"]
    ranked = sorted((0, 2), key=lambda n: trials[n].value)
    assert [row.split()[:3] for row in rows] == [
        ["1", str(ranked[0]), "complete"],
        ["2", str(ranked[1]), "complete"],
        ["-", "1", "fail"],
    ]
    listed = engine_cli("sweep-status", str(workspace)).stdout
    assert listed.startswith("three  3/3 trials (2 complete, 1 failed)  best eval_loss")


def test_a_trial_that_falls_behind_the_median_is_pruned(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    # A learning rate of 1e-9 leaves the adapter where it starts (LoRA's B is zero): its eval loss stays the base
    # model's (about 8), while 3e-3 brings it near 2 within 5 steps. The first trials fix the order, so the learner
    # finishes first and the median pruner (no warm-up, one finished trial) judges the other at its first eval.
    # The judged trial has 200 steps: on a busy machine a 10-step run can end before the driver has read its eval.
    sweep = {
        "name": "pruning",
        "base": demo_base(),
        "space": {"train.learning_rate": {"choices": [3e-3, 1e-9]}, "train.max_steps": {"choices": [10, 200]}},
        "trials": 2,
        "pruner": {"kind": "median", "startup_trials": 1, "warmup_steps": 0},
        "first_trials": [
            {"train.learning_rate": 3e-3, "train.max_steps": 10},
            {"train.learning_rate": 1e-9, "train.max_steps": 200},
        ],
    }
    output = run_sweep_cli(write_sweep(tmp_path, sweep), workspace)

    trials = {trial.number: trial for trial in sweep_status(workspace, "pruning").trials}
    why = f"{output}\n" + "\n".join(f"trial {t.number}: {t.state} {t.note}" for t in trials.values())
    assert (trials[0].state, trials[1].state) == ("complete", "pruned"), why
    reason = trials[1].note or ""
    assert reason.startswith(f"pruned at step {EVAL_STEPS}: eval_loss ") and "worse than the median" in reason
    pruned = workspace / "runs" / trials[1].run_id
    current = runs.status(pruned)
    assert (current.state, current.error) == (PRUNED, reason)
    assert current.checkpoints and current.step < 200  # stopped early, with a checkpoint
    assert current.is_final and not current.is_resumable
    with pytest.raises(RunError, match="the run is pruned"):
        runs.resume_point(pruned)
    [eval_at_5] = [e["eval_loss"] for e in metrics(pruned) if e["event"] == "eval" and e["step"] == EVAL_STEPS]
    assert f"eval_loss {eval_at_5:.5g}" in reason and "pruned" in output.splitlines()[2]


def test_a_killed_driver_is_continued_by_the_same_command(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    sweep = {
        "name": "killed",
        "base": demo_base(max_steps=20),
        "space": {"train.learning_rate": {"choices": [3e-3, 2e-3]}},
        "trials": 2,
        "sampler": "random",
        "pruner": "none",
    }
    path = write_sweep(tmp_path, sweep)
    driver = start_engine_cli("sweep", str(path), "--workspace", str(workspace), log=tmp_path / "first.log")
    try:
        run_dir = wait_for(lambda: training(workspace, "killed", 0), "trial 0 to train")
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait(timeout=30)
    finally:
        if driver.poll() is None:
            driver.kill()
    assert runs.status(run_dir).state in ("running", "completed")  # the run outlived its driver

    output = run_sweep_cli(path, workspace)
    assert f"trial 0: picking up its run {run_dir.name}" in output
    summary = sweep_status(workspace, "killed")
    assert sorted(trial.number for trial in summary.trials) == [0, 1]
    assert [trial.state for trial in summary.trials] == ["complete", "complete"] and summary.done == 2
    assert sorted(trial.run_id for trial in summary.trials) == sorted(found.name for found in runs.run_dirs(workspace))
    study = optuna.load_study(study_name="killed", storage=storage_for(sweep_dir(workspace, "killed")))
    for trial in study.trials:
        trial_dir = workspace / "runs" / trial.user_attrs["run_id"]
        no_step_twice(trial_dir)
        assert trial.value == last_eval_loss(trial_dir)
        assert sorted(trial.intermediate_values) == [5, 10, 15, 20]


def test_ctrl_c_stops_the_trial_with_a_checkpoint_and_the_same_command_resumes_it(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    sweep = {
        "name": "paused",
        "base": demo_base(max_steps=20),
        "space": {"train.learning_rate": {"choices": [3e-3]}},
        "trials": 1,
        "pruner": "none",
    }
    path = write_sweep(tmp_path, sweep)
    log = tmp_path / "first.log"
    driver = start_engine_cli("sweep", str(path), "--workspace", str(workspace), log=log)
    try:
        run_dir = wait_for(lambda: training(workspace, "paused", 0), "trial 0 to train")
        os.kill(driver.pid, signal.SIGINT)
        assert driver.wait(timeout=DEADLINE_S) == 130, log.read_text()
    finally:
        if driver.poll() is None:
            driver.kill()
    stopped = runs.status(run_dir)
    assert stopped.state == "stopped" and stopped.checkpoints, stopped
    assert f"to continue: python -m engine sweep {path} --workspace {workspace}" in log.read_text()
    assert sweep_status(workspace, "paused").trials[0].state == "running"

    output = run_sweep_cli(path, workspace)
    assert f"trial 0: picking up its run {run_dir.name} (stopped)" in output
    [trial] = sweep_status(workspace, "paused").trials
    assert (trial.state, trial.run_id) == ("complete", run_dir.name)
    assert trial.value == last_eval_loss(run_dir)
    events = metrics(run_dir)
    assert [e["step"] for e in events if e["event"] == "resume"] == [stopped.checkpoints[-1]]
    no_step_twice(run_dir)
