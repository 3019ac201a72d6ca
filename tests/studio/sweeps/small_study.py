"""A real, small optuna study of a sweep, made without training: trials asked and told as the driver does, with
the user attributes it writes (run id, why pruned, why failed), and real run directories for some of them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import optuna
from optuna.trial import TrialState

from engine import runs
from engine.sweeps import SweepConfig, parse_sweep
from engine.sweeps.study import distributions, open_study
from engine.sweeps.summary import ERROR_ATTR, PRUNED_ATTR, RUN_ID_ATTR
from tests.engine.sweeps.sweep_files import demo_base

SPACE = {
    "train.learning_rate": {"low": 1e-4, "high": 1e-2, "log": True},
    "adapter.r": {"choices": [4, 8, 16]},
    "adapter.use_rslora": {"choices": [True, False]},
}
# (params, how it ends, objective): told in this order, so trial numbers are 0..4.
TRIALS: list[tuple[dict[str, Any], str, float | None]] = [
    ({"train.learning_rate": 0.003, "adapter.r": 16, "adapter.use_rslora": False}, "complete", 1.5),
    ({"train.learning_rate": 0.0002, "adapter.r": 4, "adapter.use_rslora": True}, "complete", 2.5),
    ({"train.learning_rate": 0.0001, "adapter.r": 8, "adapter.use_rslora": False}, "pruned", None),
    ({"train.learning_rate": 0.008, "adapter.r": 8, "adapter.use_rslora": True}, "fail", None),
    ({"train.learning_rate": 0.001, "adapter.r": 4, "adapter.use_rslora": False}, "running", None),
]
PRUNED_NOTE = "pruned at step 5: eval_loss 3 is worse than the median 2 of earlier trials at that step"


def small_sweep(name: str = "small", **changes: Any) -> SweepConfig:
    return parse_sweep({"name": name, "base": demo_base(), "space": SPACE, "trials": 6, **changes})


def make_study(workspace: Path, name: str = "small", with_runs: tuple[int, ...] = (0, 4)) -> optuna.Study:
    """The study with TRIALS told; the trials numbered in ``with_runs`` get a run directory (created, not started:
    the running one reads as queued)."""
    config = small_sweep(name)
    study = open_study(config, workspace)
    for number, (params, end, value) in enumerate(TRIALS):
        study.enqueue_trial(params)  # the values of the table, not what the sampler would draw
        trial = study.ask(distributions(config))
        assert trial.number == number and trial.params == params
        trial.set_user_attr(RUN_ID_ATTR, f"no-run-{number}")
        if number in with_runs:
            run_dir = runs.create_run(config.base.model_copy(update={"name": f"{name}-trial-{number}"}), workspace)
            trial.set_user_attr(RUN_ID_ATTR, run_dir.name)
        if end == "complete":
            study.tell(trial, value)
        elif end == "pruned":
            trial.set_user_attr(PRUNED_ATTR, PRUNED_NOTE)
            study.tell(trial, state=TrialState.PRUNED)
        elif end == "fail":
            trial.set_user_attr(ERROR_ATTR, "the run failed: out of memory\nTraceback ...")
            study.tell(trial, state=TrialState.FAIL)
    return study
