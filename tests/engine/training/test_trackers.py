"""Trackers (``train.report_to``): the config reads old and new spellings and refuses what would do nothing or
cannot run, naming the field; a real run through ``python -m engine train`` logs to trackio and TensorBoard at
once, and trackio's own API reads back the very losses of the run's metrics.jsonl."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from engine.config import ConfigError, RunConfig, parse_config
from engine.store.paths import PROJECT_ROOT
from engine.store.rundir import CHECKPOINTS_DIR, iter_metrics
from engine.training import trackers
from engine.training.trackers import tracker_problems, tracking_kwargs, trackio_dir, use_trackio_dir
from tests.helpers.demo_run import DEMO_PRESET
from tests.helpers.engine_cli import run_check, run_train

STEPS = 4
# Reads a trackio project back in a fresh process: trackio fixes its storage folder (TRACKIO_DIR) at import.
READ_BACK = """
import json, sys
import trackio
project, run = sys.argv[1:]
runs = [r.name for r in trackio.Api().runs(project)]
logs = trackio.SQLiteStorage.get_logs(project, run)
print(json.dumps({"runs": runs, "logs": logs}, default=str))
"""


def problems(train: dict[str, Any]) -> dict[str, str]:
    """The config's problems by field for a train section ({} when it is valid)."""
    try:
        parse_config({"train": train})
    except ConfigError as exc:
        return exc.by_field()
    return {}


# --- the config ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("written", "read"),
    [
        ("none", []),
        (["none"], []),
        ("wandb", ["wandb"]),  # a config from before trackers were a list
        (["trackio", "tensorboard", "trackio"], ["trackio", "tensorboard"]),
        ([], []),
    ],
)
def test_report_to_reads_a_name_none_or_a_list(written: Any, read: list[str]) -> None:
    assert parse_config({"train": {"report_to": written}}).train.report_to == read


def test_the_default_reports_to_no_tracker_and_round_trips_through_yaml() -> None:
    config = parse_config({"train": {"report_to": ["trackio"], "trackio_project": "dates", "trackio_space": "me/sp"}})
    assert RunConfig().train.report_to == []
    assert parse_config(yaml.safe_load(config.to_yaml())) == config


@pytest.mark.parametrize(
    ("train", "field", "message"),
    [
        (
            {"trackio_space": "me/board"},
            "train.trackio_space",
            "used only by trackio: add trackio to train.report_to, or leave this empty",
        ),
        (
            {"report_to": ["tensorboard"], "trackio_project": "dates"},
            "train.trackio_project",
            "used only by trackio: add trackio to train.report_to, or leave this empty",
        ),
        (
            {"report_to": ["none", "trackio"]},
            "train.report_to",
            "none means no tracker: leave it out when you pick trackers",
        ),
        ({"report_to": ["mlflow"]}, "train.report_to.0", "must be one of 'tensorboard', 'wandb' or 'trackio'"),
        (
            {"report_to": ["trackio"], "trackio_project": "my project"},
            "train.trackio_project",
            "use letters, digits, - and _ only (it names trackio's database file)",
        ),
        (
            {"report_to": ["trackio"], "trackio_space": "me/boards/one"},
            "train.trackio_space",
            "write the Space as user/name (letters, digits, -, _ and . in each part)",
        ),
    ],
)
def test_tracker_fields_are_refused_by_name(train: dict[str, Any], field: str, message: str) -> None:
    assert problems(train) == {field: message}


def test_blank_trackio_fields_mean_none() -> None:
    train = parse_config({"train": {"trackio_project": " ", "trackio_space": ""}}).train
    assert (train.trackio_project, train.trackio_space) == (None, None)


def test_a_tracker_this_machine_lacks_is_refused_before_launch(monkeypatch: pytest.MonkeyPatch) -> None:
    config = parse_config({"train": {"report_to": ["trackio", "wandb", "tensorboard"]}})
    monkeypatch.setattr(trackers, "installed", lambda module: module == "tensorboard")
    assert [(p.field, p.message) for p in tracker_problems(config)] == [
        ("train.report_to", "trackio and wandb are not installed here (pip install trackio wandb)")
    ]
    monkeypatch.setattr(trackers, "installed", lambda module: module != "trackio")
    assert [str(p) for p in tracker_problems(config)] == [
        "train.report_to: trackio is not installed here (pip install trackio)"
    ]


def test_a_project_name_trackio_reserves_is_refused_at_its_field() -> None:
    pytest.importorskip("trackio")
    refused = tracker_problems(parse_config({"train": {"report_to": ["trackio"], "trackio_project": "registry-x"}}))
    assert [p.field for p in refused] == ["train.trackio_project"] and "reserved" in refused[0].message
    assert tracker_problems(parse_config({"train": {"report_to": ["trackio"], "trackio_project": "dates"}})) == []


# --- the training arguments and trackio's folder ------------------------------------------------------------------


