"""``python -m engine status``, the run controls (stop, pause, continue, save, abort), ``metrics``, ``wait`` and
``delete`` on existing runs, and the run-id resolver they share (engine.runs.find_run): every name that is no run,
a NUL byte included, is refused with a message."""

from __future__ import annotations

import json
import signal
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
from tests.engine.runs.fault_checks import wait_until
from tests.engine.runs.test_runs_integration import small_config
from tests.helpers.engine_cli import ctrl_c_as_in_a_terminal
from tests.helpers.live_processes import processes_fixture, running_stand_in  # noqa: F401 - a fixture
from tests.helpers.run_progress import wait_for_state, wait_for_step


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


@pytest.mark.parametrize(
    "command", ["status", "stop", "pause", "continue", "save", "abort", "metrics", "wait", "delete"]
)
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


def test_ctrl_c_ends_following_the_metrics_quietly(workspace: Path, processes: list[subprocess.Popen[bytes]]):
    run_dir = workspace / "runs" / "first"
    running_stand_in(processes)(run_dir)  # a live run that writes nothing more: --follow would never end
    (run_dir / "metrics.jsonl").write_text(json.dumps({"event": "train", "step": 1, "loss": 2.5}) + "\n")
    follow = subprocess.Popen(
        engine_command("metrics", "first", "--workspace", str(workspace), "--follow"),
        cwd=PROJECT_ROOT,
        env=engine_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=ctrl_c_as_in_a_terminal,
    )
    assert follow.stdout and json.loads(follow.stdout.readline())["loss"] == 2.5
    follow.send_signal(signal.SIGINT)
    out, err = follow.communicate(timeout=60)
    assert (follow.returncode, out, err) == (130, "", "")  # the end of the following: no traceback
    assert runs.status(run_dir).state == "running"


@pytest.mark.parametrize(
    ("command", "wanted"), [("pause", "running"), ("continue", "paused"), ("save", "running"), ("abort", "running")]
)
def test_a_control_that_does_not_apply_names_the_state(workspace: Path, capsys, command: str, wanted: str):
    assert main([command, "first", "--workspace", str(workspace)]) == 2
    out, err = capsys.readouterr()
    assert (out, err) == ("", f"error: first is not {wanted} (it is stopped); nothing to {command}\n")
    assert runs.status(workspace / "runs" / "first").state == "stopped"


def test_delete_removes_an_ended_or_queued_run_and_refuses_a_running_one(
    workspace: Path, capsys, processes: list[subprocess.Popen[bytes]]
):
    going = runs.create_run(small_config(), workspace=workspace)
    running_stand_in(processes)(going)
    assert main(["delete", going.name, "--workspace", str(workspace)]) == 2
    assert "integration is running; stop it before deleting it" in capsys.readouterr().err  # its name
    assert going.is_dir()

    first = workspace / "runs" / "first"
    (first / "checkpoints" / "checkpoint-3").mkdir(parents=True)
    assert main(["delete", "first", "--workspace", str(workspace)]) == 0
    assert capsys.readouterr().out == "deleted first\n"
    assert not first.exists() and going.is_dir()
    assert main(["delete", "first", "--workspace", str(workspace)]) == 2  # gone: no run of that name
    queued = runs.create_run(small_config(), workspace=workspace)  # waiting in line: it may go (start_lock)
    assert main(["delete", queued.name, "--workspace", str(workspace)]) == 0 and not queued.exists()


def test_stop_takes_a_queued_run_out_of_the_line(tmp_path: Path, capsys):
    workspace = tmp_path / "ws"
    run_dir = runs.create_run(small_config(), workspace=workspace)  # created queued: a studio would start it
    assert runs.status(run_dir).state == "queued"
    assert main(["stop", run_dir.name, "--workspace", str(workspace)]) == 0
    assert capsys.readouterr().out == f"took {run_dir.name} out of the line; it never started\n"
    cancelled = runs.status(run_dir)
    assert (cancelled.state, cancelled.cancelled, cancelled.step) == ("stopped", True, None)
    assert main(["stop", run_dir.name, "--workspace", str(workspace)]) == 2  # nothing left to stop


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


@pytest.mark.integration
def test_pause_save_continue_and_abort_a_running_run_through_the_cli(tmp_path: Path):
    """The Monitor's other controls, from a script: each acts on a real run and says what it did; ``wait`` then
    gives the aborted run's exit code."""
    workspace = tmp_path / "ws"
    run_dir = runs.create_and_start(small_config(train={"max_steps": 400, "save_steps": 1000}), workspace=workspace)

    def control(command: str) -> subprocess.CompletedProcess[str]:
        return engine(command, run_dir.name, "--workspace", str(workspace))

    wait_for_state(run_dir, "running", timeout=300)
    paused = control("pause")
    assert paused.returncode == 0 and f"pausing {run_dir.name} after its current step" in paused.stdout
    wait_for_state(run_dir, "paused")
    assert control("continue").returncode == 0  # asked while paused: it goes on...
    wait_for_state(run_dir, "running")
    refused = control("continue")  # ...and a running run has nothing to continue
    assert refused.returncode == 2 and f"{run_dir.name} is not paused (it is running)" in refused.stderr

    assert control("pause").returncode == 0
    at = wait_for_state(run_dir, "paused").step
    saved = control("save")  # a paused run saves at once and stays paused
    assert saved.returncode == 0 and f"{run_dir.name} saves a checkpoint" in saved.stdout
    wait_until(lambda: at in runs.status(run_dir).checkpoints, 120, f"the checkpoint of step {at}")
    assert runs.status(run_dir).state == "paused" and runs.status(run_dir).step == at

    aborted = control("abort")
    assert aborted.returncode == 0 and f"aborted {run_dir.name}" in aborted.stdout
    final = runs.status(run_dir)
    assert (final.state, final.error, final.checkpoints) == ("aborted", "aborted by the user", [at])
    assert engine("wait", run_dir.name, "--workspace", str(workspace)).returncode == 4
    again = control("abort")
    assert again.returncode == 2 and f"{run_dir.name} is not running (it is aborted)" in again.stderr
