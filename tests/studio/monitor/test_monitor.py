"""The metrics feed and the Monitor's handlers as plain functions, on run directories written by hand."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import gradio as gr
import pytest

from engine import runs
from engine.config import RunConfig, save_config
from engine.store.rundir import METRICS_FILE, RunStatus, update_status
from studio.demo.caller import Caller
from studio.monitor import tab as monitor_tab
from studio.monitor.feed import MetricsFeed, eta_seconds
from studio.monitor.live import FEEDS, live_panels, run_of_token
from studio.monitor.session import MonitorSession, monitor_key
from studio.monitor.view import Controls, controls_for, progress_html


def write_run(root: Path, name: str = "run", **status) -> Path:
    """A run directory as the engine leaves it: config, status and (optionally) a checkpoint."""
    run_dir = root / "runs" / name
    run_dir.mkdir(parents=True)
    save_config(RunConfig(name=name), run_dir / "config.yaml")
    checkpoints = status.pop("checkpoints", [])
    update_status(run_dir, name=name, created_at=time.time(), **status)
    for step in checkpoints:
        (run_dir / "checkpoints" / f"checkpoint-{step}").mkdir(parents=True)
        (run_dir / "checkpoints" / f"checkpoint-{step}" / "trainer_state.json").write_text(
            json.dumps({"global_step": step})
        )
    return run_dir


def append(run_dir: Path, *events: dict, raw: str = "") -> None:
    with (run_dir / METRICS_FILE).open("a") as handle:
        handle.write("".join(json.dumps(event) + "\n" for event in events) + raw)


def train_event(step: int, t: float, loss: float = 1.0) -> dict:
    return {"event": "train", "step": step, "epoch": step / 10, "time": t, "loss": loss, "learning_rate": 1e-3}


def live_panels_of(run_dir: Path, now: float | None = None) -> dict[str, str]:
    """The progress and stats panels the page script is sent for a run."""
    with FEEDS.polled(run_dir) as feed:
        return live_panels(run_dir, runs.status(run_dir), feed, now)


@pytest.fixture
def live_process():
    """A process whose command line names the engine, standing in for a live supervisor."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "engine-standin"])
    yield process.pid
    process.kill()
    process.wait()


def test_feed_reads_only_new_lines_and_never_half_a_line(tmp_path, monkeypatch):
    run_dir = write_run(tmp_path)
    append(run_dir, train_event(1, 100.0, 3.0), train_event(2, 101.0, 2.0))
    offsets = []
    real = runs.read_metrics
    monkeypatch.setattr(runs, "read_metrics", lambda d, o: offsets.append(o) or real(d, o))
    feed = MetricsFeed(run_dir)
    assert feed.poll() is True and feed.events_read == 2
    size = (run_dir / METRICS_FILE).stat().st_size
    assert feed.offset == size
    assert feed.poll() is False and feed.events_read == 2  # nothing new: nothing read
    half = json.dumps(train_event(3, 102.0, 1.5))
    append(run_dir, raw=half[:20])  # the trainer is mid-write
    assert feed.poll() is False and feed.offset == size
    append(run_dir, raw=half[20:] + "\n")
    assert feed.poll() is True and feed.events_read == 3
    assert offsets == [0, size, size, size]  # every read started where the previous one stopped
    assert feed.points("loss") == [(1, 3.0), (2, 2.0), (3, 1.5)]
    assert feed.best_loss == 1.5 and feed.latest["loss"] == 1.5


def test_feed_marks_resumes_and_measures_speed_after_them(tmp_path):
    run_dir = write_run(tmp_path)
    append(run_dir, *(train_event(s, 100.0 + s, 2.0) for s in range(1, 6)))
    append(run_dir, {"event": "resume", "step": 5, "time": 500.0})
    append(run_dir, *(train_event(s, 600.0 + 0.5 * s, 1.0) for s in range(6, 10)))
    append(run_dir, {"event": "eval", "step": 9, "epoch": 0.9, "time": 700.0, "eval_loss": 1.2})
    feed = MetricsFeed(run_dir)
    feed.poll()
    assert feed.resumes == [5]
    assert feed.seconds_per_step() == pytest.approx(0.5)  # the pause before the resume is not counted
    assert feed.points("eval_loss") == [(9, 1.2)]


def test_eta():
    assert eta_seconds(10, 100, 0.5) == 45
    assert eta_seconds(10, 0, 0.5) is None and eta_seconds(10, 100, None) is None


