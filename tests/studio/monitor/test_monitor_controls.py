"""Save now, Pause / Continue and early stopping as the studio shows them, on run directories written by hand: the
buttons per state, the paused and early-stopped notes, the speed after a pause, the owner guard of demo mode, and
a running run's checkpoints offered to Evaluate, Export and Chat. The real runs: tests/engine/runs/test_requests.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.config import RunConfig, save_config
from engine.store.controls import read_controls, request_pause
from engine.store.rundir import METRICS_FILE, RunStatus, update_status
from studio.chat.models import model_choices
from studio.demo.caller import Caller
from studio.demo.ownership import owner_tag
from studio.jobs.view import finished_runs, weight_choices
from studio.monitor import tab as monitor_tab
from studio.monitor.feed import MetricsFeed
from studio.monitor.session import MonitorSession
from studio.monitor.view import Controls, controls_for, progress_html, run_note
from studio.runs.data import run_note as runs_tab_note
from tests.helpers.visitors import ALICE, BOB, DEMO

REASON = "early stopped at step 60 (eval_loss did not improve for 3 evaluations)"


@pytest.fixture
def live_pid() -> Iterator[int]:
    """A process whose command line names the engine, standing in for a live supervisor."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "engine-standin"])
    yield process.pid
    process.kill()
    process.wait()


def write_run(root: Path, name: str = "run", checkpoints: tuple[int, ...] = (), **status) -> Path:
    run_dir = root / "runs" / name
    run_dir.mkdir(parents=True)
    save_config(RunConfig(name=name), run_dir / "config.yaml")
    update_status(run_dir, name=name, created_at=time.time(), **status)
    for step in checkpoints:  # whole, as checkpoint_steps judges them
        folder = run_dir / "checkpoints" / f"checkpoint-{step}"
        folder.mkdir(parents=True)
        (folder / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    return run_dir


def test_save_now_and_pause_while_running_continue_while_paused_or_asked_to_pause() -> None:
    running = RunStatus(state="running")
    assert controls_for(running) == Controls(stop=True, resume=False, abort=True, save=True, pause=True)
    asked = controls_for(running, pause_requested=True)  # not yet at the step's end: Continue takes it back
    assert asked.continue_run and not asked.pause and asked.save
    paused = controls_for(RunStatus(state="paused"))
    assert paused == Controls(stop=True, resume=False, abort=True, save=True, continue_run=True)
    for state in ("queued", "starting", "stopping", "stopped", "completed", "failed", "aborted"):
        controls = controls_for(RunStatus(state=state, checkpoints=[5]), pause_requested=True)
        assert not (controls.save or controls.pause or controls.continue_run), state


def test_the_progress_line_says_since_when_a_run_is_paused_and_why_one_stopped_early() -> None:
    since = time.time() - 75
    paused = RunStatus(state="paused", paused_at=since, step=40, max_steps=100, started_at=since - 30)
    note = run_note(paused, since + 75)
    assert note == f"paused since {time.strftime('%H:%M:%S', time.localtime(since))} (1:15) · Continue goes on"
    line = progress_html(paused, None, since + 75)
    assert note in line and "ETA" not in line and "ts-state-paused" in line  # no arrival time while it waits
    assert "elapsed 1:45" in line  # the pause counts as time: the demo's limit counts it too
    done = RunStatus(state="completed", reason=REASON, step=60, max_steps=600)
    assert f"<b>{REASON}</b>" in progress_html(done, None) and runs_tab_note(done) == REASON
    assert run_note(RunStatus(state="completed", step=600, max_steps=600)) == ""


def test_the_speed_after_a_pause_does_not_count_the_pause(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path)
    events = [{"event": "train", "step": s, "time": 100.0 + s, "loss": 1.0} for s in range(1, 6)]
    events.append({"event": "pause", "step": 5, "time": 105.0, "seconds": 600.0})
    events += [{"event": "train", "step": s, "time": 700.0 + 0.5 * s, "loss": 1.0} for s in range(6, 10)]
    (run_dir / METRICS_FILE).write_text("".join(json.dumps(event) + "\n" for event in events))
    feed = MetricsFeed(run_dir)
    feed.poll()
    assert feed.seconds_per_step() == pytest.approx(0.5)  # not (703.5 + 600 ...) / 8
    assert feed.points("loss") == [(s, 1.0) for s in range(1, 10)]


def test_the_session_reads_a_pending_pause_and_a_paused_run(tmp_path: Path, live_pid: int) -> None:
    run_dir = write_run(tmp_path, state="running", step=3, max_steps=30, supervisor_pid=live_pid)
    session = MonitorSession()
    assert session.update(str(run_dir)).controls.pause
    request_pause(run_dir, True)
    assert session.update(str(run_dir)).controls.continue_run
    update_status(run_dir, state="paused", paused_at=time.time())
    update = session.update(str(run_dir))
    assert ">paused<" in update.header and "ts-pulse" not in update.header  # it waits: no pulse
    assert update.controls is None  # the same buttons as once Pause was asked for: nothing new to send
    session.forget_sent()
    controls = session.update(str(run_dir)).controls
    assert controls.continue_run and controls.save and controls.stop and controls.abort and not controls.pause


def test_the_buttons_act_on_the_run_and_in_demo_mode_on_the_visitors_own_only(tmp_path: Path, live_pid: int) -> None:
    # gr.Warning outside a page event is a Python warning: the text the page would show.
    alice = write_run(tmp_path, "alice", state="paused", supervisor_pid=live_pid, owner=owner_tag(ALICE))
    request_pause(alice, True)
    with pytest.warns(UserWarning, match="no run 'alice' here"):
        monitor_tab.continue_clicked(Caller(tmp_path, DEMO, BOB), str(alice))
    with pytest.warns(UserWarning, match="no run 'alice' here"):
        monitor_tab.save_clicked(Caller(tmp_path, DEMO, BOB), str(alice))
    assert read_controls(alice).pause and read_controls(alice).save == 0  # Bob changed nothing
    monitor_tab.save_clicked(Caller(tmp_path, DEMO, ALICE), str(alice))
    monitor_tab.continue_clicked(Caller(tmp_path, DEMO, ALICE), str(alice))
    assert read_controls(alice).save == 1 and not read_controls(alice).pause
    with pytest.warns(UserWarning, match="The run is not paused"):
        monitor_tab.continue_clicked(Caller(tmp_path), str(alice))  # a second Continue: already going on
    stopped = write_run(tmp_path, "stopped", state="stopped", checkpoints=(5,))
    with pytest.warns(UserWarning, match="The run is not running"):
        monitor_tab.pause_clicked(Caller(tmp_path), str(stopped))
    with pytest.warns(UserWarning, match="The run is not running"):
        monitor_tab.save_clicked(Caller(tmp_path), str(stopped))
    assert read_controls(stopped).save == 0 and not read_controls(stopped).pause


def test_a_running_runs_checkpoints_are_offered_to_evaluate_export_and_chat(tmp_path: Path, live_pid: int) -> None:
    running = write_run(tmp_path, "busy", checkpoints=(7,), state="running", supervisor_pid=live_pid)
    write_run(tmp_path, "nothing-yet", state="running", supervisor_pid=live_pid)  # no weights: not offered
    assert finished_runs(tmp_path) == [("busy (running) · busy", "busy")]
    assert weight_choices(tmp_path, "busy") == [("checkpoint 7", "7")]  # no final result while it trains
    assert ("busy · checkpoint 7", "run:busy:7") in model_choices(Caller(tmp_path))
    assert running.is_dir()
