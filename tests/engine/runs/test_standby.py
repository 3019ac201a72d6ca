"""Warm starts through a real standby: claimed by engine.runs.start, exactly one claimant wins, an unclaimed
standby waits for quiet (frozen if a run starts while it imports) and leaves with its studio, and a stopped
run's worker is kept for the run's resume."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine import runs
from engine.config import load_config
from engine.runs import standby
from engine.store.paths import PROJECT_ROOT
from engine.store.rundir import iter_metrics, update_status
from tests.engine.runs.test_runs_integration import small_config, train_losses
from tests.helpers.machine_load import load_factor

pytestmark = pytest.mark.integration


def wait_for(check, timeout: float, what: str):
    """Poll ``check`` until it is truthy; ``timeout`` (for an idle machine) stretches with the machine's load, since
    these waits say that something happens, not how fast."""
    began = time.time()
    while not (value := check()):
        if time.time() - began > timeout * load_factor():
            raise AssertionError(f"timed out waiting for {what} (load {os.getloadavg()[0]:.1f})")
        time.sleep(0.05)
    return value


def markers(workspace: Path) -> list[str]:
    folder = standby.standby_dir(workspace)
    return sorted(p.name.split(".", 1)[1] for p in folder.iterdir()) if folder.is_dir() else []


@pytest.fixture
def owner() -> Iterator[subprocess.Popen[bytes]]:
    """Stands in for the studio that owns a standby."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    yield process
    process.kill()
    process.wait()


def spawn_standby(workspace: Path, owner_pid: int) -> subprocess.Popen[bytes]:
    workspace.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(
        [sys.executable, "-m", "engine", "standby", str(workspace), "--owner", str(owner_pid)],
        cwd=PROJECT_ROOT,
        env=dict(os.environ, PYTHONPATH=str(PROJECT_ROOT)),
    )


def tiny_run(workspace: Path) -> Path:
    config = load_config(PROJECT_ROOT / "assets" / "presets" / "demo.yaml")
    data = config.model_dump()
    data["train"].update(max_steps=3, logging_steps=1, eval_strategy="no", save_strategy="no")
    data["data"]["max_samples"] = 64
    return runs.create_run(type(config).model_validate(data), workspace=workspace)


def test_a_ready_standby_trains_the_next_run(tmp_path: Path, owner: subprocess.Popen[bytes]) -> None:
    process = spawn_standby(tmp_path, owner.pid)
    wait_for(lambda: "ready" in markers(tmp_path), 120, "the standby to be ready")
    run_dir = tiny_run(tmp_path)
    pid = runs.start(run_dir)
    assert pid == process.pid  # the warm process took the run: no new supervisor was started
    final = runs.wait(run_dir, timeout=180)
    assert final.state == "completed" and final.step == 3, final
    assert final.supervisor_pid == process.pid
    log = (run_dir / "train.log").read_text()
    assert "warm) ===" in log and "train step 3/3" in log and "completed: 3 steps" in log
    assert (run_dir / "adapter" / "adapter_model.safetensors").is_file()
    assert process.wait(timeout=30) == 0
    # Its handshake files are gone; the standby that runs.start asked for is waiting for the next run.
    assert not [m for m in markers(tmp_path) if m in ("ready", "claimed", "claim.json")]


def test_exactly_one_claimant_wins(tmp_path: Path, owner: subprocess.Popen[bytes]) -> None:
    folder = standby.standby_dir(tmp_path)
    folder.mkdir(parents=True)
    (folder / f"{owner.pid}.ready").touch()  # a live process posing as a ready standby
    first = standby.claim(tmp_path, tmp_path / "run-a", None, 2)
    second = standby.claim(tmp_path, tmp_path / "run-b", None, 2)
    assert first == owner.pid and second is None
    request = (folder / f"{owner.pid}.claim.json").read_text()
    assert "run-a" in request and "run-b" not in request


