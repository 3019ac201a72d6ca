"""A job's status is reconciled against its process without losing what the process recorded last: a job that
ends between the reader's look at progress.json and its check of the process keeps its own final record."""

from __future__ import annotations

import itertools
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.runs import jobs
from engine.store.rundir import RESERVE_FILE, reserve_space
from engine.store.workspace import jobs_dir
from tests.engine.runs.fault_checks import wait_until
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


# A job's body that runs until stopped: engine.runs.jobs.run_job with its real signal handling.
SLEEPING_JOB = "import sys, time; from pathlib import Path; from engine.runs import jobs; "
SLEEPING_JOB += "sys.exit(jobs.run_job(Path(sys.argv[1]), lambda progress: time.sleep(300), ()))"
# One that ignores SIGTERM (a library that swallows it); "engine" in its command line, as a job's has.
DEAF_JOB = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)"


def limited_job(workspace: Path, code: str, processes: list[subprocess.Popen[bytes]], limit: float) -> Path:
    """A job directory of ``workspace`` whose process runs ``code`` in a session of its own, limited to ``limit``
    seconds, as engine.runs.jobs.start records one."""
    job_dir = jobs_dir(workspace) / "job-with-a-limit"
    job_dir.mkdir(parents=True)
    (job_dir / jobs.PROGRESS_FILE).write_text(json.dumps({"state": "starting"}))
    process = subprocess.Popen([sys.executable, "-c", code, str(job_dir), "engine"], start_new_session=True)
    processes.append(process)
    record = {"kind": "evaluate", "pid": process.pid, "created_at": time.time(), "time_limit_s": limit}
    (job_dir / jobs.JOB_FILE).write_text(json.dumps(record))
    return job_dir


def test_a_job_past_its_time_limit_is_stopped_and_ends_failed_saying_why(
    tmp_path: Path, processes: list[subprocess.Popen[bytes]]
):
    job_dir = limited_job(tmp_path, SLEEPING_JOB, processes, limit=600)
    wait_until(lambda: jobs.status(job_dir).state == "running", 60, what="the job to begin its work")
    created = json.loads((job_dir / jobs.JOB_FILE).read_text())["created_at"]
    assert jobs.enforce_time_limits(tmp_path, now=created + 599) == []
    assert jobs.enforce_time_limits(tmp_path, now=created + 601) == [job_dir]
    assert processes[0].wait(60) == jobs.EXIT_FAILED
    current = jobs.status(job_dir)
    assert (current.state, current.error) == ("failed", "it reached its time limit (10 min) and was stopped")
    assert jobs.enforce_time_limits(tmp_path, now=created + 10_000) == []  # over: nothing more to do


def test_a_job_that_ignores_the_stop_is_killed_after_the_grace_and_still_says_why(
    tmp_path: Path, processes: list[subprocess.Popen[bytes]]
):
    job_dir = limited_job(tmp_path, DEAF_JOB, processes, limit=60)
    created = json.loads((job_dir / jobs.JOB_FILE).read_text())["created_at"]
    wait_until(lambda: ignores_sigterm(processes[0].pid), 60, what="the job to ignore SIGTERM")
    assert jobs.enforce_time_limits(tmp_path, now=created + 61) == [job_dir]  # asked to stop: it does not
    assert jobs.status(job_dir).is_running
    assert jobs.enforce_time_limits(tmp_path, now=created + 61 + jobs.KILL_GRACE_S) == [job_dir]
    assert processes[0].wait(60) == -9
    current = jobs.status(job_dir)
    assert (current.state, current.error) == ("failed", "it reached its time limit (1 min) and was stopped")


def ignores_sigterm(pid: int) -> bool:
    """Whether the process ignores SIGTERM (the SigIgn mask of /proc/PID/status)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigIgn:"):
            return bool(int(line.split()[1], 16) >> (signal.SIGTERM - 1) & 1)
    return False
