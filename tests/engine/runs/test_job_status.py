"""A job's status is reconciled against its process without losing what the process recorded last: a job that
ends between the reader's look at progress.json and its check of the process keeps its own final record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.runs import jobs


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
