"""The Chat tab in the page's language: what its handlers answer (a page in Chinese gets the catalog's Chinese, a
page that names no language English), the model list, and the loaded model's name said again from the worker's
English. No model is loaded here: the client is given what a worker would report."""

from __future__ import annotations

import asyncio
import html
from pathlib import Path
from typing import Any

import gradio as gr
import pytest
from gradio.state_holder import SessionState
from starlette.requests import Request

from engine.chat.client import ChatClient, ModelInfo
from engine.config import ConfigError
from studio.chat import actions, status, tab
from studio.chat.models import BASE, CHECKPOINT, FINAL, model_choices, shown_label
from studio.context import StudioContext
from studio.demo.caller import Caller
from studio.i18n.catalog import text
from studio.i18n.problems import translate_problem
from studio.markup import message_html
from tests.helpers.pages import page_request
from tests.studio.chat.test_chat_tab import GREEDY_WIDGETS, add_checkpoints, final, make_run

ZH = "zh-CN"


def test_unload_answers_in_the_language_of_the_page(tmp_path: Path) -> None:
    """Unload with nothing loaded, pressed on a page in Chinese and on one that names no language."""
    with gr.Blocks() as blocks:
        tab.ChatTab(StudioContext(tmp_path, gr.State(None), gr.Tabs(), visitor=gr.State(None)))
    unload = next(fn for fn in blocks.fns.values() if fn.name == "unload")

    def press(request: Request | None) -> Any:
        return asyncio.run(blocks.process_api(unload, [None], state=SessionState(blocks), request=request))["data"][0]

    said = text(actions.NOTHING_LOADED, ZH)
    assert said != text(actions.NOTHING_LOADED, "en")
    assert press(page_request(ZH)) == message_html(said, "warn")
    assert press(None) == message_html("No model is loaded.", "warn")


def loaded_client(workspace: Path, label: str) -> ChatClient:
    """A client that reports ``label`` loaded (as the worker names it), with no worker behind it."""
    client = ChatClient(workspace)
    client.info = ModelInfo(label, True, 1_500_000, "cpu", 2048, 1.25)
    return client


def test_the_status_line_names_the_loaded_model_in_the_language_of_the_page(tmp_path: Path) -> None:
    client = loaded_client(tmp_path, "demo-dates · final adapter")
    chinese = html.unescape(status.status_html(client, Caller(tmp_path, language=ZH)))
    assert text(status.LOADED, ZH) in chinese and text(status.SIDE_AVAILABLE, ZH) in chinese
    assert text(FINAL["adapter"], ZH, name="demo-dates") in chinese
    assert text(status.PARAMETERS, ZH, count="1.5") in chinese and text(status.CONTEXT, ZH, tokens=2048) in chinese
    english = status.status_html(client, Caller(tmp_path))
    assert "Loaded:</b> demo-dates · final adapter — 1.5M parameters · cpu · context 2048 tokens" in english
    idle = status.status_html(ChatClient(tmp_path), Caller(tmp_path, language=ZH))
    before_load = text(status.NO_MODEL, ZH, load="{load}").partition("{load}")[0]
    assert html.escape(before_load) in idle and f"<b>{text(status.LOAD, ZH)}</b>" in idle


def test_the_model_list_and_the_workers_names_are_said_in_the_language_of_the_page(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path, "mine", 1.0)
    (run_dir / "adapter").mkdir()
    (run_dir / "adapter" / "adapter_model.safetensors").write_bytes(b"weights")
    add_checkpoints(run_dir, 5)
    english, chinese = model_choices(Caller(tmp_path)), model_choices(Caller(tmp_path, language=ZH))
    assert [value for _, value in english] == [value for _, value in chinese]  # the values stay
    assert [label for label, _ in chinese] == [
        text(BASE, ZH, model="assets/demo-model"),
        text(BASE, ZH, model="assets/demo-vlm"),
        text(FINAL["adapter"], ZH, name="mine"),
        text(CHECKPOINT, ZH, name="mine", step=5),
    ]
    # The worker names a loaded model as the English list does: said again, label by label.
    assert [shown_label(label, ZH) for label, _ in english] == [label for label, _ in chinese]
    assert shown_label("something else", ZH) == "something else"
    assert shown_label(english[0][0], "en") == english[0][0] == "Base · assets/demo-model"


def test_refusals_and_sampling_problems_are_in_the_language_of_the_page(tmp_path: Path) -> None:
    idle, chinese, english = ChatClient(tmp_path), Caller(tmp_path, language=ZH), Caller(tmp_path)
    note = final(tab.respond(idle, chinese, "hi", "", "Chat", {}, *GREEDY_WIDGETS))[-1]
    assert html.escape(text(actions.LOAD_FIRST, ZH, load=text(status.LOAD, ZH))) in note
    client = loaded_client(tmp_path, "Base · assets/demo-model")
    note = final(tab.respond(client, chinese, "hi", "", "Chat", {}, 5, 0.9, 40, 1, "x"))[-1]
    with pytest.raises(ConfigError) as caught:
        actions.parse_sampling_widgets([5, 0.9, 40, 1, "x"])
    problems = actions.sampling_problems(caught.value, ZH)
    assert html.escape(text(actions.FIX_SAMPLING, ZH, problems=problems)) in note
    assert f"{text('sampling.temperature.label', ZH)}: {translate_problem('must be <= 2.0', ZH)}" in problems
    said = final(tab.respond(client, english, "hi", "", "Chat", {}, 5, 0.9, 40, 1, "x"))[-1]
    assert "Fix the sampling settings: Seed: must be a number; Temperature: must be &lt;= 2.0" in said


def test_the_workers_loading_steps_are_said_in_the_language_of_the_page() -> None:
    label = text(BASE, ZH, model="assets/demo-model")
    starting = "starting the chat process for Base · assets/demo-model"  # as engine.chat.client writes it
    assert status.loading_step(starting, ZH) == text("chat.loading.process", ZH, label=label)
    assert status.loading_step("loading the tokenizer", ZH) == text("chat.loading.tokenizer", ZH)
    assert status.loading_step("a step of a newer engine", ZH) == "a step of a newer engine"
    assert status.loading_step(starting, "en") == starting
    bar = html.unescape(status._progress_html(0.35, "loading the tokenizer", ZH))
    assert f"{text(status.LOADING, ZH)} {text('chat.loading.tokenizer', ZH)}" in bar and "35%" in bar
