"""The Runs tab's data and handlers as plain functions: list, pick, compare, config diff, delete."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import gradio as gr
import pytest

from engine import runs
from engine.config import parse_config, save_config
from engine.store.rundir import METRICS_FILE, update_status
from studio.demo.caller import Caller
from studio.runs import tab as runs_tab
from studio.runs.data import COLUMNS, RunIndex, config_diff, delete_run, flatten, pick_initial_run


def write_run(workspace: Path, run_id: str, created: float, losses=(), config=None, **status) -> Path:
    run_dir = workspace / "runs" / run_id
    run_dir.mkdir(parents=True)
    save_config(parse_config(config or {"name": run_id}), run_dir / "config.yaml")
    update_status(run_dir, name=run_id, created_at=created, **status)
    with (run_dir / METRICS_FILE).open("a") as handle:
        for step, loss in enumerate(losses, start=1):
            handle.write(json.dumps({"event": "train", "step": step, "time": created + step, "loss": loss}) + "\n")
    return run_dir


@pytest.fixture
def live_pid():
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "engine-standin"])
    yield process.pid
    process.kill()
    process.wait()


def test_index_lists_newest_first_and_tails_losses_incrementally(tmp_path, monkeypatch):
    write_run(tmp_path, "old", 100.0, losses=[3.0, 2.0, 2.5], state="completed", step=3, max_steps=3)
    new = write_run(tmp_path, "new", 200.0, losses=[4.0], state="stopped", step=1, max_steps=10, started_at=190.0)
    index = RunIndex(tmp_path)
    rows = index.rows()
    assert [row.run_id for row in rows] == ["new", "old"]
    assert (rows[1].last_loss, rows[1].best_loss) == (2.5, 2.0)
    cells = rows[0].cells()
    assert cells[:6] == ["new", "sft", "stopped", "1 / 10", 4.0, 4.0] and cells[-1] == "new"
    offsets = []
    real = runs.read_metrics
    monkeypatch.setattr(runs, "read_metrics", lambda d, o: offsets.append((d.name, o)) or real(d, o))
    with (new / METRICS_FILE).open("a") as handle:
        handle.write(json.dumps({"event": "train", "step": 2, "time": 1.0, "loss": 1.0}) + "\n")
    rows = index.rows()
    assert (rows[0].last_loss, rows[0].best_loss) == (1.0, 1.0)
    assert all(offset > 0 for _, offset in offsets)  # the second refresh read only what was appended


def test_duration_is_the_total_over_resumes_and_the_current_segment(tmp_path):
    write_run(tmp_path, "once", 100.0, state="completed", started_at=1000.0, ended_at=1130.0)
    write_run(tmp_path, "twice", 200.0, state="completed", started_at=2000.0, ended_at=2130.0, earlier_seconds=593.0)
    duration = {row.run_id: row.cells()[COLUMNS.index("Duration")] for row in RunIndex(tmp_path).rows()}
    assert duration == {"once": "2:10", "twice": "12:03 total · 2:10 this segment"}


def test_started_is_the_run_s_first_start_not_its_latest_resume(tmp_path):
    first, resumed = 1_700_000_000.0, 1_700_090_000.0  # a day apart
    write_run(tmp_path, "resumed", 100.0, state="running", started_at=resumed, first_started_at=first)
    write_run(tmp_path, "older-engine", 200.0, state="completed", started_at=resumed)  # no first start kept
    started = {row.run_id: row.cells()[COLUMNS.index("Started")] for row in RunIndex(tmp_path).rows()}
    shown = "%b %d %H:%M"  # English's runs.started_format
    assert started == {
        "resumed": time.strftime(shown, time.localtime(first)),
        "older-engine": time.strftime(shown, time.localtime(resumed)),
    }


def test_pick_initial_run_prefers_the_newest_active_run(tmp_path, live_pid):
    assert pick_initial_run(tmp_path) is None
    write_run(tmp_path, "a-active", 100.0, state="running", supervisor_pid=live_pid)
    write_run(tmp_path, "b-done", 200.0, state="completed")
    assert Path(pick_initial_run(tmp_path)).name == "a-active"
    os.kill(live_pid, signal.SIGKILL)  # the process is gone: the run now reads failed, not active
    time.sleep(0.2)
    assert Path(pick_initial_run(tmp_path)).name == "b-done"


def test_delete_refuses_an_active_run_and_removes_a_finished_one(tmp_path, live_pid):
    active = write_run(tmp_path, "active", 1.0, state="running", supervisor_pid=live_pid)
    done = write_run(tmp_path, "done", 2.0, state="completed")
    with pytest.raises(runs.RunError, match="running; stop it"):
        delete_run(tmp_path, "active")
    assert active.exists()
    delete_run(tmp_path, "done")
    assert not done.exists()


def test_delete_handlers_confirm_first_and_refuse_running_runs(tmp_path, live_pid):
    write_run(tmp_path, "active", 1.0, state="running", supervisor_pid=live_pid)
    done = write_run(tmp_path, "done", 2.0, state="failed")
    row, _, message = runs_tab.ask_delete(Caller(tmp_path), ["active", "done"])
    assert row.visible is False and "Cannot delete active: still running" in message
    row, question, message = runs_tab.ask_delete(Caller(tmp_path), ["done"])
    assert row.visible is True and "cannot be undone" in question and message == ""
    row, message, selected = runs_tab.delete_runs(Caller(tmp_path), ["done"])
    assert "Deleted 1 run." in message and selected == [] and not done.exists()
    _, _, message = runs_tab.ask_delete(Caller(tmp_path), [])
    assert "Pick the runs" in message


def test_config_diff_lists_only_differing_fields():
    headers, rows = config_diff(
        {
            "a": {"train": {"learning_rate": 1e-4, "seed": 1}, "adapter": {"target_modules": ["q", "v"]}},
            "b": {"train": {"learning_rate": 2e-4, "seed": 1}, "adapter": {"target_modules": ["q", "v"]}},
            "c": {"train": {"learning_rate": 1e-4, "seed": 1}, "adapter": {"target_modules": "all-linear"}},
        }
    )
    assert headers == ["field", "a", "b", "c"]
    assert rows == [
        ["adapter.target_modules", "[q, v]", "[q, v]", "all-linear"],
        ["train.learning_rate", "0.0001", "0.0002", "0.0001"],
    ]
    assert flatten({"x": {"y": {"z": 1}}, "w": {}}) == {"x.y.z": 1, "w": {}}


def test_compare_overlays_losses_and_diffs_configs(tmp_path):
    write_run(tmp_path, "r1", 1.0, losses=[3, 2, 1], config={"name": "lr-small", "train": {"learning_rate": 1e-4}})
    write_run(tmp_path, "r2", 2.0, losses=[3, 1], config={"name": "lr-big", "train": {"learning_rate": 1e-3}})
    plot, diff, _ = runs_tab.compare_outputs(Caller(tmp_path), ["r1", "r2"], 0.0)
    figure = json.loads(plot.plot)
    assert [trace["name"] for trace in figure["data"]] == ["lr-small", "lr-big"]
    assert figure["data"][0]["y"] == [3, 2, 1]
    assert list(diff.columns) == ["field", "lr-small", "lr-big"]
    assert set(diff["field"]) == {"name", "train.learning_rate"}


def test_list_view_skips_when_nothing_changed_and_open_run_switches_tab(tmp_path):
    write_run(tmp_path, "r1", 1.0, state="completed")
    index = RunIndex(tmp_path)
    key, table, picker, summary = runs_tab.list_view(index, None, ["gone"], Caller(tmp_path))
    assert list(table["Run id"]) == ["r1"] and "1 run" in summary
    assert not picker.value  # a selection of a deleted run is dropped
    assert runs_tab.list_view(index, key, [], Caller(tmp_path)) == [key, gr.skip(), gr.skip(), gr.skip()]
    run_dir, tabs = runs_tab.open_run(Caller(tmp_path), "r1")
    assert Path(run_dir).name == "r1" and tabs.selected == "monitor"
