"""A sweep's trials wait in the workspace's queue for their devices, on a faked 2-GPU machine (``STUDIO_DEVICES``:
the scheduling is real, the runs train on this machine's CPU): a trial on a free GPU trains beside another run,
one on that run's GPU waits in line and starts by itself once the GPU is free."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest

from engine import runs
from engine.config import parse_config
from engine.store.rundir import read_status
from engine.sweeps import sweep_status
from tests.engine.sweeps.sweep_files import demo_base, engine_env, start_engine_cli, wait_for, write_sweep

pytestmark = pytest.mark.integration


@pytest.fixture
def two_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STUDIO_DEVICES", "0,1")


def on_gpu(gpu: int, max_steps: int) -> dict[str, Any]:
    """The demo base at ``max_steps`` steps, on one GPU, without evaluation (a train_loss objective)."""
    base = demo_base(max_steps)
    base["train"].update(eval_strategy="no", save_steps=max_steps)
    base["data"].pop("eval_path", None)
    base["launch"] = {"devices": [gpu], "threads_per_process": 1}
    return base


def one_trial_sweep(name: str, gpu: int) -> dict[str, Any]:
    return {
        "name": name,
        "base": on_gpu(gpu, 5),
        "space": {"adapter.r": {"choices": [4]}},
        "objective": {"metric": "train_loss"},
        "trials": 1,
        "pruner": "none",
    }


def test_trials_wait_for_their_gpu_and_train_beside_runs_on_other_gpus(tmp_path: Path, two_gpus: None) -> None:
    workspace = tmp_path / "ws"
    holder = runs.create_run(parse_config({**on_gpu(0, 5000), "name": "holder"}), workspace=workspace)
    runs.start(holder)
    wait_for(lambda: read_status(holder).state == "running" or None, "the holder trains")
    assert read_status(holder).devices == [0]
    env = dict(engine_env(), STUDIO_DEVICES="0,1")

    free = start_engine_cli(
        "sweep", str(write_sweep(tmp_path, one_trial_sweep("free-gpu", 1))), "--workspace", str(workspace),
        log=tmp_path / "free.log", env=env,
    )  # fmt: skip
    busy = start_engine_cli(
        "sweep", str(write_sweep(tmp_path, one_trial_sweep("busy-gpu", 0))), "--workspace", str(workspace),
        log=tmp_path / "busy.log", env=env,
    )  # fmt: skip
    try:
        assert wait_for(lambda: free.poll() is not None or None, "the free GPU's sweep ends") and free.returncode == 0
        (trial,) = sweep_status(workspace, "free-gpu").trials
        assert trial.state == "complete"
        assert read_status(workspace / "runs" / trial.run_id).devices == [1]
        assert read_status(holder).state == "running"  # it trained beside the holder

        waiting = wait_for(lambda: sweep_status(workspace, "busy-gpu").trials or None, "the busy GPU's trial exists")
        run_dir = workspace / "runs" / waiting[0].run_id
        assert "waits in the queue for its devices" in wait_for(
            lambda: (tmp_path / "busy.log").read_text() if "waits" in (tmp_path / "busy.log").read_text() else None,
            "the trial says it waits",
        )
        assert read_status(run_dir).state == "queued" and read_status(holder).state == "running"

        runs.stop(holder)
        assert wait_for(lambda: busy.poll() is not None or None, "the busy GPU's sweep ends") and busy.returncode == 0
        (trial,) = sweep_status(workspace, "busy-gpu").trials
        assert trial.state == "complete"
        started, holder_end = read_status(run_dir), read_status(holder)
        assert holder_end.state == "stopped" and started.devices == [0]
        assert started.started_at is not None and holder_end.ended_at is not None
        assert started.started_at >= holder_end.ended_at - 1.0  # it started once the GPU was given back
    finally:
        for process in (free, busy):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
        runs.abort(holder)
