"""After a page reload the Chat tab's picker shows the model that is loaded, not the first base model: the status
line and the picker agree, so the person knows what answers them. Also when another page loaded another model
meanwhile (one chat worker serves the studio)."""

from __future__ import annotations

import asyncio
import html
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gradio as gr
import pytest
from gradio.state_holder import SessionState

from engine import runs
from engine.chat.client import ChatClient, LoadProgress, ModelInfo, ModelSpec, resolve_model
from engine.config import parse_config
from engine.store.rundir import update_status
from engine.store.workspace import runs_dir
from studio.chat import tab
from studio.chat.actions import load_clicked
from studio.chat.models import loaded_pick, model_choices
from studio.context import StudioContext
from studio.demo.caller import Caller
from studio.demo.ownership import owner_tag
from studio.i18n.catalog import text
from tests.helpers.chat_runs import save_demo_adapter
from tests.helpers.pages import page_request
from tests.helpers.visitors import ALICE, BOB, DEMO
from tests.studio.chat.test_chat_tab import add_checkpoints, make_run

BASE_PICK = "base:assets/demo-model"


def named_run(workspace: Path, run_id: str, name: str, created: float) -> Path:
    """A run named ``name`` at ``runs/<run_id>``."""
    run_dir = runs.create_run(parse_config({"name": name}), run_dir=runs_dir(workspace) / run_id)
    update_status(run_dir, created_at=created)
    return run_dir


def with_adapter(run_dir: Path) -> Path:
    (run_dir / "adapter").mkdir()
    (run_dir / "adapter" / "adapter_model.safetensors").write_bytes(b"weights")
    return run_dir


class StandInClient(ChatClient):
    """A chat client whose loads report what a worker would, with no worker behind them."""

    def load(
        self, spec: ModelSpec, timeout: float = 1.0, owner: str | None = None, caller: str | None = None
    ) -> Iterator[LoadProgress]:
        resolved = resolve_model(spec)  # the label the worker names the model by
        self.info, self.owner = None, owner
        yield LoadProgress(0.5, f"loading {resolved.label}")
        self.info = ModelInfo(resolved.label, resolved.is_adapter, 1_500_000, "cpu", 2048, 0.5)


def loaded(client: ChatClient, caller: Caller, pick: str) -> str:
    """Load ``pick`` as the Load button does; the last status line."""
    *_, status = load_clicked(client, caller, pick)
    return status


def test_a_reloaded_page_shows_the_loaded_run_in_the_picker(tmp_path: Path) -> None:
    with_adapter(make_run(tmp_path, "demo-dates", 1.0))
    client, caller = StandInClient(tmp_path), Caller(tmp_path)
    assert "Loaded:" in loaded(client, caller, "run:demo-dates")
    status, picker, shown = tab.page_view(client, caller)  # the page is loaded again
    assert "Loaded:</b> demo-dates · final adapter" in status
    assert picker["value"] == "run:demo-dates" and shown == "run:demo-dates"
    assert picker["choices"] == model_choices(caller)
    client.info = None  # unloaded: the first choice, as on a fresh page
    _, picker, shown = tab.page_view(client, caller)
    assert picker["value"] == BASE_PICK and shown is None


def test_the_pick_it_was_loaded_from_tells_apart_two_runs_of_one_name(tmp_path: Path) -> None:
    older = with_adapter(make_run(tmp_path, "twin", 1.0))
    newer = with_adapter(named_run(tmp_path, "twin-2", "twin", 2.0))
    add_checkpoints(newer, 10)
    client, caller = StandInClient(tmp_path), Caller(tmp_path)
    for pick in (f"run:{older.name}", f"run:{newer.name}:10", f"run:{newer.name}"):
        loaded(client, caller, pick)
        assert tab.page_view(client, caller)[1]["value"] == pick
    # A model loaded otherwise (no pick recorded) is found by its name, when one choice alone has it.
    named = ChatClient(tmp_path)
    named.info = ModelInfo("twin · checkpoint 10", True, 1, "cpu", None, 0.1)
    assert loaded_pick(named, caller, model_choices(caller)) == f"run:{newer.name}:10"
    named.info = ModelInfo("twin · final adapter", True, 1, "cpu", None, 0.1)
    assert loaded_pick(named, caller, model_choices(caller)) is None  # two runs: the name does not say which


