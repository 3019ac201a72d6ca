"""``python -m engine status / stop / metrics`` on existing runs, and the run-id resolver they share
(engine.runs.find_run): every name that is no run, a NUL byte included, is refused with a message."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from engine import runs
from engine.cli import main
from engine.config import save_config
from engine.runs import RunError, find_run
from engine.store.paths import PROJECT_ROOT
from engine.store.processes import engine_command, engine_env
from engine.store.rundir import iter_metrics, update_status
from tests.engine.runs.test_runs_integration import small_config
from tests.helpers.run_progress import wait_for_step


def engine(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        engine_command(*args), capture_output=True, text=True, timeout=300, cwd=PROJECT_ROOT, env=engine_env()
    )


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A workspace with one stopped run, ``first``."""
    run_dir = tmp_path / "ws" / "runs" / "first"
    run_dir.mkdir(parents=True)
    save_config(small_config(), run_dir / "config.yaml")
    update_status(run_dir, state="stopped", name="first", step=3, max_steps=8)
    return tmp_path / "ws"


@pytest.mark.parametrize(
    "name",
    ["a\x00b", "first\x00", "\x00", "a\x01b", "fi\nrst", "", ".", "..", "../ws/runs/first", "first/", "a" * 5000],
)
def test_find_run_refuses_a_name_that_is_no_run_id(workspace: Path, name: str):
    with pytest.raises(RunError, match="is not a run id|no run"):
        find_run(workspace, name)
    assert find_run(workspace, "first") == (workspace / "runs" / "first").resolve()


def test_find_run_refuses_a_link_out_of_the_runs_folder(workspace: Path, tmp_path: Path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "config.yaml").write_text((workspace / "runs" / "first" / "config.yaml").read_text())
    (workspace / "runs" / "linked").symlink_to(outside)
    with pytest.raises(RunError, match="no run 'linked'"):
        find_run(workspace, "linked")


@pytest.mark.parametrize("command", ["status", "stop", "metrics"])
@pytest.mark.parametrize("name", ["a\x00b", "first\x00", "a\x01b", "nope"])
def test_a_name_that_is_no_run_gives_a_message_not_a_traceback(workspace: Path, capsys, command: str, name: str):
    assert main([command, name, "--workspace", str(workspace)]) == 2
    out, err = capsys.readouterr()
    assert err == f"error: no run {json.dumps(name)}: neither a run id of {workspace / 'runs'} nor a run directory\n"
    assert out == ""


def test_status_of_a_run_by_id_or_directory_and_of_the_workspace(workspace: Path, capsys):
    assert main(["status", "first", "--workspace", str(workspace)]) == 0
    assert capsys.readouterr().out == "first: stopped, step 3/8\n"
    assert main(["status", str(workspace / "runs" / "first"), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert (shown["state"], shown["step"], shown["name"]) == ("stopped", 3, "first")
    assert main(["status", "--workspace", str(workspace)]) == 0
    assert capsys.readouterr().out == "first  stopped, step 3/8\n"
    assert main(["stop", "first", "--workspace", str(workspace)]) == 2
    assert "first is not running (it is stopped); nothing to stop" in capsys.readouterr().err


@pytest.mark.integration
def test_stop_and_metrics_of_a_running_run_through_the_cli(tmp_path: Path):
    workspace = tmp_path / "ws"
    run_dir = runs.create_run(small_config(train={"max_steps": 400, "save_steps": 1000}), workspace=workspace)
    runs.start(run_dir)
    wait_for_step(run_dir, 2, timeout=300)
    follow = subprocess.Popen(
        engine_command("metrics", run_dir.name, "--workspace", str(workspace), "--follow"),
        cwd=PROJECT_ROOT,
        env=engine_env(),
        stdout=subprocess.PIPE,
        text=True,
    )
    shown = engine("status", run_dir.name, "--workspace", str(workspace))
    assert shown.returncode == 0 and shown.stdout.startswith("integration: running, step "), shown.stdout

    stopped = engine("stop", run_dir.name, "--workspace", str(workspace))
    assert stopped.returncode == 0, stopped.stderr
    assert f"stopping {run_dir.name}: it saves a checkpoint after its current step" in stopped.stdout
    final = runs.wait(run_dir, timeout=300)
    assert final.state == "stopped" and final.checkpoints == [final.step]

    lines = follow.communicate(timeout=120)[0].splitlines()  # --follow ends once the run has
    assert follow.returncode == 0
    events = [json.loads(line) for line in lines]
    steps = [event["step"] for event in events if event["event"] == "train"]
    assert steps == list(range(1, final.step + 1)) and events == list(iter_metrics(run_dir))
