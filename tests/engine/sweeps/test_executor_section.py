"""The sweep file's ``executor``: local by default, a name alone or a section, Ray's knobs only with kind ray, each
refusal naming its key; ray missing is said at load; the study does not keep the executor, so a sweep begun with
one executor continues with another."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from engine.config import ConfigError
from engine.sweeps import parse_sweep
from engine.sweeps.study import open_study
from tests.engine.sweeps.sweep_files import demo_base

RAY = {"kind": "ray", "address": "10.0.0.1:6379", "gpus_per_trial": 0, "cpus_per_trial": 1}


def sweep(**extra: Any) -> dict[str, Any]:
    return {"name": "s", "base": demo_base(), "space": {"train.learning_rate": {"choices": [1e-3, 2e-3]}}, **extra}


def problems_of(data: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(ConfigError) as caught:
        parse_sweep(data)
    return caught.value.by_field()


@pytest.fixture
def ray_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The checks below do not need ray itself, only that it would import."""
    found = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object() if name == "ray" else found(name, *a))


def test_local_by_default_and_a_name_alone() -> None:
    assert parse_sweep(sweep()).executor.kind == "local"
    assert parse_sweep(sweep(executor="local")).executor.kind == "local"


def test_a_ray_section_reads_its_knobs(ray_installed: None) -> None:
    executor = parse_sweep(sweep(executor={**RAY, "max_concurrent_trials": 2})).executor
    assert (executor.kind, executor.address, executor.gpus_per_trial, executor.cpus_per_trial) == (
        "ray",
        "10.0.0.1:6379",
        0,
        1,
    )
    assert executor.max_concurrent_trials == 2
    assert parse_sweep(sweep(executor="ray")).executor.address == "auto"


@pytest.mark.parametrize(
    ("executor", "field", "message"),
    [
        ({"kind": "slurm"}, "executor.kind", "must be one of 'local' or 'ray'"),
        ({**RAY, "max_concurrent_trials": 0}, "executor.max_concurrent_trials", ">= 1"),
        ({**RAY, "gpus_per_trial": -1}, "executor.gpus_per_trial", ">= 0"),
        ({**RAY, "cpus_per_trial": 2000}, "executor.cpus_per_trial", "<= 1024"),
        ({**RAY, "address": "has space"}, "executor.address", "one word without spaces"),
        ({**RAY, "nodes": 2}, "executor.nodes", "unknown key"),
        ({**RAY, "cpus_per_trial": 0}, "executor", "a trial must hold some GPUs or CPUs"),
        ({"kind": "local", "address": "10.0.0.1:6379"}, "executor", "address: only for kind ray"),
    ],
)
def test_refusals_name_the_key(ray_installed: None, executor: dict[str, Any], field: str, message: str) -> None:
    problems = problems_of(sweep(executor=executor))
    assert field in problems, problems
    assert message in problems[field]


def test_a_trial_holds_a_gpu_for_each_of_its_processes(ray_installed: None) -> None:
    base = demo_base()
    base["launch"] = {**base.get("launch", {}), "num_processes": 2}
    problems = problems_of({**sweep(executor={**RAY, "gpus_per_trial": 1}), "base": base})
    assert "fewer than the base's launch.num_processes (2)" in problems["executor.gpus_per_trial"]


def test_ray_missing_is_said_at_load(monkeypatch: pytest.MonkeyPatch) -> None:
    found = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "ray" else found(name, *a))
    problems = problems_of(sweep(executor=RAY))
    assert "needs the ray package, which is not installed" in problems["executor"]


def test_the_study_does_not_keep_the_executor(ray_installed: None, tmp_path: Path) -> None:
    open_study(parse_sweep(sweep()), tmp_path)
    study = open_study(parse_sweep(sweep(executor=RAY)), tmp_path)  # no "holds a different sweep"
    assert "executor" not in study.user_attrs["sweep"]
