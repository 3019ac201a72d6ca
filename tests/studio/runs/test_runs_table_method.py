"""The Runs tab as a practitioner found it: each run's method in the list, the Metric picker offering the picked
runs' method metrics as soon as they are picked, and Delete asking its question once."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import gradio as gr
from gradio.state_holder import SessionState

from engine.config import parse_config, save_config
from engine.store.rundir import METRICS_FILE, update_status
from studio.context import StudioContext
from studio.demo.caller import Caller
from studio.i18n.catalog import text
from studio.runs import tab as runs_tab
from studio.runs.data import COLUMNS, RunIndex, columns
from studio.runs.tab import RunsTab
from tests.helpers.pages import page_request

PREFERENCE = {"path": "assets/datasets/demo_preference.jsonl"}
GRPO = {"rewards": [{"kind": "exact_match"}], "beta": 0.0}


def write_run(workspace: Path, run_id: str, config: dict[str, Any], created: float = 1.0) -> Path:
    run_dir = workspace / "runs" / run_id
    run_dir.mkdir(parents=True)
    save_config(parse_config({"name": run_id, **config}), run_dir / "config.yaml")
    update_status(run_dir, name=run_id, state="completed", created_at=created)
    return run_dir


def test_the_list_names_each_runs_method(tmp_path: Path) -> None:
    write_run(tmp_path, "tuned", {}, 1.0)
    write_run(tmp_path, "preferred", {"method": "dpo", "data": PREFERENCE}, 2.0)
    write_run(tmp_path, "rewarded", {"method": "grpo", "grpo": GRPO}, 3.0)
    (tmp_path / "runs" / "broken").mkdir()
    (tmp_path / "runs" / "broken" / "config.yaml").write_text("method: [")
    update_status(tmp_path / "runs" / "broken", name="broken", state="failed", created_at=0.5)
    method = COLUMNS.index("Method")
    assert COLUMNS[:2] == ["Name", "Method"] and columns("ja")[method] == text("runs.column.method", "ja")
    listed = {row.run_id: row.cells()[method] for row in RunIndex(tmp_path).rows()}
    assert listed == {"rewarded": "grpo", "preferred": "dpo", "tuned": "sft", "broken": ""}
    _, table, _, _ = runs_tab.list_view(RunIndex(tmp_path), None, [], Caller(tmp_path))
    assert list(table["Method"]) == ["grpo", "dpo", "sft", ""] and "completed" in table["State"][0]


def log(run_dir: Path, *events: dict[str, Any]) -> None:
    with (run_dir / METRICS_FILE).open("a") as handle:
        handle.write("".join(json.dumps(event) + "\n" for event in events))


def test_picking_runs_offers_their_method_metrics_before_compare(tmp_path: Path) -> None:
    """The picker offers, as the runs are picked, what Compare offers: the losses and the method metrics the picked
    runs logged (from what the list has read: no metrics file is read again)."""
    preferred = write_run(tmp_path, "preferred", {"method": "dpo", "data": PREFERENCE})
    log(preferred, {"event": "train", "step": 1, "loss": 0.7, "rewards/margins": 0.1, "rewards/accuracies": 0.5})
    rewarded = write_run(tmp_path, "rewarded", {"method": "grpo", "grpo": GRPO})
    log(rewarded, {"event": "train", "step": 1, "loss": 0.0, "reward": 0.4, "entropy": 1.2, "kl": None})
    write_run(tmp_path, "tuned", {})
    caller, index = Caller(tmp_path), RunIndex(tmp_path)
    index.rows()  # the list's refresh, which reads the metrics
    picker = runs_tab.metric_picker(caller, index, ["preferred"], "train loss")
    values = [value for _, value in picker.choices]
    assert values == ["train loss", "eval loss", "rewards/margins", "rewards/accuracies"]
    assert picker.value == "train loss"
    picker = runs_tab.metric_picker(caller, index, ["preferred", "rewarded"], "rewards/margins")
    values = [value for _, value in picker.choices]
    assert {"rewards/margins", "reward", "entropy"} <= set(values) and "kl" not in values  # logged as null only
    assert picker.value == "rewards/margins"  # kept while it is offered
    picker = runs_tab.metric_picker(caller, index, ["tuned", "gone"], "rewards/margins")
    assert [value for _, value in picker.choices] == ["train loss", "eval loss"] and picker.value == "train loss"
    # What Compare offers for the same runs, once pressed.
    offered = runs_tab.metric_picker(caller, index, ["preferred", "rewarded"]).choices
    _, _, compared = runs_tab.compare_outputs(caller, ["preferred", "rewarded"], 0.0, "reward")
    assert compared.choices == offered and compared.value == "reward"
    # A run the list has not read yet is read when picked; one logging more is followed at the next refresh.
    fresh = RunIndex(tmp_path)
    assert "rewards/margins" in [value for _, value in runs_tab.metric_picker(caller, fresh, ["preferred"]).choices]
    log(preferred, {"event": "train", "step": 2, "loss": 0.6, "rewards/chosen": 0.2})
    fresh.rows()
    assert "rewards/chosen" in [value for _, value in runs_tab.metric_picker(caller, fresh, ["preferred"]).choices]


def runs_page(workspace: Path) -> tuple[gr.Blocks, RunsTab]:
    with gr.Blocks() as demo, gr.Tabs() as tabs:
        ctx = StudioContext(workspace, gr.State(None), tabs, visitor=gr.State(None))
        with gr.Tab("Runs", id="runs"):
            tab = RunsTab(ctx)
    return demo, tab


def call(demo: gr.Blocks, name: str, args: list[Any], lang: str | None = None) -> list[Any]:
    """Run one event the way the server does, for a page showing ``lang``."""
    fn = next(fn for fn in demo.fns.values() if fn.name == name)
    return asyncio.run(demo.process_api(fn, args, state=SessionState(demo), request=page_request(lang)))["data"]


def test_the_selection_event_updates_the_metric_picker(tmp_path: Path) -> None:
    preferred = write_run(tmp_path, "preferred", {"method": "dpo", "data": PREFERENCE}, time.time())
    log(preferred, {"event": "train", "step": 1, "loss": 0.7, "rewards/margins": 0.1})
    demo, tab = runs_page(tmp_path)
    tab.selected.choices = [("preferred", "preferred")]  # as the list's refresh has filled them
    [picker] = call(demo, "picked", [None, ["preferred"], "train loss"], "ko")
    assert ["rewards/margins" in choice for choice in picker["choices"]].count(True) == 1
    assert picker["choices"][0] == [text("chart.train_loss", "ko"), "train loss"]


def test_delete_asks_its_question_once(tmp_path: Path) -> None:
    for name in ("a", "b"):
        write_run(tmp_path, name, {})
    demo, tab = runs_page(tmp_path)
    tab.selected.choices = [("a", "a"), ("b", "b")]
    row, asked, message = call(demo, "ask_delete", [None, ["a", "b"]], "en")
    question = "Delete 2 runs with their checkpoints and results? This cannot be undone."
    assert row["visible"] is True and question in asked and message == ""
    # The confirmation row holds nothing else that asks: the page shows one question.
    static = [block for block in tab.confirm_row.children if isinstance(block, gr.HTML) and block is not tab.question]
    assert static == []
