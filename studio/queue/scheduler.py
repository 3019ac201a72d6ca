"""The studio's side of the run queue (engine.runs.queue), in every mode: a background thread that starts queued
runs as their devices free up, and Resume's way back into the line (its words: studio.queue.words).

A run waits in line when its devices are busy (on a CPU machine: while another run trains); this thread makes it
start about a second after they free up, without anyone watching the page. In demo mode it also ends runs past
their time limit, and (every JOBS_SECONDS) the evaluations, benchmarks and exports past theirs.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine.api import jobs, run_queue, runs, workspace_of
from studio.queue.words import queue_message

log = logging.getLogger(__name__)
SCHEDULER_SECONDS = 1.0
JOBS_SECONDS = 10.0  # a job's time limit is minutes: its job.json files need not be read every second


def resume_in_line(run_dir: Path, launcher: run_queue.Launcher | None = None) -> str:
    """Put a stopped, failed or aborted run back in line to continue from its newest checkpoint, and start it at
    once when its devices are free; returns the message. RunError when it cannot be resumed (engine.runs)."""
    run_dir = Path(run_dir)
    checkpoint = runs.resume_point(run_dir)
    workspace = workspace_of(run_dir)
    with runs.start_lock(workspace):
        run_queue.enqueue(run_dir, resume_checkpoint=checkpoint)
    run_queue.start_next_queued(workspace, launcher)
    return queue_message(run_dir)


class Scheduler:
    """A daemon thread that, every ``interval`` seconds, stops runs past their time limit and starts every queued
    run whose devices are free."""

    def __init__(self, workspace: Path, interval: float = SCHEDULER_SECONDS, launcher: Any = None):
        self.workspace, self.interval, self.launcher = Path(workspace), interval, launcher
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True, name="run-queue")
        self._jobs_checked = -JOBS_SECONDS  # monotonic time of the last look at the jobs: the first round looks

    def tick(self) -> list[Path]:
        """One round: enforce the time limits (the jobs' every JOBS_SECONDS), then start the queued runs whose
        devices are free (returned)."""
        run_queue.enforce_time_limits(self.workspace)
        if time.monotonic() - self._jobs_checked >= JOBS_SECONDS:
            self._jobs_checked = time.monotonic()
            jobs.enforce_time_limits(self.workspace)
        return run_queue.start_next_queued(self.workspace, self.launcher)

    def _loop(self) -> None:
        while not self.stopped.wait(self.interval):
            try:
                self.tick()
            except Exception:  # noqa: BLE001 - a bad run directory must not stop the queue for everyone
                log.exception("run queue: a scheduling round failed")


_schedulers: dict[Path, Scheduler] = {}
_schedulers_lock = threading.Lock()


def ensure_scheduler(workspace: Path, factory: Callable[[Path], Scheduler] = Scheduler) -> Scheduler:
    """The workspace's scheduler, started on first use (one per workspace per studio process)."""
    key = Path(workspace).resolve()
    with _schedulers_lock:
        if key not in _schedulers:
            _schedulers[key] = factory(key)
            _schedulers[key].thread.start()
        return _schedulers[key]
