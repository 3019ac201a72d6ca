"""Live stand-in processes for tests of run bookkeeping: each sleeps, and its command line names the engine (as
a real run's worker does), so engine.runs.status reconciles a status that points at it as a live run."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest


@pytest.fixture(name="processes")
def processes_fixture() -> Iterator[list[subprocess.Popen[bytes]]]:
    """``processes``: the stand-ins a test started; all killed at its end. Import it into a test module."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        process.kill()
        process.wait()


def live_engine_process(processes: list[subprocess.Popen[bytes]]) -> int:
    """Start one stand-in (recorded in ``processes``); returns its pid."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "engine", "worker"])
    processes.append(process)
    return process.pid