def test_dead_standbys_are_forgotten(tmp_path: Path) -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    folder = standby.standby_dir(tmp_path)
    folder.mkdir(parents=True)
    (folder / f"{gone.pid}.ready").touch()
    assert standby.live_standbys(tmp_path) == []
    assert standby.claim(tmp_path, tmp_path / "run", None, 2) is None
    assert not list(folder.iterdir())


def test_standby_waits_while_a_run_is_active_and_leaves_with_its_owner(
    tmp_path: Path, owner: subprocess.Popen[bytes]
) -> None:
    busy = tiny_run(tmp_path)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "engine", "worker"])
    try:
        update_status(busy, state="running", pid=sleeper.pid, supervisor_pid=sleeper.pid, started_at=time.time())
        process = spawn_standby(tmp_path, owner.pid)
        wait_for(lambda: "pending" in markers(tmp_path), 20, "the standby to register")
        time.sleep(2.5)
        # Still pending, and no worker child: it imports nothing while a run has the CPU.
        assert markers(tmp_path) == ["pending"]
        children = Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text().split()
        assert children == []
        owner.kill()
        assert process.wait(timeout=15) == 0
        assert markers(tmp_path) == []
    finally:
        sleeper.kill()
        sleeper.wait()


def long_run(workspace: Path) -> Path:
    """A demo run far longer than any test waits for: it is stopped (and resumed) mid-way."""
    config = load_config(PROJECT_ROOT / "assets" / "presets" / "demo.yaml")
    data = config.model_dump()
    data["train"].update(max_steps=100_000, logging_steps=1, eval_strategy="no", save_strategy="no")
    data["data"]["max_samples"] = 64
    return runs.create_run(type(config).model_validate(data), workspace=workspace)


def train_steps(run_dir: Path) -> list[int]:
    return [event["step"] for event in iter_metrics(run_dir) if event.get("event") == "train"]


def worker_of(process: subprocess.Popen[bytes]) -> int:
    """The pid of a standby's worker (its only child), once it has one."""
    path = Path(f"/proc/{process.pid}/task/{process.pid}/children")
    return wait_for(lambda: [int(pid) for pid in path.read_text().split()], 60, "the standby's worker")[0]