# A running run: Stop and Abort, and Save now and Pause (studio/monitor/test_monitor_controls.py).
TAKES_REQUESTS = Controls(stop=True, resume=False, abort=True, save=True, pause=True)


@pytest.mark.parametrize(
    ("state", "checkpoints", "expected"),
    [
        ("running", [], TAKES_REQUESTS),
        ("paused", [], Controls(stop=True, resume=False, abort=True, save=True, continue_run=True)),
        ("starting", [], Controls(stop=True, resume=False, abort=True)),
        ("stopping", [10], Controls(stop=False, resume=False, abort=True)),
        ("stopped", [10], Controls(stop=False, resume=True, abort=False)),
        ("failed", [10], Controls(stop=False, resume=True, abort=False)),
        ("failed", [], Controls(stop=False, resume=False, abort=False)),
        ("completed", [10], Controls(stop=False, resume=False, abort=False)),
        ("aborted", [10], Controls(stop=False, resume=True, abort=False)),  # resumes from the last checkpoint
        ("aborted", [], Controls(stop=False, resume=False, abort=False)),
        ("queued", [], Controls(stop=True, resume=False, abort=False, stop_label="Cancel")),  # leaves the line
    ],
)
def test_controls_follow_the_state(state, checkpoints, expected):
    assert controls_for(RunStatus(state=state, checkpoints=checkpoints)) == expected


def test_session_on_a_running_run_shows_progress_eta_and_stop(tmp_path, live_process):
    now = time.time()
    run_dir = write_run(
        tmp_path, state="running", step=10, max_steps=100, epoch=1.0, started_at=now - 60, supervisor_pid=live_process
    )
    append(run_dir, *(train_event(s, now - 10 + 0.5 * s, 3.0 - s / 10) for s in range(1, 11)))
    session = MonitorSession()
    update = session.update(str(run_dir))
    assert update.controls == TAKES_REQUESTS
    panels = live_panels_of(run_dir, now)  # sent with the charts, outside the Gradio poll
    assert "step 10</b> / 100" in panels["progress"] and "ETA 0:45" in panels["progress"]
    assert "elapsed 1:00" in panels["progress"] and "width:10.0%" in panels["progress"]
    assert "running" in update.header
    # The header names the run for the page's chart script, with a token that maps back to this run only.
    token = re.search(r'data-live="([^"]+)"', update.header).group(1)
    assert run_of_token(tmp_path / "runs", token) == run_dir.resolve()
    assert "2.0000" in panels["stats"] and update.error == ""
    # Nothing new: nothing to send.
    assert session.update(str(run_dir)).changed() == []
    # A new point reaches the stats panel of the page script; the Gradio poll has nothing to send for it.
    append(run_dir, train_event(11, now + 1, 1.9))
    assert "1.9000" in live_panels_of(run_dir, now + 0.25)["stats"]
    assert session.update(str(run_dir)).changed() == []


def test_the_monitor_key_changes_with_the_state_not_with_the_steps(tmp_path, live_process):
    """The page script asks Gradio for the header and buttons when the charts answer's key differs from the one
    the header carries: so the key follows what they show, and a step alone changes nothing."""
    run_dir = write_run(tmp_path, state="running", step=3, max_steps=100, supervisor_pid=live_process)
    update = MonitorSession().update(str(run_dir))
    key = monitor_key(run_dir, runs.status(run_dir))
    assert f'data-monitor="{key}"' in update.header  # what the page shows carries the key of what it shows
    update_status(run_dir, step=4, epoch=0.4)
    assert monitor_key(run_dir, runs.status(run_dir)) == key
    keys = {key}
    for change in ({"state": "stopped"}, {"state": "failed", "error": "boom"}):
        update_status(run_dir, **change)
        keys.add(monitor_key(run_dir, runs.status(run_dir)))
        header = MonitorSession().update(str(run_dir)).header
        assert re.search(r'data-monitor="([^"]+)"', header).group(1) in keys - {key}
    assert len(keys) == 3
    assert monitor_key(run_dir, runs.status(run_dir), "ja") not in keys  # its words are in another language


