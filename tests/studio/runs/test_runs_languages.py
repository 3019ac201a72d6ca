"""The Runs tab in the page's language: the list's headers, badges and summary, the delete confirmation and the
Compare chart, each in the language of the page that asks (its ts_lang cookie), and English for a page that names
none."""

from __future__ import annotations

import asyncio
import html
import json
import time
from pathlib import Path
from typing import Any

import gradio as gr
from gradio.state_holder import SessionState

from engine.config import RunConfig, save_config
from engine.store.rundir import update_status
from studio.context import StudioContext
from studio.i18n.catalog import text
from studio.runs.data import COLUMNS, columns
from studio.runs.tab import RunsTab
from tests.helpers.pages import page_request


def write_run(workspace: Path, name: str, **status: Any) -> Path:
    run_dir = workspace / "runs" / name
    run_dir.mkdir(parents=True)
    save_config(RunConfig(name=name), run_dir / "config.yaml")
    update_status(run_dir, name=name, created_at=time.time(), **status)
    return run_dir


def runs_page(workspace: Path) -> tuple[gr.Blocks, RunsTab]:
    with gr.Blocks() as demo, gr.Tabs() as tabs:
        ctx = StudioContext(workspace, gr.State(None), tabs, visitor=gr.State(None))
        with gr.Tab("Runs", id="runs"):
            tab = RunsTab(ctx)
    return demo, tab


def call(demo: gr.Blocks, name: str, args: list[Any], lang: str | None = None) -> list[Any]:
    """Run one event the way the server does, for a page showing ``lang`` (None: a page that names none)."""
    fn = next(fn for fn in demo.fns.values() if fn.name == name)
    request = page_request(lang) if lang else None
    return asyncio.run(demo.process_api(fn, args, state=SessionState(demo), request=request))["data"]


def test_the_run_list_and_the_delete_confirmation_follow_the_page(tmp_path: Path) -> None:
    for name in ("a", "b"):
        write_run(tmp_path, name, state="completed", started_at=1000.0, ended_at=1130.0)
    demo, tab = runs_page(tmp_path)
    _, table, _, summary = call(demo, "list_fn", [None, None, []], "ja")
    assert table["headers"] == columns("ja") and columns("ja") != COLUMNS
    assert f">{text('state.completed', 'ja')}<" in table["data"][0][2]
    assert html.escape(text("runs.count_many", "ja", count=2)) in summary
    _, table, _, summary = call(demo, "list_fn", [None, None, []])
    assert table["headers"] == COLUMNS and "2 runs" in summary and ">completed<" in table["data"][0][2]

    tab.selected.choices = [("a", "a"), ("b", "b")]  # as the list's refresh has filled them
    row, asked, message = call(demo, "ask_delete", [None, ["a", "b"]], "zh-CN")
    question = text("runs.delete.confirm_many", "zh-CN", count=2)
    assert row["visible"] is True and html.escape(question) in asked and message == ""
    assert question != text("runs.delete.confirm_many", "en", count=2)
    _, asked, _ = call(demo, "ask_delete", [None, ["a", "b"]])
    assert "Delete 2 runs with their checkpoints and results? This cannot be undone." in asked


def test_the_compare_chart_follows_the_page(tmp_path: Path) -> None:
    demo, tab = runs_page(tmp_path)
    plot, _, picker = call(demo, "compare_outputs", [None, [], 0.0, "eval loss"], "ko")
    figure = json.loads(plot["plot"])
    assert figure["layout"]["title"]["text"] == text("runs.compare.eval_loss", "ko")
    assert figure["layout"]["annotations"][0]["text"] == text("runs.compare.pick", "ko")
    assert picker["choices"][0] == [text("chart.train_loss", "ko"), "train loss"]
    plot, _, picker = call(demo, "compare_outputs", [None, [], 0.0, "eval loss"])
    assert json.loads(plot["plot"])["layout"]["title"]["text"] == "Eval loss"
    assert picker["choices"][0] == ["train loss", "train loss"]


def test_the_compare_chart_and_table_as_the_page_opens_are_in_its_language(tmp_path: Path) -> None:
    """Before Compare is pressed: the chart's title and note and the table's header (built once with the page, in
    English) are said again in the page's language when it loads."""
    demo, _ = runs_page(tmp_path)
    plot, table, picker = call(demo, "empty_chart", [None], "ja")
    layout = json.loads(plot["plot"])["layout"]
    assert layout["title"]["text"] == text("runs.compare.train_loss", "ja") != "Train loss"
    assert layout["annotations"][0]["text"] == text("runs.compare.pick", "ja")
    assert table["headers"] == [text("runs.diff.field", "ja")] != ["field"]
    assert picker["choices"][0] == [text("chart.train_loss", "ja"), "train loss"]
