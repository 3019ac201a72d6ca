"""A second export under the default name: it takes the next free name instead of failing with "already exists"."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from html import unescape
from pathlib import Path

import gradio as gr
import pytest
from gradio.state_holder import SessionState

from engine import runs
from engine.config import parse_config
from engine.export import exports
from engine.runs.jobs import JOB_FILE, PROGRESS_FILE, jobs_dir
from engine.store.rundir import update_status
from engine.store.workspace import exports_dir, runs_dir
from studio.context import StudioContext
from studio.demo.caller import Caller
from studio.export import tab as export_tab

RUN_ID = "tuned"


def finished_run(workspace: Path) -> Path:
    """A completed LoRA run with an adapter on disk (files enough for an export to be planned)."""
    run_dir = runs.create_run(parse_config({"name": RUN_ID}), run_dir=runs_dir(workspace) / RUN_ID)
    (run_dir / "adapter").mkdir()
    (run_dir / "adapter" / "adapter_model.safetensors").write_bytes(b"weights")
    (run_dir / "adapter" / "adapter_config.json").write_text("{}")
    update_status(run_dir, state="completed")
    return run_dir


def exported(workspace: Path, name: str) -> None:
    """What a finished export leaves: its folder with files, and its zip beside it."""
    folder = exports_dir(workspace) / name
    folder.mkdir(parents=True)
    (folder / "adapter_model.safetensors").write_bytes(b"weights")
    folder.with_name(f"{name}.zip").write_bytes(b"PK")


@pytest.fixture
def job_pid() -> Iterator[int]:
    """A live process that reads as an engine job's (its command line names the engine), until the test ends."""
    process = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()", "engine-export"], stdin=subprocess.PIPE
    )
    yield process.pid
    process.stdin.close()
    process.wait(timeout=30)


def running_export(workspace: Path, name: str, pid: int) -> None:
    """An export job to ``name`` that is still going, which has written only partial files so far."""
    job_dir = jobs_dir(workspace) / f"{time.strftime('%Y%m%d-%H%M%S')}-abcdef-export"
    job_dir.mkdir(parents=True)
    target = str((exports_dir(workspace) / name).resolve())
    record = {"kind": exports.JOB_KIND, "labels": {"target": target}, "pid": pid, "created_at": time.time()}
    (job_dir / JOB_FILE).write_text(json.dumps(record))
    (job_dir / PROGRESS_FILE).write_text(json.dumps({"state": "running", "phase": "copying the adapter"}))


def test_the_default_name_skips_the_names_earlier_exports_took(tmp_path: Path, job_pid: int) -> None:
    run_dir = finished_run(tmp_path)
    first = exports.plan_export(run_dir, workspace=tmp_path)
    assert first.target.name == f"{RUN_ID}-adapter"
    exported(tmp_path, f"{RUN_ID}-adapter")
    assert exports.plan_export(run_dir, workspace=tmp_path).target.name == f"{RUN_ID}-adapter-2"
    running_export(tmp_path, f"{RUN_ID}-adapter-2", job_pid)  # not on disk yet, but taken
    assert exports.plan_export(run_dir, workspace=tmp_path).target.name == f"{RUN_ID}-adapter-3"
    # A zip left alone (its folder deleted) still holds its name: the next export's zip would replace it.
    (exports_dir(tmp_path) / f"{RUN_ID}-merged-float16.zip").write_bytes(b"PK")
    merged = exports.plan_export(run_dir, "merged", "float16", workspace=tmp_path)
    assert merged.target.name == f"{RUN_ID}-merged-float16-2"
    # A name given by hand is taken as it is, and refused when it is taken.
    assert exports.plan_export(run_dir, out="mine", workspace=tmp_path).target.name == "mine"


def test_the_export_tab_offers_and_starts_under_the_next_free_name(tmp_path: Path, monkeypatch, job_pid) -> None:
    finished_run(tmp_path)
    caller = Caller(tmp_path)
    started: list[exports.ExportPlan] = []

    def start(plan: exports.ExportPlan, **_: object) -> Path:
        started.append(plan)
        return running_job(tmp_path, job_pid)

    monkeypatch.setattr(exports, "start_export", start)
    _, name = export_tab.options_changed(caller, RUN_ID, "adapter", "float32")
    assert name.placeholder == f"{RUN_ID}-adapter"
    exported(tmp_path, f"{RUN_ID}-adapter")  # the first export, under the default name
    _, name = export_tab.options_changed(caller, RUN_ID, "adapter", "float32")
    assert name.placeholder == f"{RUN_ID}-adapter-2"
    outputs = export_tab.start_clicked(caller, RUN_ID, "", "adapter", "float32", "", "", "", True)
    assert outputs[0], unescape(outputs[2])  # started, not "already exists ... choose another name"
    assert [plan.target.name for plan in started] == [f"{RUN_ID}-adapter-2"]
    _, name, _ = export_tab.run_changed(caller, RUN_ID, "merged", "bfloat16")
    assert name.placeholder == f"{RUN_ID}-merged-bfloat16"


def running_job(workspace: Path, pid: int) -> Path:
    """A job directory whose status reads as running (the export itself is not what these tests check)."""
    job_dir = jobs_dir(workspace) / "stand-in-export"
    job_dir.mkdir(parents=True, exist_ok=True)
    (job_dir / JOB_FILE).write_text(json.dumps({"kind": exports.JOB_KIND, "labels": {}, "pid": pid}))
    (job_dir / PROGRESS_FILE).write_text(json.dumps({"state": "running"}))
    return job_dir


def test_another_run_or_another_name_clears_the_last_refusal_but_not_a_running_exports_progress(
    tmp_path: Path, job_pid: int
) -> None:
    finished_run(tmp_path)
    caller = Caller(tmp_path)
    refused = export_tab.start_clicked(caller, RUN_ID, "", "adapter", "float32", "../x", "", "", True)
    assert refused[0] is None and "outside the workspace's exports directory" in unescape(refused[2])
    *_, progress = export_tab.run_changed(caller, "another", "adapter", "float32", None)
    assert progress == ""  # the refusal answered the request as it was, with another run and name
    job = str(running_job(tmp_path, job_pid))
    *_, progress = export_tab.run_changed(caller, RUN_ID, "adapter", "float32", job)
    assert progress == gr.skip()  # the running export's progress stays in view


def test_the_page_clears_the_refusal_when_the_run_is_picked_or_the_name_edited(tmp_path: Path) -> None:
    """The events that carry it: picking a run (with no export running) and typing in the name box."""
    finished_run(tmp_path)
    with gr.Blocks() as page:
        tab = export_tab.build_export_tab(StudioContext(tmp_path, visitor=gr.State(None)))
    events = {target: fn for fn in page.fns.values() for target in fn.targets}

    def run(event: tuple[int, str], args: list[object]) -> dict[object, object]:
        fn = events[event]
        data = asyncio.run(page.process_api(fn, args, state=SessionState(page)))["data"]
        return dict(zip(fn.outputs, data, strict=True))

    assert run((tab.run._id, "change"), [None, RUN_ID, "adapter", "float32", None])[tab.progress] == ""
    assert run((tab.name._id, "input"), [None]) == {tab.progress: ""}