def process_state(pid: int) -> str:
    """The state letter of /proc/PID/stat: R, S, T (stopped by a signal), Z ..."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


@pytest.fixture
def leave_nothing_running(tmp_path: Path) -> Iterator[None]:
    """End what the test started in its workspace: its runs (even after a failed assertion), and the next
    standby that runs.start asked for on behalf of this (pytest) process."""
    yield
    for run_dir in runs.run_dirs(tmp_path):
        runs.abort(run_dir)
    for pid in standby.live_standbys(tmp_path):
        os.kill(pid, signal.SIGKILL)  # its worker (frozen or not) dies with it


def stop_and_wait_kept(run_dir: Path, workspace: Path) -> int:
    """Stop the run; once it reads stopped and its worker is kept, returns the step it stopped at."""
    assert runs.stop(run_dir)
    wait_for(lambda: "kept" in markers(workspace), 120, "the stopped run's worker to be kept")
    stopped = runs.status(run_dir)
    assert stopped.state == "stopped" and stopped.step in stopped.checkpoints, stopped
    # The idle standby is no process of the run any more: nothing for Abort to kill, nothing for a start to wait on.
    assert stopped.supervisor_pid is None and stopped.pid is None and runs.run_processes(run_dir) == []
    return stopped.step


def test_a_resume_right_after_a_stop_is_claimed_by_the_kept_worker(
    tmp_path: Path, owner: subprocess.Popen[bytes], leave_nothing_running: None
) -> None:
    process = spawn_standby(tmp_path, owner.pid)
    wait_for(lambda: "ready" in markers(tmp_path), 120, "the standby to be ready")
    run_dir = long_run(tmp_path)
    assert runs.start(run_dir) == process.pid
    wait_for(lambda: len(train_steps(run_dir)) >= 2, 120, "the first steps")
    stopped_at = stop_and_wait_kept(run_dir, tmp_path)

    # Resumed at once, before the next fresh standby could have imported anything: the kept worker takes it.
    assert runs.resume(run_dir) == process.pid
    wait_for(lambda: runs.status(run_dir).supervisor_pid == process.pid, 30, "the standby to take the run")
    wait_for(lambda: max(train_steps(run_dir)) > stopped_at, 120, "a step after the resume")
    log = (run_dir / "train.log").read_text()
    assert log.count("warm) ===") == 2 and f"start (checkpoint {stopped_at}, warm) ===" in log

    # And again: the kept worker serves every resume of its run, and no step is logged twice.
    stopped_again = stop_and_wait_kept(run_dir, tmp_path)
    assert stopped_again > stopped_at
    steps = train_steps(run_dir)
    assert steps == sorted(set(steps)) and steps[-1] == stopped_again

    # Another run going takes the memory: the kept worker retires (the resume would then start cold).
    other = long_run(tmp_path)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "engine", "worker"])
    try:
        update_status(other, state="running", pid=sleeper.pid, supervisor_pid=sleeper.pid, started_at=time.time())
        assert process.wait(timeout=60) == 0
        assert not [m for m in markers(tmp_path) if m in ("kept", "claimed", "claim.json")]
        assert runs.status(run_dir).state == "stopped"
    finally:
        sleeper.kill()
        sleeper.wait()


def test_an_importing_standby_is_frozen_while_a_run_is_active(tmp_path: Path, owner: subprocess.Popen[bytes]) -> None:
    busy = tiny_run(tmp_path)
    process = spawn_standby(tmp_path, owner.pid)
    worker = worker_of(process)  # the workspace is quiet: it starts importing at once
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "engine", "worker"])
    try:
        update_status(busy, state="running", pid=sleeper.pid, supervisor_pid=sleeper.pid, started_at=time.time())
        wait_for(lambda: process_state(worker) == "T", 30, "the importing worker to be frozen")
        assert markers(tmp_path) == ["pending"]
        update_status(busy, state="stopped", pid=None, supervisor_pid=None)
        wait_for(lambda: "ready" in markers(tmp_path), 120, "the standby to finish importing once quiet")
    finally:
        sleeper.kill()
        sleeper.wait()
    owner.kill()
    assert process.wait(timeout=30) == 0


def test_a_kept_worker_resumes_with_the_losses_of_an_uninterrupted_run(
    tmp_path: Path, owner: subprocess.Popen[bytes], leave_nothing_running: None
) -> None:
    # The resume runs in the process that trained the first part: nothing of that part may leak into the rest.
    # Dropout and a schedule make the losses depend on the restored random state and optimizer.
    config = small_config(train={"max_steps": 40, "save_steps": 1000})
    process = spawn_standby(tmp_path, owner.pid)
    wait_for(lambda: "ready" in markers(tmp_path), 120, "the standby to be ready")
    run_dir = runs.create_run(config, workspace=tmp_path)
    assert runs.start(run_dir) == process.pid
    wait_for(lambda: len(train_steps(run_dir)) >= 2, 120, "the first steps")
    stopped_at = stop_and_wait_kept(run_dir, tmp_path)
    assert runs.resume(run_dir) == process.pid
    final = runs.wait(run_dir, timeout=300)
    assert final.state == "completed" and final.step == 40 and 0 < stopped_at < 40, final
    assert process.wait(timeout=60) == 0  # a completed run's worker is not kept

    config_path = tmp_path / "reference.yaml"
    config_path.write_text(config.to_yaml())
    reference = tmp_path / "reference"
    result = subprocess.run(
        [sys.executable, "-m", "engine", "train", str(config_path), "--run-dir", str(reference)],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ, PYTHONPATH=str(PROJECT_ROOT), HF_HUB_OFFLINE="1"),
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert train_losses(run_dir) == train_losses(reference)  # exactly, step by step
