"""Waiting on a run's progress through its status, as the studio reads it."""

from __future__ import annotations

import time
from pathlib import Path

from engine import runs


def wait_for_step(run_dir: Path, step: int, timeout: float = 120) -> None:
    """Return once the run is running at ``step`` or later; fail at once if it failed, or after ``timeout``."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        current = runs.status(run_dir)
        assert current.state != "failed", current
        if (current.step or 0) >= step and current.state == "running":
            return
        time.sleep(0.05)
    raise AssertionError(f"run did not reach step {step}")


def stop_then_resume(run_dir: Path, max_steps: int, stop_at: int = 3, timeout: float = 300) -> None:
    """Start the created run, Stop it once it reaches ``stop_at`` (it must stop with a checkpoint before
    ``max_steps``), then Resume it to completion."""
    runs.start(run_dir)
    deadline = time.time() + timeout
    while (runs.status(run_dir).step or 0) < stop_at and runs.status(run_dir).is_active and time.time() < deadline:
        time.sleep(0.05)
    assert runs.stop(run_dir)
    stopped = runs.wait(run_dir, timeout=timeout)
    assert stopped.state == "stopped", stopped
    assert stopped.checkpoints and stopped.checkpoints[-1] == stopped.step < max_steps
    runs.resume(run_dir)
    finished = runs.wait(run_dir, timeout=timeout)
    assert finished.state == "completed", finished
