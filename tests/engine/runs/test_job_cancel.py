"""A job cancelled while a library swallows the cancel and fails on its own later (a bare except around an optional
import, then an import of the half-imported module) reads ``cancelled``, not ``failed`` with the library's error;
the same error without a cancel is still a failure. Each job body runs in its own process (run_job installs its
signal handlers for good, as a job's process does)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from engine.runs import jobs
from engine.store.paths import PROJECT_ROOT

BODY = """
import os, signal, sys
from engine.runs import jobs

def work(progress):
    if {cancel}:
        try:
            os.kill(os.getpid(), signal.SIGTERM)  # the user's Cancel arrives inside the library
            signal.pause()  # the signal's handler runs here at the latest
        except BaseException:
            pass  # the library's bare except eats it
    raise ImportError("cannot import name io")

sys.exit(jobs.run_job(sys.argv[1], work, ()))
"""


def run_body(job_dir: Path, cancel: bool) -> tuple[int, dict]:
    job_dir.mkdir()
    command = [sys.executable, "-c", BODY.format(cancel=cancel), str(job_dir)]
    done = subprocess.run(command, cwd=PROJECT_ROOT, capture_output=True, timeout=120)
    return done.returncode, json.loads((job_dir / jobs.PROGRESS_FILE).read_text())


@pytest.mark.parametrize(
    ("cancel", "outcome"),
    [
        (True, (jobs.EXIT_CANCELLED, "cancelled", "cancelled by the user")),
        (False, (jobs.EXIT_FAILED, "failed", "ImportError: cannot import name io")),
    ],
)
def test_an_error_after_a_swallowed_cancel_is_a_cancel(tmp_path: Path, cancel: bool, outcome: tuple):
    code, progress = run_body(tmp_path / "job", cancel)
    assert (code, progress["state"], progress["error"]) == outcome
