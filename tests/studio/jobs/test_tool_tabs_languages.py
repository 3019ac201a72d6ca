"""The Evaluate and Export tabs in the page's language: what their handlers answer to a page in Chinese comes from
the catalog's Chinese (cards, table headers and title, refusals, a job's progress and outcome, the weights' labels),
and a page that names no language gets English. No model and no job run here."""

from __future__ import annotations

import asyncio
import html
import json
from pathlib import Path
from typing import Any

import gradio as gr
from gradio.state_holder import SessionState
from starlette.requests import Request

from engine import runs
from engine.config import parse_config
from engine.runs.jobs import JobStatus
from engine.store.rundir import update_status
from engine.store.workspace import runs_dir
from studio.context import StudioContext
from studio.evaluate import cards, tables
from studio.evaluate import tab as evaluate_tab
from studio.export import tab as export_tab
from studio.i18n.catalog import text
from studio.jobs import view as jobs_view
from studio.markup import message_html
from tests.helpers.pages import page_request

ZH = "zh-CN"
RESULT = {  # an answers-scoring result of two rows, as engine.evaluate writes it
    "scoring": "answers",
    "data": {"choice": "eval", "rows": 2},
    "weights": "adapter",
    "seconds": 3,
    "created_at": 0,
    "base": {"eval_loss": 2.0, "perplexity": 7.39, "exact_match": 0.0},
    "tuned": {"eval_loss": 0.5, "perplexity": 1.65, "exact_match": 0.5},
    "predictions": [
        {"prompt": "p", "reference": "x", "base": "y", "tuned": "x", "base_correct": False, "tuned_correct": True},
        {"prompt": "q", "reference": "z", "base": "", "tuned": "q", "base_correct": False, "tuned_correct": False},
    ],
}


def handler(build: Any, workspace: Path, name: str, held: dict[str, Any] | None = None) -> Any:
    """A call of the tab's handler ``name`` as the server makes it: (inputs, request) -> outputs; ``held`` gives
    the tab's ``gr.State`` attributes their values (a State's value is the session's, not an input's)."""
    with gr.Blocks() as blocks:
        built = build(StudioContext(workspace, gr.State(None), gr.Tabs(), visitor=gr.State(None)))
    fn = next(fn for fn in blocks.fns.values() if fn.name == name)

    def call(inputs: list[Any], request: Request | None) -> list[Any]:
        state = SessionState(blocks)
        for attribute, value in (held or {}).items():
            state[getattr(built, attribute)._id] = value
        return asyncio.run(blocks.process_api(fn, inputs, state=state, request=request))["data"]

    return call


def test_evaluate_refuses_and_shows_a_result_in_the_language_of_the_page(tmp_path: Path) -> None:
    start = handler(evaluate_tab.build_evaluate_tab, tmp_path, "start_clicked")
    no_run = [None, None, None, "eval", "", 10]  # visitor, run, weights, data, path, max rows
    said = text(jobs_view.PICK_RUN, ZH)
    assert said != text(jobs_view.PICK_RUN, "en")
    assert start(no_run, page_request(ZH))[2] == message_html(said, "warn")
    assert start(no_run, None)[2] == message_html("Pick a run first.", "warn")

    filtered = handler(evaluate_tab.build_evaluate_tab, tmp_path, "filtered", {"result": RESULT})
    metrics, table, _ = filtered([None, RESULT, tables.FILTERS[0]], page_request(ZH))
    for card in ("eval_loss", "perplexity", "exact_match"):
        assert f"<span>{html.escape(text(cards.CARD[card], ZH))}</span>" in metrics
    assert f"<small>{text(cards.BASE, ZH)}</small>" in metrics
    assert text(cards.ROWS, ZH, where=text(cards.DATA_LABELS["eval"], ZH), rows=2) in metrics
    headers = ["#", *(text(tables.COLUMN_WORDS[name], ZH) for name in tables.PREDICTION_COLUMNS[1:])]
    assert table["value"]["headers"] == headers
    title, count = tables.LIST_TITLES["predictions"]
    shown = text(tables.COUNTED, ZH, title=text(title, ZH), count=text(count, ZH, shown=2, total=2))
    assert table["label"] == shown
    assert f"<i>{text(tables.EMPTY_ANSWER, ZH)}</i>" in json.dumps(table["value"], ensure_ascii=False)
    metrics, table, _ = filtered([None, RESULT, tables.FILTERS[0]], None)
    assert "<span>Eval loss</span>" in metrics and "eval set · 2 rows" in metrics
    assert table["value"]["headers"] == tables.PREDICTION_COLUMNS
    assert table["label"] == "Predictions vs references (2 of 2 rows)"


