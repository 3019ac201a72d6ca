"""engine.runs.queue on real run directories, on a CPU machine (every run needs the CPU): queue order, place in
line, the scheduler starting the oldest queued run only when the workspace is idle, cancelling, queued resumes
and time limits. test_devices.py has the scheduler on (fake) GPUs.

The launcher stand-in marks the run running under a live process whose command line names the engine (as a
real run's does), so engine.runs.status reconciles it as active without training anything.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from engine import runs
from engine.config import parse_config
from engine.runs import control
from engine.runs import queue as run_queue
from engine.store.processes import is_alive
from engine.store.rundir import read_status, update_status
from tests.helpers.live_processes import live_engine_process, processes_fixture  # noqa: F401 - the fixture


@pytest.fixture(autouse=True)
def cpu_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests are about the CPU machine's queue, on any machine."""
    monkeypatch.setenv("STUDIO_DEVICES", "cpu")


def new_run(workspace: Path, name: str, created_at: float) -> Path:
    config = parse_config({"name": name, "train": {"max_steps": 3}})
    run_dir = runs.create_run(config, workspace=workspace)
    update_status(run_dir, created_at=created_at)
    return run_dir


def launcher(calls: list[tuple[str, int | None]], processes: list[subprocess.Popen[bytes]]) -> Any:
    """Stands in for engine.runs.start: records the call and makes the run active."""

    def launch(run_dir: Path, checkpoint: int | None) -> int:
        calls.append((run_dir.name, checkpoint))
        pid = live_engine_process(processes)
        update_status(run_dir, state="running", pid=pid, supervisor_pid=pid, started_at=time.time())
        return pid

    return launch


def test_queue_order_and_place_in_line(tmp_path: Path, processes: list[Any]) -> None:
    second = new_run(tmp_path, "second", 200.0)
    first = new_run(tmp_path, "first", 100.0)
    third = new_run(tmp_path, "third", 300.0)
    assert run_queue.queued_runs(tmp_path) == [first, second, third]
    assert [run_queue.runs_ahead(run) for run in (first, second, third)] == [0, 1, 2]
    busy = new_run(tmp_path, "busy", 50.0)
    pid = live_engine_process(processes)
    update_status(busy, state="running", pid=pid, supervisor_pid=pid)
    # The running run goes first too: each queued run has one more run ahead of it.
    assert [run_queue.runs_ahead(run) for run in (first, second, third)] == [1, 2, 3]
    assert run_queue.runs_ahead(busy) is None  # not queued


def test_start_next_queued_starts_the_oldest_only_when_idle(tmp_path: Path, processes: list[Any]) -> None:
    calls: list[tuple[str, int | None]] = []
    start = launcher(calls, processes)
    assert run_queue.start_next_queued(tmp_path, start) == []  # nothing queued
    newer = new_run(tmp_path, "newer", 200.0)
    older = new_run(tmp_path, "older", 100.0)
    before = time.time()
    assert run_queue.start_next_queued(tmp_path, start) == [older]
    assert calls == [(older.name, None)]
    assert runs.status(older).state == "running" and read_status(older).launched_at >= before
    # The older run is active now: the newer one waits, however often the scheduler asks.
    assert run_queue.start_next_queued(tmp_path, start) == []
    assert run_queue.start_next_queued(tmp_path, start) == []
    assert calls == [(older.name, None)] and read_status(newer).state == "queued"
    update_status(older, state="completed", pid=None, supervisor_pid=None)
    assert run_queue.start_next_queued(tmp_path, start) == [newer]
    assert calls == [(older.name, None), (newer.name, None)]


def test_a_run_that_cannot_start_fails_with_the_reason(tmp_path: Path) -> None:
    run_dir = new_run(tmp_path, "broken", 100.0)

    def refuse(_run_dir: Path, _checkpoint: int | None) -> int:
        raise runs.RunError("no such model")

    assert run_queue.start_next_queued(tmp_path, refuse) == []
    status = runs.status(run_dir)
    assert status.state == "failed" and status.error == "could not start: no such model"
    assert run_queue.queued_runs(tmp_path) == []


