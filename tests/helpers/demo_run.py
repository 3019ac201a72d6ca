"""One tiny trained demo run for the evaluate and export tests, trained once per test session.

The demo preset, cut to 60 steps with a checkpoint every 30, trained through the real CLI
(``python -m engine train CFG --run-dir DIR``). The first module that asks trains it; later modules get a
copy in their own workspace, so each can write evaluations and exports without touching the others.
``tuned=True`` gives the whole preset (600 steps) instead, for tests that need a run that answers the task.
Under xdist the workers share one cache (beside their own base temps), so a run is trained once per session, not
once per worker that needs it.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from engine.store.paths import PROJECT_ROOT

DEMO_PRESET = PROJECT_ROOT / "assets" / "presets" / "demo.yaml"
MAX_STEPS, SAVE_STEPS = 60, 30
RUN_ID = "demo-run"


def demo_config() -> dict:
    """The demo preset at 60 steps, saving every 30 and evaluating at the end."""
    config = yaml.safe_load(DEMO_PRESET.read_text())
    # Batches of 8 keep the session quick on a shared CPU; one evaluation at the end gives the final eval loss.
    config["train"].update(max_steps=MAX_STEPS, save_steps=SAVE_STEPS, eval_steps=MAX_STEPS, per_device_batch_size=8)
    return config


def tuned_config() -> dict:
    """The whole demo preset, which learns the task (89-100% held-out exact match), evaluating and saving once."""
    config = yaml.safe_load(DEMO_PRESET.read_text())
    config["train"].update(eval_steps=config["train"]["max_steps"], save_steps=config["train"]["max_steps"])
    # One thread, whatever the machine's load: the engine otherwise follows the cores other programs leave free
    # (engine.training.cpu_share), sums in another order, and on a busy machine one such run stayed on its plateau
    # (7.5% held-out exact match after 600 steps, against 0.008 eval loss pinned).
    config["launch"] = {**config.get("launch", {}), "threads_per_process": 1}
    return config


def _train(run_dir: Path, config: dict) -> None:
    config_path = run_dir.parent.parent / "demo.yaml"
    config_path.parent.mkdir(parents=True, exist_ok=True)
    config_path.write_text(yaml.safe_dump(config))
    result = subprocess.run(
        [sys.executable, "-m", "engine", "train", str(config_path), "--run-dir", str(run_dir)],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        env=dict(os.environ, HF_HUB_OFFLINE="1"),
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]


def trained_demo_run(tmp_path_factory: pytest.TempPathFactory, workspace: Path, tuned: bool = False) -> Path:
    """A completed demo run at ``workspace/runs/demo-run`` (trained on first use in the session, then copied);
    ``tuned``: the whole preset instead of 60 steps."""
    cache = "tuned-run-cache" if tuned else "demo-run-cache"
    return cached_run(tmp_path_factory, workspace, cache, RUN_ID, tuned_config() if tuned else demo_config())


def cached_run(
    tmp_path_factory: pytest.TempPathFactory, workspace: Path, cache: str, run_id: str, config: dict
) -> Path:
    """A completed run of ``config`` at ``workspace/runs/<run_id>``: trained through the CLI on first use in the
    session (kept under ``cache`` in the session's temp folder, shared by its xdist workers), then copied."""
    root = session_temp(tmp_path_factory) / cache
    root.mkdir(parents=True, exist_ok=True)
    cached = root / "runs" / run_id
    # One worker trains while any other that needs the same run waits for it here, then copies it.
    with (root / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (cached / "adapter" / "adapter_model.safetensors").is_file():
            shutil.rmtree(cached, ignore_errors=True)
            _train(cached, config)
    run_dir = Path(workspace) / "runs" / run_id
    shutil.copytree(cached, run_dir)
    return run_dir


def session_temp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The session's temp folder: pytest's base temp, or under xdist the folder that holds every worker's."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
