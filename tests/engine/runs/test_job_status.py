"""A job's status is reconciled against its process without losing what the process recorded last: a job that
ends between the reader's look at progress.json and its check of the process keeps its own final record."""

from __future__ import annotations

import itertools
import json
import subprocess
from pathlib import Path

import pytest

from engine.runs import jobs
from engine.store.rundir import RESERVE_FILE, reserve_space
from tests.helpers.live_processes import live_engine_process, processes_fixture  # noqa: F401 - a fixture


def test_a_job_that_records_its_end_while_being_read_keeps_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    job_dir = tmp_path / "job"
    job_dir.mkdir()
    (job_dir / jobs.JOB_FILE).write_text(json.dumps({"kind": "export", "pid": 4242}))
    (job_dir / jobs.PROGRESS_FILE).write_text(json.dumps({"state": "running", "phase": "exporting"}))
    final = {"state": "failed", "error": "the disk is full: no space left on device (ENOSPC)"}

    def ends_while_checked(pid: object) -> bool:
        """The process writes its final state and exits just as the reader checks whether it is alive."""
        (job_dir / jobs.PROGRESS_FILE).write_text(json.dumps(final))
        return False

    monkeypatch.setattr(jobs, "is_alive", ends_while_checked)
    current = jobs.status(job_dir)
    assert (current.state, current.error) == ("failed", final["error"])
    assert json.loads((job_dir / jobs.PROGRESS_FILE).read_text())["error"] == final["error"]


def test_a_job_gone_without_a_final_state_is_recorded_as_crashed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    job_dir = tmp_path / "job"
    job_dir.mkdir()
    (job_dir / jobs.JOB_FILE).write_text(json.dumps({"kind": "export", "pid": 4242}))
    (job_dir / jobs.PROGRESS_FILE).write_text(json.dumps({"state": "running"}))
    monkeypatch.setattr(jobs, "is_alive", lambda pid: False)
    current = jobs.status(job_dir)
    assert current.state == "failed" and current.error.startswith("the job's process ended without finishing")


def test_jobs_started_within_one_second_are_listed_newest_first(tmp_path: Path):
    # A command that ends at once (status takes no --job-dir: refused, exit 2): only the folders' order is asked.
    started = [jobs.start(tmp_path, "probe", ["status", "--workspace", str(tmp_path)]) for _ in range(6)]
    try:
        assert jobs.list_jobs(tmp_path, "probe") == started[::-1]
    finally:
        for job_dir in started:
            jobs.wait(job_dir, timeout=120)


def test_a_job_gives_its_reserved_space_back_once_its_end_is_recorded(tmp_path: Path):
    """The space a job sets aside for recording its end on a full disk (256 kB) goes back once that end is written:
    by the job itself, or by the reader that finds its process gone. Kept, every job ever run held it."""
    # status takes no --job-dir: the process exits before it records anything, and the reader records the end.
    crashed = jobs.start(tmp_path, "probe", ["status", "--workspace", str(tmp_path)])
    assert (crashed / RESERVE_FILE).is_file()
    assert jobs.wait(crashed, timeout=120).state == "failed" and not (crashed / RESERVE_FILE).exists()
    own = tmp_path / "own"
    own.mkdir()
    reserve_space(own)
    assert jobs.run_job(own, lambda progress: {"answer": 42}, ()) == 0
    assert jobs.status(own).result == {"answer": 42} and not (own / RESERVE_FILE).exists()


def test_wait_without_a_timeout_waits_for_the_end_and_with_one_says_the_job_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, processes: list[subprocess.Popen[bytes]]
):
    """As ``engine.runs.wait``: no default limit after which a job still running looks like an ended one."""
    job_dir = tmp_path / "job"
    job_dir.mkdir()
    (job_dir / jobs.PROGRESS_FILE).write_text(json.dumps({"state": "running"}))
    (job_dir / jobs.JOB_FILE).write_text(json.dumps({"kind": "export", "pid": live_engine_process(processes)}))
    assert jobs.wait(job_dir, timeout=0.3, poll=0.05).state == "running"

    ticks = itertools.count(step=1000)  # a clock that runs 1000 s a look: a limit of its own would pass at once

    def clock() -> float:
        now = next(ticks)
        if now >= 10_000:  # the job ends after a few hours of that clock
            (job_dir / jobs.PROGRESS_FILE).write_text(json.dumps({"state": "completed"}))
        return now

    monkeypatch.setattr(jobs.time, "time", clock)
    assert jobs.wait(job_dir, poll=0.01).state == "completed"
