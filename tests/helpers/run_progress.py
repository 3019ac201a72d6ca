"""Waiting on a run's progress through its status, as the studio reads it."""

from __future__ import annotations

import time
from pathlib import Path

from engine import runs
from engine.store.rundir import RunStatus


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


def wait_for_state(run_dir: Path, state: str, timeout: float = 300) -> RunStatus:
    """The run's status once it reads ``state``; fail at once if the run ended otherwise, or after ``timeout``."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        current = runs.status(run_dir)
        if current.state == state:
            return current
        assert current.is_active, f"the run ended {current.state}, not {state}: {current}"
        time.sleep(0.05)
    raise AssertionError(f"run did not reach {state}: {runs.status(run_dir)}")


def stop_then_resume(run_dir: Path, max_steps: int, timeout: float = 300) -> None:
    """Start the created run, Pause it as it begins to train and Stop it there (a checkpoint before ``max_steps``,
    however busy or idle the machine: a Stop sent at a step seen from here could land after the last one), then
    Resume it to completion. The pause is sent once the status reads ``running``, written as training begins; the
    step in the status is written at most every so often, and a short run's steps can outrun it."""
    runs.start(run_dir)
    wait_for_state(run_dir, "running", timeout)
    assert runs.pause(run_dir)
    paused = wait_for_state(run_dir, "paused", timeout)
    assert paused.step < max_steps, paused
    assert runs.stop(run_dir)
    stopped = runs.wait(run_dir, timeout=timeout)
    assert stopped.state == "stopped", stopped
    assert stopped.checkpoints and stopped.checkpoints[-1] == stopped.step == paused.step
    runs.resume(run_dir)
    finished = runs.wait(run_dir, timeout=timeout)
    assert finished.state == "completed", finished
