"""Live stand-in processes for tests of run bookkeeping: each sleeps, and its command line names the engine (as
a real run's worker does), so engine.runs.status reconciles a status that points at it as a live run."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from engine.store.rundir import update_status


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


def running_stand_in(processes: list[subprocess.Popen[bytes]]) -> Callable[[Path], int]:
    """Stands in for engine.runs.start: the run is running under a live stand-in process (recorded in
    ``processes``); returns its pid."""

    def launch(run_dir: Path) -> int:
        pid = live_engine_process(processes)
        update_status(run_dir, state="running", pid=pid, supervisor_pid=pid, started_at=time.time())
        return pid

    return launch
