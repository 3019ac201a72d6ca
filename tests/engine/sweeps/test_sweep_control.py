"""The sweep driver in the background (engine.sweeps.control): a bad sweep refused before any process starts, the
sweep file kept self-contained, the driver's lock read from the kernel, and a real 2-trial sweep of the demo model
started, stopped mid-trial (its run saves a checkpoint) and continued to its end."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from engine import runs
from engine.config import ConfigError, load_config
from engine.store.processes import exit_code_of
from engine.store.rundir import read_status
from engine.sweeps import (
    SweepError,
    continue_sweep,
    driver_pid,
    driver_running,
    parse_sweep,
    start_sweep,
    stop_sweep,
    sweep_dir,
    sweep_status,
)
from engine.sweeps.control import (
    DRIVER_LOG,
    config_yaml,
    driver_log_tail,
    lock_holder,
    read_sweep_text,
    sweep_yaml,
)
from engine.sweeps.study import DRIVER_LOCK_FILE, SWEEP_FILE, sweep_record
from tests.engine.sweeps.sweep_files import DEMO_PRESET, demo_base, engine_cli, metrics, wait_for


def sweep_text(name: str, **changes: Any) -> str:
    sweep = {
        "name": name,
        "base": demo_base(max_steps=20),
        "space": {"train.learning_rate": {"choices": [3e-3, 2e-3]}},
        "trials": 2,
        "sampler": "random",
        "pruner": "none",
        **changes,
    }
    return "# kept as written\n" + yaml.safe_dump(sweep, sort_keys=False)


def trial_run(workspace: Path, name: str, number: int) -> Path | None:
    found = sorted((workspace / "runs").glob(f"*-{name}-trial-{number}"))
    return found[0] if found and (found[0] / "status.json").is_file() else None


def training(workspace: Path, name: str, number: int) -> Path | None:
    """The trial's run directory once it is running, past its first step."""
    run_dir = trial_run(workspace, name, number)
    current = read_status(run_dir) if run_dir else None
    return run_dir if current and current.state == "running" and (current.step or 0) >= 1 else None


# --- no training ----------------------------------------------------------------------------------------------


def test_a_bad_sweep_is_refused_naming_the_entry_before_anything_starts(tmp_path: Path) -> None:
    text = sweep_text("bad", space={"adapter.r": {"choices": [8, 0]}})
    with pytest.raises(ConfigError) as refused:
        start_sweep(tmp_path, text)
    assert [str(problem) for problem in refused.value.problems] == [
        'space."adapter.r": 0 is refused: adapter.r: must be >= 1'
    ]
    with pytest.raises(ConfigError, match=r"not valid YAML \(line 2"):
        start_sweep(tmp_path, "name: x\n  space: [")
    assert not (tmp_path / "sweeps").exists() and not driver_running(tmp_path, "bad")
    assert stop_sweep(tmp_path, "bad") is False


def test_a_base_given_as_a_path_is_written_inline() -> None:
    config, text = read_sweep_text(
        "name: inline\nbase: ../demo.yaml\nspace:\n  adapter.r: {choices: [4, 8]}\n", DEMO_PRESET.parent / "sweeps"
    )
    kept = yaml.safe_load(text)
    assert kept["base"]["train"]["learning_rate"] == 0.003 and kept["space"] == {"adapter.r": {"choices": [4, 8]}}
    assert "model" not in kept["base"]  # compact: only what differs from the defaults
    assert config.base == load_config(DEMO_PRESET)
    again = parse_sweep(yaml.safe_load(config_yaml(config)))
    assert sweep_record(again) == sweep_record(config)  # a SweepConfig written out reads back the same


def test_the_driver_lock_holder_is_read_from_the_kernel(tmp_path: Path) -> None:
    lock = tmp_path / DRIVER_LOCK_FILE
    lock.touch()
    assert lock_holder(lock) is None
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import fcntl,sys,time; f=open({str(lock)!r},'a'); fcntl.flock(f, fcntl.LOCK_EX); "
            "print('held', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        assert lock_holder(lock) == holder.pid
    finally:
        holder.kill()
        holder.wait()
    assert lock_holder(lock) is None


# --- a real sweep -----------------------------------------------------------------------------------------------


