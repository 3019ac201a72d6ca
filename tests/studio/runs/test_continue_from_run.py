"""Starting a run from another one in the studio: the Train form's start-from picker and its checks, the Runs
tab's "Continue from this run" (which fills the Train form), and the run list's "(from ...)".

One real finished SFT run of the demo model is the source; the handlers run as plain functions and through
Gradio's own event processing, without a browser.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import gradio as gr
import pytest
import yaml
from gradio.state_holder import SessionState

from engine import runs
from engine.config import parse_config
from engine.store.paths import PROJECT_ROOT
from engine.store.rundir import update_status
from studio.context import StudioContext
from studio.demo.caller import Caller
from studio.demo.ownership import owner_tag
from studio.demo.policy import INIT_FROM_REFUSAL
from studio.form.values import default_values
from studio.runs.continuation import continue_values
from studio.runs.data import RunIndex
from studio.runs.tab import build_runs_tab
from studio.train import actions
from studio.train.tab import build_train_tab
from tests.helpers.visitors import ALICE, BOB, DEMO

pytestmark = pytest.mark.integration

DEMO_MODEL = str(PROJECT_ROOT / "assets" / "demo-model")
SOURCE = {
    "name": "sft",
    "model": {"name_or_path": DEMO_MODEL},
    "data": {"path": str(PROJECT_ROOT / "assets" / "datasets" / "demo_sft_train.jsonl"), "max_samples": 16},
    "adapter": {"r": 4, "alpha": 8, "dropout": 0.0, "target_modules": "q_proj, v_proj"},
    "train": {"max_steps": 2, "per_device_batch_size": 4, "max_length": 64},
}


def form_values(**changes: Any) -> dict[str, Any]:
    """Default widget values with some fields changed (dotted paths written with __ for dots)."""
    result = default_values()
    result.update({key.replace("__", "."): value for key, value in changes.items()})
    return result


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("continue")
    (root / "sft.yaml").write_text(parse_config(SOURCE).to_yaml())
    result = subprocess.run(
        [sys.executable, "-m", "engine", "train", "sft.yaml", "--workspace", "workspace"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, PYTHONPATH=str(PROJECT_ROOT), HF_HUB_OFFLINE="1"),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return root / "workspace"


@pytest.fixture(scope="module")
def source(workspace: Path) -> Path:
    (run_dir,) = runs.run_dirs(workspace)
    return run_dir


@pytest.fixture(scope="module")
def queued(workspace: Path, source: Path) -> Path:
    """A run that was created and never started: it has no weights to start from."""
    return runs.create_run(parse_config({**SOURCE, "name": "queued"}), workspace=workspace)


def test_picker_lists_finished_runs_with_weights_only(workspace: Path, source: Path, queued: Path):
    choices = actions.init_from_choices(Caller(workspace))
    assert choices == [(actions.NO_INIT_SOURCE, ""), (f"sft · {source.name}", source.name)]


def test_preview_checks_the_source_and_shows_where_the_run_starts(workspace: Path, source: Path, queued: Path):
    continued = form_values(model__init_from=source.name, adapter__r=4, adapter__alpha=8, adapter__dropout=0.0)
    continued["adapter.target_modules"] = "q_proj, v_proj"
    good = actions.preview(Caller(workspace), continued)
    assert not good.errors, good.errors
    assert yaml.safe_load(good.yaml)["model"]["init_from"] == str(source)  # as the run will save it
    missing = actions.preview(Caller(workspace), form_values(model__init_from="nope"))
    assert missing.errors["model.init_from"].startswith("no run 'nope' in ")
    unfinished = actions.preview(Caller(workspace), form_values(model__init_from=queued.name))
    assert "queued has no final adapter (it is queued)" in unfinished.errors["model.init_from"]
    reshaped = actions.preview(Caller(workspace), {**continued, "adapter.r": 16})
    assert set(reshaped.errors) == {"adapter.r"} and "sft's adapter has r 4" in reshaped.errors["adapter.r"]
    cleared = actions.preview(Caller(workspace), form_values(model__init_from=""))
    assert not cleared.errors and yaml.safe_load(cleared.yaml)["model"]["init_from"] is None


def test_a_demo_visitor_starts_only_from_their_own_runs(workspace: Path, source: Path):
    update_status(source, owner=owner_tag(ALICE))
    assert actions.init_from_choices(Caller(workspace, DEMO, ALICE))[1:] == [(f"sft · {source.name}", source.name)]
    assert actions.init_from_choices(Caller(workspace, DEMO, BOB))[1:] == []
    carried, message = continue_values(Caller(workspace, DEMO, ALICE), [source.name])
    assert carried is not None and carried["model.init_from"] == source.name and "sft's adapter" in message
    refused_values, why = continue_values(Caller(workspace, DEMO, BOB), [source.name])
    assert refused_values is None and f"no run '{source.name}' here" in why
    # The demo names its model as bundled; the source here was trained from the same folder by its full path.
    continued = {**form_values(train__max_steps=10), **carried, "model.name_or_path": "assets/demo-model"}
    assert actions.preview(Caller(workspace, DEMO, ALICE), continued).errors == {}
    refused = {"model.init_from": INIT_FROM_REFUSAL}
    assert actions.preview(Caller(workspace, DEMO, BOB), continued).errors == refused
    assert actions.preview(Caller(workspace, DEMO), continued).errors == refused  # no visitor: nobody's runs
    # A path is no run id of the visitor's, even when it names their own run.
    as_path = {**continued, "model.init_from": str(source)}
    assert actions.preview(Caller(workspace, DEMO, ALICE), as_path).errors == refused


def test_continue_values_carry_the_source_model_and_adapter(workspace: Path, source: Path, queued: Path):
    values, message = continue_values(Caller(workspace), [source.name])
    assert values is not None and "sft's adapter" in message
    assert values["model.init_from"] == source.name and values["model.name_or_path"] == DEMO_MODEL
    assert (values["adapter.r"], values["adapter.alpha"], values["adapter.target_modules"]) == (4, 8, "q_proj, v_proj")
    assert not any(path.startswith(("data.", "train.", "method")) for path in values)
    # The filled form passes the checks: a DPO run on the preference pairs can start from it as it is.
    dpo = {**form_values(method="dpo", data__path="assets/datasets/demo_preference.jsonl"), **values}
    assert not actions.preview(Caller(workspace), dpo).errors
    assert continue_values(Caller(workspace), [])[0] is None
    assert (
        continue_values(Caller(workspace), [source.name, queued.name])[1]
        == "Pick one run in “Selected runs” to continue from."
    )
    refused, why = continue_values(Caller(workspace), [queued.name])
    assert refused is None and "has no final adapter" in why


def test_run_list_says_where_a_run_started(workspace: Path, source: Path):
    config = parse_config({**SOURCE, "name": "dpo", "model": {"name_or_path": DEMO_MODEL, "init_from": source.name}})
    continued = runs.create_run(config, workspace=workspace)
    rows = {row.run_id: row for row in RunIndex(workspace).rows()}
    assert rows[continued.name].cells()[0] == "dpo (from sft)"
    assert rows[source.name].cells()[0] == "sft"


def call(demo: gr.Blocks, name: str, args: list[Any], state: SessionState) -> list[Any]:
    """Run one event the way the server does (preprocess, fn, postprocess), without a browser."""
    fn = next(fn for fn in demo.fns.values() if fn.name == name)
    return asyncio.run(demo.process_api(fn, args, state=state))["data"]


def test_continue_button_fills_the_train_form_and_shows_the_train_tab(workspace: Path, source: Path):
    with gr.Blocks() as demo, gr.Tabs() as tabs:  # as studio.app lays them out
        ctx = StudioContext(workspace, gr.State(None), tabs, visitor=gr.State(None))
        with gr.Tab("Train", id="train"):
            ctx.train_form = form = build_train_tab(ctx)
        with gr.Tab("Runs", id="runs"):
            runs_tab = build_runs_tab(ctx)
    runs_tab.selected.choices = [(source.name, source.name)]  # as the list's refresh has filled it
    picker = form.components["model.init_from"]
    assert isinstance(picker, gr.Dropdown) and picker.allow_custom_value
    assert (f"sft · {source.name}", source.name) in picker.choices
    out = call(demo, "on_continue", [None, [source.name]], SessionState(demo))
    filled = dict(zip(form.paths, out[1:-1], strict=True))
    assert filled["model.init_from"] == source.name and filled["adapter.r"] == 4
    assert out[-1] == {"selected": "train", "__type__": "update"}
    refused = call(demo, "on_continue", [None, []], SessionState(demo))
    assert "Pick one run" in refused[0] and refused[-1] == {"__type__": "update"}  # no tab switch
