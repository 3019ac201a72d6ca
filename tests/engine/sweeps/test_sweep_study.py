"""A sweep's folder and study without training anything: what is kept, what a later start must match, what the
study is told when a trial's values cannot make a run, and the one-driver rule."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import TrialState

from engine.store.locks import file_lock
from engine.sweeps import SweepError, list_sweeps, parse_sweep, run_sweep, sweep_status
from engine.sweeps.study import DRIVER_LOCK_FILE, distributions, open_study, sweep_dir, target_trials
from tests.engine.sweeps.sweep_files import demo_base

SPACE = {
    "train.learning_rate": {"low": 1e-4, "high": 1e-2, "log": True},
    "adapter.r": {"low": 4, "high": 16, "step": 4},
    "adapter.target_modules": {"choices": ["all-linear", "q_proj, v_proj"]},
}


def config(**extra):
    return parse_sweep({"name": "study", "base": demo_base(), "space": SPACE, **extra})


def test_each_entry_becomes_its_distribution() -> None:
    found = distributions(config())
    assert found["train.learning_rate"] == FloatDistribution(1e-4, 1e-2, log=True)
    assert found["adapter.r"] == IntDistribution(4, 16, step=4)
    # A list is not a value optuna keeps: the choice is recorded as its JSON text.
    assert found["adapter.target_modules"] == CategoricalDistribution(["all-linear", '["q_proj", "v_proj"]'])


def test_a_new_study_keeps_the_file_as_given_and_queues_the_first_trials(tmp_path: Path) -> None:
    sweep = config(first_trials=[{"adapter.target_modules": "q_proj,v_proj", "adapter.r": 8}])
    study = open_study(sweep, tmp_path, sweep_text="# as given\n")
    folder = sweep_dir(tmp_path, "study")
    assert (folder / "sweep.yaml").read_text() == "# as given\n" and (folder / "study.db").is_file()
    [waiting] = study.get_trials(states=(TrialState.WAITING,))
    assert waiting.system_attrs["fixed_params"] == {"adapter.target_modules": '["q_proj", "v_proj"]', "adapter.r": 8}
    assert study.direction == optuna.study.StudyDirection.MINIMIZE


def test_the_same_sweep_continues_and_a_different_one_is_refused_saying_what_differs(tmp_path: Path) -> None:
    first = open_study(config(), tmp_path)
    first.ask()
    again = open_study(config(), tmp_path)
    assert len(again.trials) == 1  # the same study, not a new one
    with pytest.raises(SweepError) as caught:
        open_study(config(trials=12, base={**demo_base(), "adapter": {"r": 4}}), tmp_path)
    message = str(caught.value)
    assert "holds a different sweep named study" in message
    assert "base.adapter.r: 16 -> 4" in message and "trials: 10 -> 12" in message


def test_a_grid_runs_no_more_trials_than_it_has_points() -> None:
    grid = {"adapter.r": {"low": 4, "high": 16, "step": 4}, "adapter.target_modules": {"choices": ["all-linear"]}}
    assert target_trials(parse_sweep({"name": "g", "base": demo_base(), "space": grid, "sampler": "grid"})) == 4
    assert target_trials(parse_sweep({"name": "g", "base": demo_base(), "space": grid, "trials": 3})) == 3


def test_values_that_break_a_rule_together_fail_the_trial_without_a_run(tmp_path: Path) -> None:
    # Each choice alone makes a valid run; a 4-bit base with a full fine-tune does not.
    space = {"quantization.mode": {"choices": ["none", "4bit"]}, "adapter.method": {"choices": ["lora", "full"]}}
    first = [{"quantization.mode": "4bit", "adapter.method": "full"}]
    sweep = parse_sweep({"name": "clash", "base": demo_base(), "space": space, "trials": 1, "first_trials": first})
    lines: list[str] = []
    result = run_sweep(sweep, tmp_path, echo=lines.append)
    [trial] = result.summary.trials
    assert (trial.state, trial.value, trial.counted) == ("fail", None, True)
    assert trial.note == (
        "these values do not make a valid run: quantization.mode: 4bit base weights cannot be trained; "
        "use adapter.method lora"
    )
    assert trial.run_id is None and not (tmp_path / "runs").exists()
    assert lines[1].startswith("trial 0  quantization.mode=4bit adapter.method=full  fail  these values do not make")
    assert not result.interrupted


def test_a_grid_sweep_tells_its_last_point_and_ends(tmp_path: Path) -> None:
    """optuna's GridSampler stops the study after its last point, which optuna allows only inside optimize: the
    driver, which tells each trial itself, raised RuntimeError there. Trials that fail without a run suffice."""
    space = {"quantization.mode": {"choices": ["4bit", "8bit"]}, "adapter.method": {"choices": ["full"]}}
    sweep = parse_sweep({"name": "grid", "base": demo_base(), "space": space, "sampler": "grid", "trials": 5})
    result = run_sweep(sweep, tmp_path, echo=lambda line: None)
    assert [trial.state for trial in result.summary.trials] == ["fail", "fail"]  # each point once, then the end
    modes = {trial.params["quantization.mode"] for trial in result.summary.trials}
    assert modes == {"4bit", "8bit"} and not result.interrupted


def test_a_second_driver_of_the_same_sweep_is_refused(tmp_path: Path) -> None:
    folder = sweep_dir(tmp_path, "study")
    folder.mkdir(parents=True)
    with file_lock(folder / DRIVER_LOCK_FILE), pytest.raises(SweepError, match="another driver is running"):
        run_sweep(config(), tmp_path)


def test_status_of_a_workspace_without_sweeps(tmp_path: Path) -> None:
    assert list_sweeps(tmp_path) == []
    with pytest.raises(SweepError, match="no sweep named nope"):
        sweep_status(tmp_path, "nope")


def test_a_trial_lost_before_its_run_existed_is_replaced_with_the_same_values(tmp_path: Path) -> None:
    # The values of this first trial make no valid run (so nothing trains): what matters is what the study does.
    space = {"quantization.mode": {"choices": ["none", "4bit"]}, "adapter.method": {"choices": ["lora", "full"]}}
    first = [{"quantization.mode": "4bit", "adapter.method": "full"}]
    sweep = parse_sweep({"name": "lost", "base": demo_base(), "space": space, "trials": 1, "first_trials": first})
    # A driver took the first trial, then died before making its run.
    orphan = open_study(sweep, tmp_path).ask(distributions(sweep))
    lines: list[str] = []
    result = run_sweep(sweep, tmp_path, echo=lines.append)
    lost, replacement = sorted(result.summary.trials, key=lambda trial: trial.number)
    assert (lost.number, lost.state, lost.counted) == (orphan.number, "fail", False)
    assert lost.note == "the sweep stopped before this trial's run was made"
    assert (replacement.state, replacement.counted, replacement.params) == ("fail", True, lost.params)
    assert result.summary.done == 1 and lines[-1] == "sweep lost done: 1 trials"


def test_no_trial_starts_once_the_time_budget_is_spent(tmp_path: Path) -> None:
    lines: list[str] = []
    result = run_sweep(config(time_budget_s=1e-6), tmp_path, echo=lines.append)
    assert result.summary.trials == [] and not result.interrupted
    assert lines == [
        "sweep study: 10 trials, minimize eval_loss",
        "the time budget (1e-06 s) is spent: no new trial starts",
        "sweep study done: 0 trials",
    ]
