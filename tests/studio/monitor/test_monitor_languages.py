"""The Monitor in the page's language: the header and error box its timer sends, the progress line, the stats cards
and the charts the live route sends, each in the language of the page that asks (its ts_lang cookie, else its
Accept-Language), and English for a page that names none."""

from __future__ import annotations

import asyncio
import html
import time
from pathlib import Path
from typing import Any

import gradio as gr
from fastapi import FastAPI
from gradio.state_holder import SessionState
from starlette.testclient import TestClient

from engine.config import RunConfig, save_config
from engine.store.rundir import update_status
from studio.context import StudioContext
from studio.i18n.catalog import text
from studio.monitor.live import live_token
from studio.monitor.routes import CHARTS_PATH, live_routes
from studio.monitor.tab import MonitorTab
from tests.helpers.pages import page_request


def write_run(workspace: Path, name: str = "run", **status: Any) -> Path:
    run_dir = workspace / "runs" / name
    run_dir.mkdir(parents=True)
    save_config(RunConfig(name=name), run_dir / "config.yaml")
    update_status(run_dir, name=name, created_at=time.time(), **status)
    return run_dir


def poll(run_dir: Path, lang: str | None) -> list[Any]:
    """The Monitor's timer tick, run as the server runs it for a page (no cookie: a page that names no language)."""
    with gr.Blocks() as demo, gr.Tabs() as tabs:
        ctx = StudioContext(run_dir.parent.parent, gr.State(None), tabs, visitor=gr.State(None))
        with gr.Tab("Monitor", id="monitor"):
            MonitorTab(ctx)
    state = SessionState(demo)
    state[ctx.current_run._id] = str(run_dir)
    fn = next(fn for fn in demo.fns.values() if fn.name == "refresh")
    request = page_request(lang) if lang else None
    return asyncio.run(demo.process_api(fn, [None, str(run_dir), None], state=state, request=request))["data"]


def test_the_monitor_says_a_failed_run_in_the_language_of_the_page(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path, state="failed", error="CUDA out of memory", exit_code=1)
    _, header, error, *_ = poll(run_dir, "zh-CN")
    assert f">{text('state.failed', 'zh-CN')}<" in header
    exit_note = text("monitor.exit_code", "zh-CN", code=1)
    title = text("monitor.failed", "zh-CN", exit=exit_note, error="CUDA out of memory")  # the engine's error as is
    assert title != text("monitor.failed", "en", exit=exit_note, error="CUDA out of memory")
    assert html.escape(title) in error["value"] and html.escape(text("monitor.hint_new", "zh-CN")) in error["value"]
    _, header, error, *_ = poll(run_dir, None)
    assert ">failed<" in header and "Run failed (exit code 1): CUDA out of memory" in error["value"]
    assert "There is no checkpoint to resume from" in error["value"]


def test_the_live_charts_route_answers_in_the_language_of_the_page(tmp_path: Path) -> None:
    """Plain HTTP, not a Gradio event: the route reads the page's ts_lang cookie, else its Accept-Language."""
    run_dir = write_run(tmp_path, state="stopped", step=4, max_steps=10, epoch=0.5)
    app = FastAPI(routes=live_routes(tmp_path))
    app.auth = app.auth_dependency = None  # as Gradio's app without --auth
    client = TestClient(app)
    query = {"run": live_token(run_dir), "charts": "loss,learning_rate"}

    def answer(lang: str, **headers: str) -> dict[str, Any]:
        client.cookies.clear()
        if lang:
            client.cookies.set("ts_lang", lang)
        response = client.get(CHARTS_PATH, params=query, headers=headers)
        assert response.status_code == 200
        return response.json()

    for lang, headers in (("ja", {}), ("", {"accept-language": "ko-KR,ko;q=0.9"}), ("", {})):
        said = lang or ("ko" if headers else "en")
        got = answer(lang, **headers)
        assert got["figures"]["loss"]["layout"]["title"]["text"] == text("chart.loss", said)
        assert got["figures"]["learning_rate"]["layout"]["xaxis"]["title"]["text"] == text("chart.step", said)
        assert f"<b>{html.escape(text('progress.step', said, step=4))}</b> / 10" in got["panels"]["progress"]
        assert html.escape(text("progress.epoch", said, epoch="0.50")) in got["panels"]["progress"]
        assert f"<span>{html.escape(text('stats.best_loss', said))}</span>" in got["panels"]["stats"]
    assert text("chart.loss", "ja") != "Loss" and "<b>step 4</b> / 10" in answer("")["panels"]["progress"]


def test_a_pruned_trials_reason_is_said_in_the_pages_language() -> None:
    from engine.store.rundir import RunStatus
    from engine.sweeps.summary import PRUNE_REASONS
    from studio.i18n.catalog import text
    from studio.monitor.view import run_note

    values = {"step": "20", "metric": "eval_loss", "value": "2.31"}
    for kind, extra in (("median", {"median": "1.9"}), ("median_unknown", {}), ("halving", {"factor": "3"})):
        reason = PRUNE_REASONS[kind].format(**values, **extra)
        status = RunStatus(state="pruned", error=reason)
        said = run_note(status, lang="zh-CN")
        assert said == text(f"sweep.pruned.{kind}", "zh-CN", **values, **extra) != reason
        assert all(value in said for value in (*values.values(), *extra.values()))
        assert run_note(status) == reason  # English as the driver wrote it
    assert run_note(RunStatus(state="pruned", error="stopped by hand"), lang="ja") == "stopped by hand"
