"""Warm starts through a real standby: claimed by engine.runs.start, exactly one claimant wins, and an
unclaimed standby waits for quiet and leaves with its studio."""

from __future__ import annotations

import os
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
from engine.store.rundir import update_status

pytestmark = pytest.mark.integration


def wait_for(check, timeout: float, what: str):
    deadline = time.time() + timeout
    while not (value := check()):
        if time.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
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
