"""A run's elapsed time over its segments (start, then each resume): kept across resumes, not restarted."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine import runs
from engine.config import RunConfig
from engine.runs import queue as run_queue
from engine.store.rundir import STATUS_FILE, RunStatus, next_segment, read_status, update_status


def test_closing_a_segment_adds_its_length_once() -> None:
    stopped = RunStatus(state="stopped", started_at=1000.0, ended_at=1600.0, earlier_seconds=120.0)
    changes = next_segment(stopped)
    assert changes == {"earlier_seconds": 720.0, "started_at": None, "ended_at": None}
    assert next_segment(RunStatus(state="starting", **changes))["earlier_seconds"] == 720.0  # twice: counted once
    assert next_segment(RunStatus(state="queued"))["earlier_seconds"] is None  # never ran: nothing to carry


def test_total_and_segment_seconds() -> None:
    resumed = RunStatus(state="running", started_at=1000.0, earlier_seconds=600.0)
    assert (resumed.total_seconds(now=1130.0), resumed.segment_seconds(now=1130.0)) == (730.0, 130.0)
    ended = RunStatus(state="completed", started_at=1000.0, ended_at=1100.0, earlier_seconds=600.0)
    assert (ended.total_seconds(now=9999.0), ended.segment_seconds(now=9999.0)) == (700.0, 100.0)
    assert RunStatus(state="queued", earlier_seconds=600.0).total_seconds() == 600.0
    assert RunStatus(state="queued").total_seconds() is None


def test_requeueing_a_stopped_run_keeps_its_time(tmp_path: Path) -> None:
    run_dir = runs.create_run(RunConfig(name="segments"), workspace=tmp_path)
    update_status(run_dir, state="stopped", started_at=1000.0, ended_at=1300.0, earlier_seconds=50.0)
    run_queue.enqueue(run_dir, resume_checkpoint=2)
    queued = read_status(run_dir)
    assert (queued.state, queued.earlier_seconds, queued.started_at, queued.ended_at) == ("queued", 350.0, None, None)


def test_a_vanished_run_ended_when_it_was_last_heard_from(tmp_path: Path) -> None:
    """A crash noticed much later must not count the time nobody was training as elapsed time."""
    run_dir = runs.create_run(RunConfig(name="gone"), workspace=tmp_path)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    heard = time.time() - 3600
    stored = json.loads((run_dir / STATUS_FILE).read_text())
    stored.update(state="running", pid=gone.pid, supervisor_pid=gone.pid, started_at=heard - 60, updated_at=heard)
    (run_dir / STATUS_FILE).write_text(json.dumps(stored))
    status = runs.status(run_dir)
    assert status.state == "failed" and status.ended_at == heard
    assert status.segment_seconds() == pytest.approx(60.0)