def test_a_run_a_script_starts_while_the_queue_plans_is_left_to_the_script(
    tmp_path: Path, processes: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A script may start a queued run itself (engine.runs.start, outside the queue's lock) between the queue's
    reading the line and its launch: the queue leaves the run alone instead of failing it with 'already running'."""
    run_dir = new_run(tmp_path, "raced", 100.0)
    script_pid = live_engine_process(processes)
    planned = run_queue.schedule

    def plan_then_the_script_starts(workspace: Path, gpus: tuple[int, ...], last: Path | None = None) -> Any:
        turns = planned(workspace, gpus, last)
        update_status(run_dir, state="running", pid=script_pid, supervisor_pid=script_pid, started_at=time.time())
        return turns

    monkeypatch.setattr(run_queue, "schedule", plan_then_the_script_starts)
    calls: list[tuple[str, int | None]] = []
    assert run_queue.start_next_queued(tmp_path, launcher(calls, processes)) == []
    assert calls == []
    status = runs.status(run_dir)
    assert (status.state, status.supervisor_pid, status.error) == ("running", script_pid, None)


def test_a_start_that_read_the_run_as_idle_before_another_claimed_it_starts_nothing(
    tmp_path: Path, processes: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two starts at once: both read the run as idle; the one that writes 'starting' second is told it runs."""
    run_dir = new_run(tmp_path, "raced", 100.0)
    idle = runs.status(run_dir)
    first_pid = live_engine_process(processes)
    update_status(run_dir, state="starting", supervisor_pid=first_pid)  # the first start's claim
    monkeypatch.setattr(control, "status", lambda _run_dir: idle)  # what the second start read before it
    with pytest.raises(runs.RunAlreadyRunning):
        runs.start(run_dir)
    stored = read_status(run_dir)
    assert (stored.state, stored.supervisor_pid, stored.error) == ("starting", first_pid, None)


def test_cancel_takes_a_queued_run_out_of_the_line(tmp_path: Path) -> None:
    first = new_run(tmp_path, "first", 100.0)
    second = new_run(tmp_path, "second", 200.0)
    assert run_queue.cancel_queued(first) is True
    status = runs.status(first)
    assert status.state == "stopped" and status.cancelled is True and status.ended_at
    assert not status.is_active and runs.wait(first, timeout=1).state == "stopped"
    assert run_queue.queued_runs(tmp_path) == [second] and run_queue.runs_ahead(second) == 0
    assert run_queue.cancel_queued(first) is False  # not queued any more


def test_a_queued_resume_starts_from_its_checkpoint(tmp_path: Path, processes: list[Any]) -> None:
    run_dir = new_run(tmp_path, "resumed", 100.0)
    update_status(run_dir, state="stopped", ended_at=time.time())
    run_queue.enqueue(run_dir, resume_checkpoint=20)
    assert read_status(run_dir).state == "queued" and read_status(run_dir).ended_at is None
    with pytest.raises(runs.RunError, match="already queued"):
        run_queue.enqueue(run_dir)
    calls: list[tuple[str, int | None]] = []
    assert run_queue.start_next_queued(tmp_path, launcher(calls, processes)) == [run_dir]
    assert calls == [(run_dir.name, 20)]


def test_time_limits(tmp_path: Path, processes: list[Any]) -> None:
    run_dir = new_run(tmp_path, "long", 100.0)
    pid = live_engine_process(processes)
    now = time.time()
    update_status(run_dir, state="running", pid=pid, supervisor_pid=pid, launched_at=now - 30, time_limit_s=60)
    assert run_queue.over_time(read_status(run_dir), now) is None
    assert run_queue.enforce_time_limits(tmp_path, now) == []
    assert run_queue.over_time(read_status(run_dir), now + 40) == pytest.approx(10)
    # Past the limit: the run is asked to stop (SIGTERM, which ends this stand-in process).
    assert run_queue.enforce_time_limits(tmp_path, now + 40) == [run_dir]
    assert processes[0].wait(timeout=10) != 0
    update_status(run_dir, state="stopped", ended_at=now + 41)
    assert run_queue.limit_reached(read_status(run_dir)) is True
    update_status(run_dir, ended_at=now + 10)
    assert run_queue.limit_reached(read_status(run_dir)) is False  # stopped by hand before the limit


def test_a_run_still_going_long_after_its_limit_is_killed_with_the_reason(tmp_path: Path, processes: list[Any]) -> None:
    run_dir = new_run(tmp_path, "stuck", 100.0)
    pid = live_engine_process(processes)
    now = time.time()
    update_status(run_dir, state="stopping", pid=pid, supervisor_pid=pid, launched_at=now - 200, time_limit_s=60)
    assert run_queue.enforce_time_limits(tmp_path, now) == [run_dir]
    status = runs.status(run_dir)
    # Ended by the studio, not crashed: aborted, with the limit as the reason, and said so in the Monitor.
    assert status.state == "aborted" and status.error == "the run reached its time limit (1 min) and was ended"
    assert run_queue.limit_reached(status) is True
    assert not is_alive(pid)