def test_trackio_is_named_after_the_workspace_and_the_run(tmp_path: Path) -> None:
    run_dir = tmp_path / "my.ws" / "runs" / "demo-1"
    config = parse_config({"train": {"report_to": ["trackio", "tensorboard"], "trackio_space": "me/board"}})
    assert tracking_kwargs(config, run_dir) == {
        "report_to": ["trackio", "tensorboard"],
        "run_name": "demo-1",
        "project": "myws",  # the characters trackio keeps in its file names
        "trackio_space_id": "me/board",
        "trackio_static_space_id": False,
    }
    assert trackio_dir(run_dir) == (tmp_path / "my.ws" / "trackio").resolve()
    named = parse_config({"train": {"report_to": ["trackio"], "trackio_project": "dates"}})
    assert tracking_kwargs(named, run_dir)["project"] == "dates"
    elsewhere = tmp_path / "loose-run"  # a run directory outside a workspace keeps trackio's files itself
    assert tracking_kwargs(config, elsewhere)["project"] == "loose-run"
    assert trackio_dir(elsewhere) == elsewhere.resolve() / "trackio"
    assert tracking_kwargs(RunConfig(), run_dir) == {"report_to": [], "run_name": "demo-1"}


def test_the_worker_points_trackio_at_the_workspace_unless_told_otherwise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir = tmp_path / "ws" / "runs" / "r"
    monkeypatch.delenv("TRACKIO_DIR", raising=False)
    use_trackio_dir(RunConfig(), run_dir)
    assert "TRACKIO_DIR" not in os.environ  # no trackio, no variable
    use_trackio_dir(parse_config({"train": {"report_to": ["trackio"]}}), run_dir)
    assert os.environ["TRACKIO_DIR"] == str((tmp_path / "ws" / "trackio").resolve())
    monkeypatch.setenv("TRACKIO_DIR", "/elsewhere")
    use_trackio_dir(parse_config({"train": {"report_to": ["trackio"]}}), run_dir)
    assert os.environ["TRACKIO_DIR"] == "/elsewhere"


# --- a real run ----------------------------------------------------------------------------------------------


def tracked_config(tmp_path: Path, **train: Any) -> Path:
    """The demo preset cut to a few logged steps, reporting to ``train``'s trackers."""
    config = yaml.safe_load(DEMO_PRESET.read_text())
    config["name"] = "tracked"
    config["train"].update(
        max_steps=STEPS, logging_steps=1, per_device_batch_size=4, eval_strategy="no", save_strategy="no", **train
    )
    path = tmp_path / "tracked.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


def read_trackio(trackio_folder: Path, project: str, run: str) -> dict[str, Any]:
    """The project's run names and one run's logged rows, as trackio's own API reads them."""
    result = subprocess.run(
        [sys.executable, "-c", READ_BACK, project, run],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, TRACKIO_DIR=str(trackio_folder), HF_HUB_OFFLINE="1"),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def tensorboard_scalars(run_dir: Path, tag: str) -> dict[int, float]:
    """step -> value of one scalar in the run's TensorBoard event files (transformers writes them under
    output_dir/runs/)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    (folder,) = (run_dir / CHECKPOINTS_DIR / "runs").iterdir()
    events = EventAccumulator(str(folder))
    events.Reload()
    return {event.step: event.value for event in events.Scalars(tag)}


@pytest.mark.integration
def test_a_run_logs_its_losses_to_trackio_and_tensorboard(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("trackio")
    pytest.importorskip("tensorboard")
    monkeypatch.delenv("TRACKIO_DIR", raising=False)  # the run's default: WORKSPACE/trackio
    run_dir = tmp_path / "ws" / "runs" / "tracked-1"
    result = run_train(tracked_config(tmp_path, report_to=["trackio", "tensorboard"]), run_dir)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]

    logged = [event for event in iter_metrics(run_dir) if event.get("event") == "train" and "loss" in event]
    assert [event["step"] for event in logged] == list(range(1, STEPS + 1))
    tracked = read_trackio(tmp_path / "ws" / "trackio", "ws", "tracked-1")
    assert tracked["runs"] == ["tracked-1"]  # the project is the workspace's, the run is named by its id
    rows = [row for row in tracked["logs"] if "train/loss" in row]
    for name in ("loss", "learning_rate", "grad_norm"):
        by_step = {row["train/global_step"]: row[f"train/{name}"] for row in rows}
        assert by_step == {event["step"]: event[name] for event in logged}, name
    board = tensorboard_scalars(run_dir, "train/loss")  # float32 on disk
    assert board == pytest.approx({event["step"]: event["loss"] for event in logged}, rel=1e-6)


@pytest.mark.integration
def test_check_refuses_a_project_name_trackio_reserves(tmp_path: Path) -> None:
    pytest.importorskip("trackio")
    result = run_check(tracked_config(tmp_path, report_to=["trackio"], trackio_project="registry-dates"), PROJECT_ROOT)
    assert result.returncode != 0
    assert "train.trackio_project: Project name 'registry-dates' is not allowed" in result.stderr


WRITERS_OPEN = """
import sys
from engine.training.trackers import writers_open
import trackio
from trl.trainer.utils import get_trackio_space_url
get_trackio_space_url()  # what TRL's model card does at every checkpoint
print(writers_open())
trackio.init(project="probe", name="probe-run")
print(writers_open())
trackio.finish()
"""


def test_only_an_opened_tracker_run_counts_as_a_writer_to_flush(tmp_path: Path) -> None:
    """A worker that merely loaded trackio (TRL's model card imports it) may still be kept and exit at once; one
    that started a trackio run must leave through the exit hooks."""
    result = subprocess.run(
        [sys.executable, "-c", WRITERS_OPEN],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, TRACKIO_DIR=str(tmp_path), PYTHONPATH=str(PROJECT_ROOT), HF_HUB_OFFLINE="1"),
    )
    assert result.returncode == 0, result.stderr[-2000:]
    answers = [line for line in result.stdout.splitlines() if line in ("False", "True")]  # trackio prints too
    assert answers == ["False", "True"], result.stdout
