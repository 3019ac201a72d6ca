"""Sweep files for the sweep tests: the demo preset cut to a few steps as the base, and the CLI in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import yaml

from engine.store.paths import PROJECT_ROOT

DEMO_PRESET = PROJECT_ROOT / "assets" / "presets" / "demo.yaml"
EVAL_STEPS = 5


def demo_base(max_steps: int = 10) -> dict[str, Any]:
    """The demo preset at ``max_steps`` steps, evaluating and saving every 5 (batches of 8: quick on a shared CPU;
    the 200 eval rows in 4 batches)."""
    config = yaml.safe_load(DEMO_PRESET.read_text())
    config["train"].update(
        max_steps=max_steps, eval_steps=EVAL_STEPS, save_steps=EVAL_STEPS, per_device_batch_size=8, logging_steps=1
    )
    return config


def write_sweep(folder: Path, sweep: dict[str, Any]) -> Path:
    """The sweep as a YAML file in ``folder``."""
    path = folder / f"{sweep['name']}.yaml"
    path.write_text(yaml.safe_dump(sweep, sort_keys=False))
    return path


def engine_env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(PROJECT_ROOT), HF_HUB_OFFLINE="1")


def engine_cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``python -m engine ARGS`` from the project root, its output captured as text."""
    return subprocess.run(
        [sys.executable, "-m", "engine", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=PROJECT_ROOT,
        env=engine_env(),
    )


def start_engine_cli(*args: str, log: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """``python -m engine ARGS`` in the background, in a session of its own, its output to ``log`` (``env``: the
    environment instead of engine_env())."""
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "engine", *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=PROJECT_ROOT,
            env=env or engine_env(),
            start_new_session=True,
        )


def metrics(run_dir: Path) -> list[dict[str, Any]]:
    """Every event of a run's metrics.jsonl."""
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]


def last_eval_loss(run_dir: Path) -> float:
    return [event["eval_loss"] for event in metrics(run_dir) if event.get("event") == "eval"][-1]


DEADLINE_S = 240.0  # a busy shared machine may take long to start a run; a condition, never a fixed sleep
T = TypeVar("T")


def wait_for(condition: Callable[[], T | None], what: str, timeout: float = DEADLINE_S) -> T:
    """``condition()`` once it is truthy, polled until ``timeout`` (AssertionError naming ``what`` then)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")
