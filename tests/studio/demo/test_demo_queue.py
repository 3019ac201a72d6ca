"""Demo mode's handlers on real run directories: Start queues instead of refusing, one run per visitor, each
visitor sees and acts on their own runs only, the Monitor shows the place in line and Cancel, and one real
pair of tiny runs goes through the scheduler one after the other."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import gradio as gr
import pytest

from engine import runs
from engine.runs import queue as run_queue
from engine.store.rundir import CONFIG_FILE, FINAL_STATES, STATUS_FILE, read_status, update_status
from studio.app import initial_view
from studio.chat import models as chat_models
from studio.demo.caller import Caller
from studio.demo.ownership import owned_run, owner_tag
from studio.demo.queue import resume_queued
from studio.evaluate import tab as evaluate_tab
from studio.export import tab as export_tab
from studio.jobs.widgets import tab_opened
from studio.monitor import tab as monitor_tab
from studio.monitor.live import FEEDS, live_panels
from studio.monitor.session import MonitorSession
from studio.path_guard import confine_images
from studio.queue.scheduler import Scheduler
from studio.runs.data import RunIndex
from studio.runs.tab import delete_runs, list_view
from studio.train import actions, starting
from tests.helpers.live_processes import processes_fixture, running_stand_in  # noqa: F401 - the fixture
from tests.helpers.visitors import ALICE, BOB, CAROL, DEMO

NAMES = {ALICE: "alice", BOB: "bob", CAROL: "carol"}


def start(workspace: Path, visitor: str, launcher: Any, **changes: Any) -> starting.StartResult:
    values = actions.starting_values()
    values.update({"name": NAMES.get(visitor, "nobody"), "train.max_steps": 5})
    values.update({key.replace("__", "."): value for key, value in changes.items()})
    return starting.start_run(Caller(workspace, DEMO, visitor), values, launcher)


def finish(run_dir: Path) -> None:
    update_status(run_dir, state="completed", pid=None, supervisor_pid=None, ended_at=time.time())


def test_start_queues_one_run_per_visitor_with_the_place_in_line(tmp_path: Path, processes: list[Any]) -> None:
    launcher = running_stand_in(processes)
    alice = start(tmp_path, ALICE, launcher)
    assert alice.message == "▶ Started `alice`" and runs.status(alice.run_dir).state == "running"
    bob = start(tmp_path, BOB, launcher)
    assert bob.message == "⧖ `bob` is queued: 1 run ahead of yours. It starts by itself; follow it on the Monitor."
    assert read_status(bob.run_dir).state == "queued"
    carol = start(tmp_path, CAROL, launcher)
    assert "2 runs ahead of yours" in carol.message
    again = start(tmp_path, BOB, launcher)
    assert again.run_dir is None and again.message.startswith("⧖ Not started: you already have a run queued: `bob`")
    # The owner is recorded in the status (a digest of the visitor id), never in the config.
    status = read_status(bob.run_dir)
    assert status.owner == owner_tag(BOB) and status.time_limit_s == DEMO.time_limit_s
    assert "owner" not in (bob.run_dir / CONFIG_FILE).read_text() and BOB not in (bob.run_dir / STATUS_FILE).read_text()
    # The machine frees up: the scheduler starts the oldest queued run (Bob's), and Carol moves up.
    finish(alice.run_dir)
    assert Scheduler(tmp_path, launcher=lambda run_dir, _: launcher(run_dir)).tick() == [bob.run_dir]
    assert run_queue.runs_ahead(carol.run_dir) == 1 and runs.status(bob.run_dir).state == "running"


def test_no_visitor_id_starts_nothing(tmp_path: Path, processes: list[Any]) -> None:
    result = start(tmp_path, "", running_stand_in(processes))
    assert result.run_dir is None and "Reload the page" in result.message
    assert runs.run_dirs(tmp_path) == []


def two_runs(tmp_path: Path, processes: list[Any]) -> tuple[Path, Path]:
    launcher = running_stand_in(processes)
    alice, bob = start(tmp_path, ALICE, launcher).run_dir, start(tmp_path, BOB, launcher).run_dir
    finish(alice)
    return alice, bob


def test_each_visitor_sees_and_acts_on_their_own_runs(tmp_path: Path, processes: list[Any]) -> None:
    alice, bob = two_runs(tmp_path, processes)
    index = RunIndex(tmp_path)
    for visitor, own in ((ALICE, alice), (BOB, bob)):
        table = list_view(index, None, None, Caller(tmp_path, DEMO, visitor))[1]
        assert list(table["Run id"]) == [own.name]
    assert list(list_view(index, None, None, Caller(tmp_path, DEMO, None))[1]["Run id"]) == []
    assert list_view(index, None, None, Caller(tmp_path))[1]["Run id"].tolist() == [
        bob.name,
        alice.name,
    ]  # not a demo: all
    with pytest.raises(runs.RunError, match="no run"):
        owned_run(tmp_path, bob.name, DEMO, ALICE)
    message = delete_runs(Caller(tmp_path, DEMO, ALICE), [bob.name])[1]
    assert "no run" in message and bob.is_dir()
    # The page load: a new visitor gets an id and no run; a known one lands on their own run.
    chosen, _, new_id = initial_view(tmp_path, None, DEMO, None)
    assert chosen is None and DEMO.visitor(new_id) == new_id
    chosen, tab, kept = initial_view(tmp_path, None, DEMO, BOB)
    assert chosen == str(bob) and tab.selected == "monitor" and kept == gr.skip()  # Bob keeps his id


def test_tools_refuse_another_visitors_run(tmp_path: Path, processes: list[Any]) -> None:
    alice, bob = two_runs(tmp_path, processes)
    for run_dir in (alice, bob):  # a complete checkpoint makes them usable by chat, evaluate and export
        state = run_dir / "checkpoints" / "checkpoint-5" / "trainer_state.json"
        state.parent.mkdir(parents=True)
        state.write_text('{"global_step": 5}')
    caller = Caller(tmp_path, DEMO, ALICE)
    run_choices = tab_opened(caller, "export", None, None, None)[0]
    assert [value for _, value in run_choices["choices"]] == [alice.name]
    chat_keys = [key for _, key in chat_models.model_choices(caller)]
    assert chat_keys == ["base:assets/demo-model", "base:assets/demo-vlm", f"run:{alice.name}:5"]
    refused = export_tab.start_clicked(caller, bob.name, "5", "adapter", "float32", "", "", "", True)
    assert refused[0] is None and "no run" in refused[2]
    pushed = export_tab.start_clicked(caller, alice.name, "5", "adapter", "float32", "", "me/x", "", True)
    assert pushed[0] is None and "does not push to the hub" in pushed[2]
    evaluated = evaluate_tab.start_clicked(caller, alice.name, "5", "file", "/etc/passwd", 10)
    assert evaluated[0] is None and "not on a file of the server" in evaluated[2]
    other = evaluate_tab.start_clicked(caller, bob.name, "5", "train", "", 10)
    assert other[0] is None and "no run" in other[2]
    assert export_tab.run_changed(caller, bob.name, "adapter", "float32")[0].choices == []


def live_panels_of(run_dir: Path) -> dict[str, str]:
    """The progress and stats panels the page script is sent for a run."""
    with FEEDS.polled(run_dir) as feed:
        return live_panels(run_dir, runs.status(run_dir), feed)


def test_monitor_shows_the_queue_and_cancel(tmp_path: Path, processes: list[Any]) -> None:
    launcher = running_stand_in(processes)
    start(tmp_path, ALICE, launcher)
    bob = start(tmp_path, BOB, launcher).run_dir
    update = MonitorSession().update(str(bob))
    assert "queued</b>: 1 run ahead of yours" in live_panels_of(bob)["progress"] and "queued" in update.header
    assert update.controls.stop and update.controls.stop_label == "Cancel" and not update.controls.abort
    monitor_tab.stop_clicked(Caller(tmp_path), str(bob))  # Cancel
    status = runs.status(bob)
    assert status.state == "stopped" and status.cancelled is True
    after = MonitorSession().update(str(bob))
    assert "cancelled before it started" in live_panels_of(bob)["progress"] and "stopped" in after.header
    assert not after.controls.stop and not after.controls.resume


def test_resume_joins_the_queue(tmp_path: Path, processes: list[Any]) -> None:
    alice, bob = two_runs(tmp_path, processes)  # Alice's run is over; Bob's waits in the queue
    update_status(alice, state="stopped")
    (alice / "checkpoints" / "checkpoint-3").mkdir(parents=True)
    (alice / "checkpoints" / "checkpoint-3" / "trainer_state.json").write_text('{"global_step": 3}')
    launcher = running_stand_in(processes)
    with pytest.raises(runs.RunError, match="no run"):
        resume_queued(alice, DEMO, BOB, lambda run_dir, _: launcher(run_dir))
    # Alice's resume joins the line behind Bob's run, which the free machine starts first.
    assert resume_queued(alice, DEMO, ALICE, lambda run_dir, _: launcher(run_dir)) == (
        "⧖ `alice` is queued: 1 run ahead of yours. It starts by itself; follow it on the Monitor."
    )
    assert runs.status(bob).state == "running" and read_status(alice).resume_checkpoint == 3
    with pytest.raises(runs.RunError, match="the run is queued; only a stopped, failed or aborted run"):
        resume_queued(alice, DEMO, ALICE)


def test_two_real_tiny_runs_take_turns(tmp_path: Path) -> None:
    """Real runs through engine.runs.start: the second visitor's run waits, then starts after the first ends."""
    first = start(tmp_path, ALICE, None, train__max_steps=2).run_dir
    second = start(tmp_path, BOB, None, train__max_steps=2).run_dir
    try:
        assert read_status(second).state == "queued"
        scheduler = Scheduler(tmp_path)
        deadline = time.time() + 240
        while runs.status(second).state not in FINAL_STATES and time.time() < deadline:
            scheduler.tick()
            time.sleep(0.5)
        done = [runs.status(run_dir) for run_dir in (first, second)]
        assert [status.state for status in done] == ["completed", "completed"], done
        assert [status.step for status in done] == [2, 2]
        assert done[1].launched_at >= done[0].ended_at  # one at a time
    finally:
        for run_dir in (first, second):
            runs.abort(run_dir)


def test_a_visitor_trains_the_vision_language_demo_from_its_preset(tmp_path: Path) -> None:
    """The vision preset loads as it is in demo mode, and its run trains on the bundled images, which the demo's
    image roots allow (the studio confines image reads to the bundled sets and the visitors' uploads)."""
    confine_images(tmp_path, demo=True)
    caller = Caller(tmp_path, DEMO, ALICE)
    values, message = actions.load_config_values(caller, actions.PRESETS_DIR / "demo-vlm.yaml")
    assert values is not None and values["model.name_or_path"] == "assets/demo-vlm", message
    values.update({"name": "alice-shapes", "train.max_steps": 2, "train.eval_strategy": "no"})
    run_dir = starting.start_run(caller, values, None).run_dir
    assert run_dir is not None
    try:
        deadline = time.time() + 240
        while runs.status(run_dir).state not in FINAL_STATES and time.time() < deadline:
            time.sleep(0.5)
        status = runs.status(run_dir)
        assert (status.state, status.step) == ("completed", 2), status
        assert status.owner == owner_tag(ALICE)
        assert (run_dir / "adapter" / "processor_config.json").is_file()
    finally:
        runs.abort(run_dir)