def test_export_cancel_answers_in_the_language_of_the_page(tmp_path: Path) -> None:
    cancel = handler(export_tab.build_export_tab, tmp_path, "cancel")
    said = text(jobs_view.OUTCOMES["export", "failed"], ZH, error="x")  # a key of the same kind, to compare with
    assert said != text(jobs_view.OUTCOMES["export", "failed"], "en", error="x")
    assert cancel([None, None], page_request(ZH))[0] == message_html(text("jobs.export.not_running", ZH), "warn")
    assert cancel([None, None], None)[0] == message_html("No export is running.", "warn")


def test_a_jobs_progress_and_outcome_are_said_in_the_language_of_the_page() -> None:
    running = JobStatus("job", "job", state="running", phase="tuned: eval loss", done=2, total=5)
    phase = text("jobs.phase.eval_loss", ZH, model=text(jobs_view.MODEL_WORDS["tuned"], ZH))
    assert html.escape(phase) in jobs_view.progress_html(running, "evaluation", ZH)
    assert "tuned: eval loss" in jobs_view.progress_html(running, "evaluation")
    merged = "loading the base model (bfloat16, un-quantized)"  # not "loading the {weights}"
    assert jobs_view.said_phase(merged, ZH) == text("jobs.phase.loading_base_dtype", ZH, dtype="bfloat16")
    assert jobs_view.said_phase("loading the adapter", ZH) == text("jobs.phase.loading_weights", ZH, weights="adapter")
    assert jobs_view.said_phase("a phase of a newer engine", ZH) == "a phase of a newer engine"
    failed = JobStatus("job", "job", state="failed", error="CUDA out of memory")
    said = text(jobs_view.OUTCOMES["export", "failed"], ZH, error="CUDA out of memory")  # the engine's error as is
    assert jobs_view.progress_html(failed, "export", ZH) == message_html(said, "error")
    assert "Export failed: CUDA out of memory" in jobs_view.progress_html(failed, "export")


def test_an_exports_result_and_a_runs_weights_are_said_in_the_language_of_the_page(tmp_path: Path) -> None:
    done = JobStatus(
        "job",
        "job",
        state="completed",
        result={"path": "/w/exports/a<b", "files": ["adapter_model.safetensors"], "zip": "/w/exports/a.zip"},
    )
    chinese = export_tab.result_html(done, ZH)
    saved = text(export_tab.SAVED, ZH, path="<code>/w/exports/a&lt;b</code>", files="adapter_model.safetensors")
    assert saved in chinese and text(export_tab.ZIP, ZH, name="<code>a.zip</code>") in chinese
    assert "Saved to <code>/w/exports/a&lt;b</code>: adapter_model.safetensors." in export_tab.result_html(done)

    run_dir = runs.create_run(parse_config({"name": "mine"}), run_dir=runs_dir(tmp_path) / "mine")
    (run_dir / "checkpoints" / "checkpoint-4").mkdir(parents=True)
    (run_dir / "checkpoints" / "checkpoint-4" / "trainer_state.json").write_text(json.dumps({"global_step": 4}))
    update_status(run_dir, state="paused", created_at=1.0)
    assert jobs_view.weight_choices(tmp_path, "mine", ZH) == [(text(jobs_view.CHECKPOINT_LABEL, ZH, step=4), "4")]
    assert jobs_view.weight_choices(tmp_path, "mine") == [("checkpoint 4", "4")]
