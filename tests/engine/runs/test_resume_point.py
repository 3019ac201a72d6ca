"""Which checkpoint a resume continues from, and when a run cannot be resumed: one rule for the API and the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from engine.config import RunConfig
from engine.runs import RunError, create_run, resume_point
from engine.store.paths import PROJECT_ROOT
from engine.store.rundir import checkpoint_path, update_status


def _run_with_checkpoints(tmp_path: Path, *steps: int) -> Path:
    run_dir = create_run(RunConfig(name="r"), workspace=tmp_path)
    for step in steps:
        checkpoint_path(run_dir, step).mkdir(parents=True)
        (checkpoint_path(run_dir, step) / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    return run_dir


def test_the_newest_checkpoint_unless_one_is_named(tmp_path: Path) -> None:
    run_dir = _run_with_checkpoints(tmp_path, 2, 4)
    update_status(run_dir, state="stopped")
    assert resume_point(run_dir) == 4 and resume_point(run_dir, 2) == 2
    with pytest.raises(RunError, match="no checkpoint 3; the run has 2, 4"):
        resume_point(run_dir, 3)


@pytest.mark.parametrize(
    ("changes", "refusal"),
    [
        ({"state": "completed"}, "has completed; there is nothing to resume. Start a new run"),
        ({"state": "failed", "bad_loss_step": 5}, "loss went bad at step 5"),
    ],
)
def test_completed_and_bad_loss_runs_are_refused_by_the_cli_too(tmp_path: Path, changes: dict, refusal: str) -> None:
    run_dir = _run_with_checkpoints(tmp_path, 2)
    update_status(run_dir, **changes)
    with pytest.raises(RunError, match=refusal):
        resume_point(run_dir)
    cli = subprocess.run(
        [sys.executable, "-m", "engine", "resume", str(run_dir)], capture_output=True, text=True, cwd=PROJECT_ROOT
    )
    assert cli.returncode == 2 and refusal in cli.stderr


def test_a_folder_without_a_run_is_refused(tmp_path: Path) -> None:
    with pytest.raises(RunError, match="not a run directory"):
        resume_point(tmp_path)


def test_a_folder_with_only_a_config_is_not_a_run_for_the_cli(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("name: mine\n")  # a config kept in a folder, never run
    cli = subprocess.run(
        [sys.executable, "-m", "engine", "resume", str(tmp_path)], capture_output=True, text=True, cwd=PROJECT_ROOT
    )
    assert cli.returncode == 2 and "is not a run directory" in cli.stderr and "Traceback" not in cli.stderr


def test_a_run_that_never_started_is_not_resumed(tmp_path: Path) -> None:
    run_dir = _run_with_checkpoints(tmp_path, 2)  # queued, as create_run leaves it
    with pytest.raises(RunError, match="the run is queued; only a stopped, failed or aborted run can be resumed"):
        resume_point(run_dir)
    update_status(run_dir, state="aborted")
    assert resume_point(run_dir) == 2
