"""Save now, Pause and Continue on the control side, without training: the controls file, which states take the
requests, how the worker reads them (engine.training.controls), and a paused run counted as active by the queue,
the warm standby's check and the time limit. The real runs: test_requests.py beside it.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from engine import runs
from engine.config import parse_config
from engine.runs import queue as run_queue
from engine.runs.devices import held_devices
from engine.store.controls import CONTROLS_FILE, Controls, clear_controls, read_controls, request_pause, request_save
from engine.store.rundir import read_status, update_status
from engine.training.controls import RunControls, Wanted
from engine.training.stopping import StopRequest
from tests.helpers.live_processes import live_engine_process, processes_fixture  # noqa: F401 - the fixture


def new_run(workspace: Path, name: str) -> Path:
    return runs.create_run(parse_config({"name": name, "train": {"max_steps": 3}}), workspace=workspace)


def live(run_dir: Path, processes: list[subprocess.Popen[bytes]], state: str) -> None:
    """The run in ``state`` under a live process whose command line names the engine (reconciled as alive)."""
    pid = live_engine_process(processes)
    update_status(run_dir, state=state, pid=pid, supervisor_pid=pid, started_at=time.time(), devices=["cpu"])


def test_the_controls_file_holds_what_is_wanted(tmp_path: Path) -> None:
    assert read_controls(tmp_path) == Controls()
    assert request_save(tmp_path) == Controls(save=1)
    assert request_pause(tmp_path, True) == Controls(pause=True, save=1)  # a pause keeps the saves asked for
    assert request_save(tmp_path) == Controls(pause=True, save=2)
    assert request_pause(tmp_path, False) == read_controls(tmp_path) == Controls(save=2)
    (tmp_path / CONTROLS_FILE).write_text('{"pause": "yes", "save": -4}')  # edited by hand: nothing is asked
    assert read_controls(tmp_path) == Controls()
    (tmp_path / CONTROLS_FILE).write_text("[1, 2")
    assert read_controls(tmp_path) == Controls()
    clear_controls(tmp_path)
    assert not (tmp_path / CONTROLS_FILE).exists()


def test_only_a_running_or_paused_run_takes_requests(tmp_path: Path, processes: list[Any]) -> None:
    run_dir = new_run(tmp_path, "one")
    for state in ("queued", "stopped", "completed", "failed", "aborted"):
        update_status(run_dir, state=state)
        assert not runs.save_now(run_dir) and not runs.pause(run_dir) and not runs.resume_paused(run_dir), state
    for state in ("starting", "stopping"):  # a process lives, but it does not read requests then
        live(run_dir, processes, state)
        assert not runs.save_now(run_dir) and not runs.pause(run_dir), state
    assert read_controls(run_dir) == Controls()  # none of these asked for anything
    live(run_dir, processes, "running")
    assert not runs.resume_paused(run_dir)  # nothing to continue
    assert runs.pause(run_dir) and runs.save_now(run_dir)
    assert read_controls(run_dir) == Controls(pause=True, save=1)
    assert runs.resume_paused(run_dir)  # asked to pause, not yet paused: the pause is taken back
    update_status(run_dir, state="paused", paused_at=time.time())
    assert runs.save_now(run_dir) and runs.pause(run_dir) and runs.resume_paused(run_dir)
    assert read_controls(run_dir) == Controls(pause=False, save=2)


def test_the_worker_answers_each_save_once_and_starts_afresh(tmp_path: Path) -> None:
    stop = StopRequest()
    controls = RunControls(tmp_path, stop, is_main=True)
    request_pause(tmp_path, True)
    request_save(tmp_path)
    controls.begin()  # a new process of the run: earlier requests are spent
    assert controls.check() == Wanted() and not (tmp_path / CONTROLS_FILE).exists()
    request_save(tmp_path)
    request_save(tmp_path)  # two clicks within one step
    assert controls.check() == Wanted(save=True)
    assert controls.check() == Wanted(save=True)  # until a checkpoint answers it
    controls.saved()
    assert controls.check() == Wanted()  # one checkpoint answered both
    request_pause(tmp_path, True)
    assert controls.check() == Wanted(pause=True)
    stop.requested = True
    assert controls.check() == Wanted(stop=True, pause=True)
    other_rank = RunControls(tmp_path, StopRequest(), is_main=False)
    assert other_rank.check() == Wanted()  # only rank 0 reads the file; the others learn it from rank 0


def test_a_paused_run_is_active_for_the_queue_the_standby_and_the_devices(
    tmp_path: Path, processes: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STUDIO_DEVICES", "cpu")
    paused = new_run(tmp_path, "paused")
    live(paused, processes, "paused")
    waiting = new_run(tmp_path, "waiting")
    assert runs.status(paused).is_active and runs.active_runs(tmp_path) == [paused]  # the standby waits for it
    assert held_devices(tmp_path, ()) == {"cpu"}
    started: list[Path] = []
    assert run_queue.start_next_queued(tmp_path, lambda run_dir, _: started.append(run_dir)) == []
    assert started == [] and read_status(waiting).state == "queued"  # the CPU stays with the paused run
    assert run_queue.runs_ahead(waiting) == 1


def test_the_time_limit_counts_a_pause_and_stops_a_paused_run(
    tmp_path: Path, processes: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    paused = new_run(tmp_path, "paused")
    live(paused, processes, "paused")
    now = time.time()
    update_status(paused, launched_at=now - 130, time_limit_s=120, paused_at=now - 100)  # paused for most of it
    asked: list[Path] = []
    monkeypatch.setattr(runs, "stop", lambda run_dir: asked.append(run_dir) or True)
    assert run_queue.enforce_time_limits(tmp_path, now) == [paused]
    assert asked == [paused]  # Stop, with a checkpoint: the real run leaves its pause (test_requests.py)
