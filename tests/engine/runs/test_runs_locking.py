"""engine.runs.start_lock serialises starters across processes; engine.runs.delete refuses active runs."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from engine import runs
from engine.config import parse_config
from engine.store.paths import PROJECT_ROOT
from engine.store.rundir import update_status

HOLDER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from engine.runs.control import start_lock
    workspace, journal, name = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    with start_lock(workspace):
        with journal.open("a") as out:
            out.write(f"enter {name}\\n")
        time.sleep(0.4)
        with journal.open("a") as out:
            out.write(f"leave {name}\\n")
    """
)


def test_start_lock_lets_one_process_in_at_a_time(tmp_path: Path) -> None:
    journal = tmp_path / "journal.txt"
    env = dict(os.environ, PYTHONPATH=str(PROJECT_ROOT))
    holders = [
        subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path), str(journal), str(n)], env=env) for n in range(3)
    ]
    assert [holder.wait(timeout=60) for holder in holders] == [0, 0, 0]
    lines = journal.read_text().splitlines()
    assert len(lines) == 6
    # Every enter is followed directly by the same holder's leave: no two holders were inside together.
    for enter, leave in zip(lines[::2], lines[1::2], strict=True):
        assert enter.startswith("enter ") and leave == enter.replace("enter", "leave")


def _demo_run(workspace: Path) -> Path:
    config = parse_config({"model": {"name_or_path": "assets/demo-model"}, "data": {"path": "x.jsonl"}})
    return runs.create_run(config, workspace=workspace)


def test_delete_removes_a_finished_run_and_refuses_an_active_one(tmp_path: Path) -> None:
    run_dir = _demo_run(tmp_path)
    # A live process whose command line names the engine, as a real run's does.
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "engine", "worker"])
    try:
        update_status(run_dir, state="running", pid=worker.pid, supervisor_pid=worker.pid, started_at=0)
        with pytest.raises(runs.RunError, match="stop it before deleting it"):
            runs.delete(run_dir)
        assert run_dir.is_dir()
    finally:
        worker.kill()
        worker.wait()
    update_status(run_dir, state="stopped", pid=None, supervisor_pid=None)
    runs.delete(run_dir)
    assert not run_dir.exists()
    with pytest.raises(runs.RunError, match="is not a run"):
        runs.delete(run_dir)
