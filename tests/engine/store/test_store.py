"""The on-disk contracts: the typed status, the workspace layout and the engine's child processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.store import processes
from engine.store.paths import PROJECT_ROOT
from engine.store.rundir import LOG_FILE, STATUS_FILE, RunStatus, log_tail, read_status, update_status
from engine.store.workspace import runs_dir, workspace_of


def test_status_is_typed_and_keeps_what_it_does_not_know(tmp_path: Path) -> None:
    assert read_status(tmp_path) == RunStatus()  # nothing written yet
    (tmp_path / STATUS_FILE).write_text(json.dumps({"state": "running", "step": 3, "from_a_newer_engine": 1}))
    current = update_status(tmp_path, step=4)
    assert (current.state, current.step, current.is_active, current.is_final) == ("running", 4, True, False)
    stored = json.loads((tmp_path / STATUS_FILE).read_text())
    assert stored["from_a_newer_engine"] == 1 and stored["step"] == 4 and "checkpoints" not in stored
    with pytest.raises(TypeError, match="stpe"):
        update_status(tmp_path, stpe=5)
    with pytest.raises(TypeError, match="checkpoints"):  # the reconciled view is never stored
        update_status(tmp_path, checkpoints=[1])


def test_a_run_belongs_to_a_workspace_only_under_its_runs_folder(tmp_path: Path) -> None:
    assert workspace_of(runs_dir(tmp_path) / "20260101-run") == tmp_path.resolve()
    assert workspace_of(tmp_path / "elsewhere" / "my-run") is None


def test_children_run_this_engine_from_anywhere_without_progress_bars(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(["/somewhere", str(PROJECT_ROOT)]))
    monkeypatch.delenv("HF_HUB_DISABLE_PROGRESS_BARS", raising=False)
    env = processes.engine_env({"EXTRA": "1"})
    assert env["PYTHONPATH"].split(os.pathsep) == [str(PROJECT_ROOT), "/somewhere"]
    assert (env["PYTHONUNBUFFERED"], env["HF_HUB_DISABLE_PROGRESS_BARS"], env["EXTRA"]) == ("1", "1", "1")
    code = "import engine.store.paths as p; print(p.PROJECT_ROOT)"
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True)
    assert out.stdout.strip() == str(PROJECT_ROOT)


def test_a_detached_child_is_reaped_and_only_engine_processes_count_as_alive(tmp_path: Path) -> None:
    process = processes.spawn_detached(["--help"], cwd=str(tmp_path))  # argparse prints and exits at once
    deadline = time.time() + 60
    while processes.pid_alive(process.pid) and time.time() < deadline:
        time.sleep(0.05)
    assert not processes.pid_alive(process.pid)  # reaped: no zombie left that looks alive
    assert processes.exit_code_of(process.pid) == 0
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert processes.pid_alive(sleeper.pid) and not processes.is_alive(sleeper.pid)  # not an engine process
        assert sleeper.pid in processes.process_tree(os.getpid())
    finally:
        sleeper.kill()
        sleeper.wait()


def test_the_log_tail_drops_terminal_colour_codes(tmp_path: Path) -> None:
    """trackio prints its dashboard's address in bold orange into train.log; a page shows the words only."""
    printed = "\x1b[1m\x1b[38;5;208m* Trackio launched at: http://127.0.0.1:7861/\x1b[0m\nstep 1 loss 2.5\n"
    (tmp_path / LOG_FILE).write_text(printed, encoding="utf-8")
    assert log_tail(tmp_path) == "* Trackio launched at: http://127.0.0.1:7861/\nstep 1 loss 2.5\n"