def test_session_on_stopped_and_failed_runs(tmp_path):
    stopped = write_run(tmp_path, "stopped", state="stopped", step=10, max_steps=30, checkpoints=[10])
    update = MonitorSession().update(str(stopped))
    assert update.controls == Controls(stop=False, resume=True, abort=False)
    assert "ETA" not in live_panels_of(stopped)["progress"]
    failed = write_run(tmp_path, "failed", state="failed", error="CUDA out of memory", exit_code=1)
    (failed / "train.log").write_text("loading\nTraceback ...\nRuntimeError: CUDA out of memory\n")
    update = MonitorSession().update(str(failed))
    assert update.controls == Controls(stop=False, resume=False, abort=False)
    assert "CUDA out of memory" in update.error and "exit code 1" in update.error
    assert "RuntimeError" in update.error  # the end of the log says why
    assert "no checkpoint" in update.error


def test_an_aborted_run_is_not_shown_as_failed(tmp_path):
    run_dir = write_run(
        tmp_path, state="aborted", error="aborted by the user", step=7, max_steps=30, checkpoints=[5], exit_code=None
    )
    (run_dir / "train.log").write_text("train step 7\n")
    update = MonitorSession().update(str(run_dir))
    assert update.error == ""  # no red "Run failed" box
    assert "ts-state-aborted" in update.header and ">aborted<" in update.header
    assert update.controls == Controls(stop=False, resume=True, abort=False)
    progress = live_panels_of(run_dir)["progress"]
    assert "<b>aborted by the user</b>" in progress and "ts-state-aborted" in progress


def test_a_run_ended_at_its_time_limit_says_so(tmp_path):
    now = time.time()
    limit = {"launched_at": now - 200, "time_limit_s": 120, "ended_at": now - 10}
    aborted = write_run(tmp_path, "killed", state="aborted", error="the run reached its time limit", **limit)
    stopped = write_run(tmp_path, "stopped", state="stopped", **limit)
    for run_dir in (aborted, stopped):
        assert "<b>ended at its time limit (2 min)</b>" in live_panels_of(run_dir, now)["progress"]


def test_elapsed_time_counts_every_segment_of_a_resumed_run(tmp_path, live_process):
    now = time.time()
    resumed = write_run(
        tmp_path, "resumed", state="running", started_at=now - 130, earlier_seconds=593, supervisor_pid=live_process
    )
    assert "elapsed 12:03 total · 2:10 this segment" in live_panels_of(resumed, now)["progress"]
    single = write_run(tmp_path, "single", state="stopped", started_at=now - 200, ended_at=now - 70)
    progress = live_panels_of(single, now)["progress"]
    assert "elapsed 2:10" in progress and "total" not in progress


def test_a_dead_running_run_reads_failed(tmp_path):
    run_dir = write_run(tmp_path, state="running", step=3, max_steps=30, supervisor_pid=2**22 + 17)
    update = MonitorSession().update(str(run_dir))
    assert "failed" in update.header and "the training process is gone" in update.error


def test_no_run_and_switching_runs(tmp_path):
    session = MonitorSession(resend_seconds=3600)
    empty = session.update(None)
    assert "No run selected" in empty.header and empty.controls == Controls(False, False, False)
    assert session.update(None).changed() == []
    run_dir = write_run(tmp_path, state="completed", step=30, max_steps=30)
    switched = session.update(str(run_dir))
    assert "completed" in switched.header and "width:100.0%" in live_panels_of(run_dir)["progress"]
    assert "name: run" in switched.config


def test_refresh_sends_skip_for_unchanged_outputs(tmp_path):
    run_dir = write_run(tmp_path, state="completed", step=30, max_steps=30)
    first = monitor_tab.refresh(Caller(tmp_path), str(run_dir), MonitorSession(resend_seconds=3600))
    session = first[0]
    assert isinstance(session, MonitorSession)
    assert all(value != gr.skip() for value in first[1:])
    second = monitor_tab.refresh(Caller(tmp_path), str(run_dir), session)
    assert second[0] is session and all(value == gr.skip() for value in second[1:])


def test_every_output_is_sent_again_after_a_while(tmp_path):
    """A redraw that answers after the next poll leaves an older header on the page: the session sends everything
    again every ``resend_seconds``, so the page shows the run's state within that time whatever was lost."""
    run_dir = write_run(tmp_path, state="completed", step=30, max_steps=30)
    session = MonitorSession(resend_seconds=0)
    assert "completed" in session.update(str(run_dir)).header
    again = session.update(str(run_dir))
    assert "completed" in again.header and again.controls is not None and "name: run" in again.config


def test_progress_of_a_run_without_max_steps_yet():
    html = progress_html(RunStatus(state="starting", step=0, max_steps=0), None, now=0)
    assert "step 0</b> / ?" in html and "ETA —" in html