def test_opening_the_tab_follows_a_model_another_page_loaded_but_keeps_an_own_pick(tmp_path: Path) -> None:
    with_adapter(make_run(tmp_path, "first", 1.0))
    with_adapter(make_run(tmp_path, "second", 2.0))
    client, caller = StandInClient(tmp_path), Caller(tmp_path)
    loaded(client, caller, "run:first")
    _, picker, shown = tab.page_view(client, caller)
    assert picker["value"] == "run:first"
    # This page picks another model without loading it, leaves the tab and comes back: the pick stays.
    status, picker, shown = tab.opened_view(client, caller, "run:second", shown)
    assert "value" not in picker and shown == "run:first" and "first · final adapter" in status
    # Another page loads the second run: opening the tab shows it, with the status line.
    loaded(client, caller, "run:second")
    status, picker, shown = tab.opened_view(client, caller, BASE_PICK, shown)
    assert picker["value"] == "run:second" and shown == "run:second" and "second · final adapter" in status


def test_another_visitors_model_is_never_put_in_the_picker(tmp_path: Path) -> None:
    mine = with_adapter(make_run(tmp_path, "alices", 1.0))
    update_status(mine, owner=owner_tag(ALICE))
    client = StandInClient(tmp_path)
    alice, bob = Caller(tmp_path, DEMO, ALICE), Caller(tmp_path, DEMO, BOB)
    loaded(client, alice, f"run:{mine.name}")
    assert tab.page_view(client, alice)[1]["value"] == f"run:{mine.name}"
    _, picker, shown = tab.page_view(client, bob)
    assert picker["value"] == BASE_PICK and shown is None


def page_with(workspace: Path, client: ChatClient) -> gr.Blocks:
    with gr.Blocks() as blocks:
        tab.ChatTab(StudioContext(workspace, gr.State(None), gr.Tabs(), visitor=gr.State(None)), client)
    return blocks


def run_event(blocks: gr.Blocks, name: str, args: list[Any], lang: str) -> list[Any]:
    fn = next(fn for fn in blocks.fns.values() if fn.name == name)
    return asyncio.run(blocks.process_api(fn, args, state=SessionState(blocks), request=page_request(lang)))["data"]


def test_the_page_load_event_sets_the_picker_in_the_language_of_the_page(tmp_path: Path) -> None:
    with_adapter(make_run(tmp_path, "demo-dates", 1.0))
    client = StandInClient(tmp_path)
    loaded(client, Caller(tmp_path), "run:demo-dates")
    # _: the page's state; image: the image box, hidden for a model that reads text only
    status, picker, _, image = run_event(page_with(tmp_path, client), "page_loaded", [None], "ja")
    assert picker["value"] == "run:demo-dates" and image["visible"] is False
    label = text("chat.model.final_adapter", "ja", name="demo-dates")
    assert [label, "run:demo-dates"] in picker["choices"] and html.escape(label) in status


@pytest.fixture
def tuned_run(tmp_path: Path) -> Path:
    """A run whose adapter/ is a real LoRA adapter of the demo model (built by the engine's own builder)."""
    run_dir = make_run(tmp_path, "demo-dates", 1.0)
    save_demo_adapter(run_dir)
    return run_dir


def test_with_a_real_chat_worker_the_reloaded_page_names_the_tuned_model(tmp_path: Path, tuned_run: Path) -> None:
    client, caller = ChatClient(tmp_path), Caller(tmp_path)
    try:
        assert "Loaded:" in loaded(client, caller, f"run:{tuned_run.name}")
        status, picker, _ = tab.page_view(client, caller)
        assert picker["value"] == f"run:{tuned_run.name}" and "demo-dates · final adapter" in status
    finally:
        client.unload()