@pytest.mark.integration
def test_start_stop_mid_trial_and_continue_to_the_end(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    text = sweep_text("bg")
    launch = start_sweep(workspace, text)
    folder = sweep_dir(workspace, "bg")
    try:
        assert launch.folder == folder.resolve() and (folder / SWEEP_FILE).read_text() == text  # as written
        assert driver_pid(workspace, "bg") == launch.pid
        with pytest.raises(SweepError, match="already running"):
            start_sweep(workspace, text)
        run_dir = wait_for(lambda: training(workspace, "bg", 0), "trial 0 to train")
        assert driver_pid(workspace, "bg") == launch.pid  # now through the driver's own lock
        assert stop_sweep(workspace, "bg")
        wait_for(lambda: not driver_running(workspace, "bg"), "the driver to end")
    finally:
        if driver_running(workspace, "bg"):
            stop_sweep(workspace, "bg")
    wait_for(lambda: exit_code_of(launch.pid) is not None, "the exit code", 10)
    assert exit_code_of(launch.pid) == 130  # the CLI's code for "interrupted: the same command continues"
    stopped = runs.status(run_dir)
    assert stopped.state == "stopped" and stopped.checkpoints, stopped
    assert sweep_status(workspace, "bg").trials[0].state == "running"  # the trial waits for Continue
    assert "to continue: python -m engine sweep" in driver_log_tail(workspace, "bg")

    with pytest.raises(SweepError, match=r"different sweep named bg \(trials: 2 -> 3"):
        start_sweep(workspace, sweep_text("bg", trials=3))
    assert (folder / DRIVER_LOG).read_text().count("--- ") == 1  # refused before a driver started

    again = continue_sweep(workspace, "bg")
    wait_for(lambda: exit_code_of(again.pid) is not None, "the continued sweep to end")
    assert exit_code_of(again.pid) == 0, driver_log_tail(workspace, "bg", 40)
    summary = sweep_status(workspace, "bg")
    assert [trial.state for trial in summary.trials] == ["complete", "complete"] and summary.done == 2
    assert {trial.number: trial.run_id for trial in summary.trials}[0] == run_dir.name  # resumed, not replaced
    assert [e["step"] for e in metrics(run_dir) if e["event"] == "resume"] == [stopped.checkpoints[-1]]
    assert f"trial 0: picking up its run {run_dir.name} (stopped)" in (folder / DRIVER_LOG).read_text()
    assert not driver_running(workspace, "bg")


@pytest.mark.integration
def test_the_command_line_starts_a_sweep_in_the_background_and_stops_it(tmp_path: Path) -> None:
    """``sweep --detach`` starts the driver as the studio does (the sweep's folder alone on stdout); ``sweep-stop``
    stops it, its trial's run saving a checkpoint, and says so when no driver runs."""
    workspace, path = tmp_path / "ws", tmp_path / "cli-bg.yaml"
    path.write_text(sweep_text("cli-bg"))
    started = engine_cli("sweep", str(path), "--workspace", str(workspace), "--detach")
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        assert started.stdout == f"{sweep_dir(workspace, 'cli-bg').resolve()}\n" and driver_running(workspace, "cli-bg")
        again = engine_cli("sweep", str(path), "--workspace", str(workspace), "--detach")
        assert again.returncode == 2 and "the sweep cli-bg is already running" in again.stderr, again.stderr
        run_dir = wait_for(lambda: training(workspace, "cli-bg", 0), "trial 0 to train")
        stopped = engine_cli("sweep-stop", str(workspace), "cli-bg")
        assert stopped.returncode == 0 and "stopping the sweep cli-bg" in stopped.stdout, stopped.stderr
        wait_for(lambda: not driver_running(workspace, "cli-bg"), "the driver to end")
    finally:
        if driver_running(workspace, "cli-bg"):
            stop_sweep(workspace, "cli-bg")
    assert runs.status(run_dir).state == "stopped" and runs.status(run_dir).checkpoints
    nothing = engine_cli("sweep-stop", str(workspace), "cli-bg")
    assert nothing.returncode == 2 and "no driver runs the sweep cli-bg" in nothing.stderr, nothing.stderr


def test_one_key_sections_keep_their_braces_and_read_back() -> None:
    """``objective: {metric: train_loss}`` was written ``objective: metric: train_loss``, which no YAML reader
    takes; a space entry of one key is still one line of the space mapping."""
    data = {
        "name": "one-key",
        "base": {"train": {"max_steps": 5}},
        "space": {"train.learning_rate": {"low": 0.0001, "high": 0.01, "log": True}},
        "objective": {"metric": "train_loss"},
        "sampler": {"kind": "random"},
        "pruner": {"kind": "none"},
    }
    text = sweep_yaml(data)
    assert "objective: {metric: train_loss}\n" in text and "  train.learning_rate: {low: 0.0001" in text
    assert yaml.safe_load(text) == data
    assert parse_sweep(yaml.safe_load(text)).objective.metric == "train_loss"
