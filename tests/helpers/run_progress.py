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
