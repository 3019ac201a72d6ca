"""The studio page: a header and seven tabs (Train, Monitor, Runs, Sweeps, Chat, Evaluate, Export) sharing the
current run.

``build_app`` makes the Blocks; ``launch_options`` holds what Gradio 6 takes at ``launch()`` (theme, CSS, the
live charts' script and routes).
The studio never trains: it writes run directories and talks to runs through ``engine.runs``, so a run
outlives a page refresh and a studio restart. Nothing here imports torch or the training libraries.
"""

from __future__ import annotations

import functools
import html
import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import gradio as gr
from starlette.middleware import Middleware

from engine.api import runs
from studio.chat.tab import build_chat_tab
from studio.context import StudioContext
from studio.demo.caller import Caller
from studio.demo.identity import client_address
from studio.demo.ownership import owns
from studio.demo.policy import MB, NORMAL, VISITOR_STORAGE_KEY, DemoPolicy
from studio.demo.retention import ensure_retention
from studio.demo.sent_budget import SentBudget
from studio.evaluate.tab import build_evaluate_tab
from studio.export.tab import build_export_tab
from studio.i18n import catalog
from studio.i18n.catalog import key, text
from studio.i18n.widgets import head_script, i18n, language_picker, marked, t, wire_language_picker
from studio.monitor.routes import live_routes
from studio.monitor.tab import build_monitor_tab
from studio.page_prelude import PagePrelude
from studio.path_guard import ASSETS_DIR, confine_images
from studio.queue.scheduler import ensure_scheduler
from studio.runs import api
from studio.runs.data import pick_initial_run
from studio.runs.tab import build_runs_tab
from studio.sweeps.tab import build_sweeps_tab
from studio.train.tab import build_train_tab

CSS_PATH = ASSETS_DIR / "studio.css"
TOOLS_CSS_PATH = ASSETS_DIR / "evaluate_export.css"
CHAT_CSS_PATH = ASSETS_DIR / "chat.css"
LIVE_CHARTS_JS = ASSETS_DIR / "live_charts.js"
TRACKER_PACING_JS = ASSETS_DIR / "tracker_pacing.js"
TITLE = "Tuning Studio"
WORKSPACE, DEMO, DEMO_MODEL, DEMO_STEPS, DEMO_RULES, DEMO_KEPT = (
    key(f"header.{name}") for name in ("workspace", "demo", "demo_model", "demo_steps", "demo_rules", "demo_kept")
)
F = TypeVar("F", bound=Callable[..., Any])
# Gradio keeps every upload (a visitor's dataset before the studio copies it to their folder, or one that no event
# ever names) in its cache; every UPLOADS_SWEEP_S it deletes those older than UPLOADS_MAX_AGE_S, so an upload that
# nobody owns stays at most their sum: 55 minutes, under the hour a public demo promises.
UPLOADS_SWEEP_S, UPLOADS_MAX_AGE_S = 300, 3000


def header_html(workspace: Path, policy: DemoPolicy = NORMAL, lang: str = catalog.SOURCE) -> str:
    """The right of the slim bar at the top, in ``lang``: which workspace this studio serves (in demo mode the
    demo's rules instead: a visitor has no use for a server path)."""
    if policy.enabled:
        kept = text(DEMO_KEPT, lang, days=f"{policy.keep_days:g}")  # studio.demo.retention
        where = (
            f"<b>{html.escape(text(DEMO, lang))}</b> · {html.escape(text(DEMO_MODEL, lang))} · "
            f"{html.escape(text(DEMO_STEPS, lang, steps=policy.max_steps))}<br>{html.escape(text(DEMO_RULES, lang))}"
            f"<br>{html.escape(kept)}"
        )
    else:
        where = f"{html.escape(text(WORKSPACE, lang))}<br><code>{html.escape(str(workspace))}</code>"
    return f'<div class="ts-workspace">{where}</div>'


def brand_html() -> str:
    """The left of the bar: the name and what it does (translated by the page)."""
    return (
        '<div class="ts-header"><div class="ts-logo">TS</div><div>'
        f'<div class="ts-title">{TITLE}</div><div class="ts-subtitle">{marked("header.subtitle")}</div></div></div>'
    )


def initial_view(
    workspace: Path, current: str | None, policy: DemoPolicy = NORMAL, visitor: str | None = None, client: str = ""
) -> list[Any]:
    """On page load: the visitor token (a new one, signed here, for a page without a valid one in demo mode, as
    long as ``client``'s address has not had its share); keep the session's run, else pick the newest active
    (else newest) run the visitor may see; an active or queued one brings the Monitor to the front, so a refresh
    during training lands back on its charts."""
    visitor_out: Any = gr.skip()
    if policy.enabled and policy.visitor(visitor) is None:
        visitor = visitor_out = policy.new_visitor(client)  # None past the limit: the page then starts nothing
    if current:
        return [gr.skip(), gr.skip(), visitor_out]
    chosen = pick_initial_run(workspace, lambda status: owns(policy, status.owner, visitor))
    if chosen and runs.status(Path(chosen)).is_open:
        return [chosen, gr.Tabs(selected="monitor"), visitor_out]
    return [chosen, gr.skip(), visitor_out]


def request_client(request: gr.Request | None, policy: DemoPolicy) -> str:
    """The address a page's request comes from, as the policy counts new visitors (its trusted proxy hops)."""
    if request is None:
        return ""
    peer = request.client.host if request.client else None
    return client_address(peer, dict(request.headers or {}), policy.proxy_hops)


def build_app(workspace: Path, policy: DemoPolicy = NORMAL) -> gr.Blocks:
    """The whole studio for one workspace (its runs live in ``workspace/runs``); ``policy`` turns on demo mode
    (studio.demo.policy), which also starts the queue's scheduler thread."""
    workspace = Path(workspace).resolve()
    policy = policy.bound_to(workspace)  # its key signs and checks visitor tokens
    confine_images(workspace, policy.enabled)
    with gr.Blocks(title=TITLE, fill_width=True, delete_cache=(UPLOADS_SWEEP_S, UPLOADS_MAX_AGE_S)) as demo:
        with gr.Row(elem_classes="ts-header-row", equal_height=True):
            gr.HTML(brand_html(), elem_classes="ts-html", scale=1)
            where = gr.HTML(header_html(workspace, policy), elem_classes="ts-html", scale=0, min_width=240)
            picker = language_picker()
        if not policy.enabled:  # the API takes run ids with no visitor behind them: not for a public demo
            register_api(workspace)  # first, so the public endpoints get their plain names
        current_run = gr.State(None)  # the run directory the Monitor shows, per browser tab
        visitor = _visitor_component(policy)
        with gr.Tabs(selected="train", elem_id="ts-tabs") as tabs:
            ctx = StudioContext(workspace, current_run, tabs, policy, visitor)
            with gr.Tab(t("tab.train"), id="train", elem_id="ts-tab-train"):
                ctx.train_form = build_train_tab(ctx)
            with gr.Tab(t("tab.monitor"), id="monitor", elem_id="ts-tab-monitor"):
                build_monitor_tab(ctx)
            with gr.Tab(t("tab.runs"), id="runs", elem_id="ts-tab-runs") as tab:
                build_runs_tab(replace(ctx, opened=tab))
            with gr.Tab(t("tab.sweeps"), id="sweeps", elem_id="ts-tab-sweeps") as tab:
                build_sweeps_tab(replace(ctx, opened=tab))
            with gr.Tab(t("tab.chat"), id="chat", elem_id="ts-tab-chat") as tab:
                build_chat_tab(replace(ctx, opened=tab))
            with gr.Tab(t("tab.evaluate"), id="evaluate", elem_id="ts-tab-evaluate") as tab:
                build_evaluate_tab(replace(ctx, opened=tab))
            with gr.Tab(t("tab.export"), id="export", elem_id="ts-tab-export") as tab:
                build_export_tab(replace(ctx, opened=tab))
        # The header's text composed here follows the page's language: on load, and at once on a pick.
        wire_language_picker(picker, [where], lambda lang: header_html(workspace, policy, lang))

        def where_for(caller: Caller) -> str:
            return header_html(workspace, policy, caller.language)

        gr.on(
            None,
            ctx.handler(where_for),
            ctx.inputs(),
            where,
            show_progress="hidden",
            api_visibility="private",
            concurrency_limit=None,  # a few strings: microseconds
        )

        def on_load(current: str | None, visitor_id: str | None, request: gr.Request) -> list[Any]:
            return initial_view(workspace, current, policy, visitor_id, request_client(request, policy))

        demo.load(
            on_load,
            [current_run, visitor],
            [current_run, tabs, visitor],
            api_visibility="private",
        )
    # Queued runs start by themselves as their devices free up, in every mode (engine.runs.queue).
    ensure_scheduler(workspace)
    ensure_retention(workspace, policy)  # demo mode: what visitors left alone for a week goes
    return demo


def register_api(workspace: Path) -> None:
    """Publish the HTTP API's endpoints (studio.runs.api) inside the current ``gr.Blocks``."""
    for fn in api.endpoints(workspace):
        gr.api(_explained(fn), api_name=fn.__name__)


def _explained(fn: F) -> F:
    """Turn a RunError into gr.Error, whose message reaches the caller (other errors stay hidden)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except runs.RunError as exc:
            raise gr.Error(str(exc)) from None

    return wrapper  # type: ignore[return-value]


def _visitor_component(policy: DemoPolicy) -> Any:
    """Who is looking: in demo mode the visitor's token kept in the browser, so it survives a refresh and, with
    the signing key kept in the workspace, a studio restart; otherwise nobody in particular."""
    if not policy.enabled:
        return gr.State(None)
    return gr.BrowserState(None, storage_key=VISITOR_STORAGE_KEY, secret=policy.storage_secret)


def theme() -> gr.themes.Base:
    """A calm indigo theme on system fonts (nothing fetched from the network, so it works offline)."""
    return gr.themes.Soft(
        primary_hue="indigo",
        secondary_hue="cyan",
        neutral_hue="slate",
        radius_size="md",
        font=["Inter", "ui-sans-serif", "system-ui", "-apple-system", "Segoe UI", "Roboto", "sans-serif"],
        font_mono=["JetBrains Mono", "ui-monospace", "SFMono-Regular", "Menlo", "Consolas", "monospace"],
    ).set(body_background_fill="#f8fafc", block_radius="10px")


def launch_options(workspace: Path, policy: DemoPolicy = NORMAL) -> dict[str, Any]:
    """What Gradio 6 takes at launch() rather than in Blocks(): theme, CSS, the words of every language
    (studio.i18n) and the page script that picks one, the live charts' page script, the plain HTTP routes it
    reads (studio.monitor.routes) for ``workspace``'s runs, its middleware, and the largest upload (the demo's cap
    in demo mode, ``max_upload_mb`` of the studio otherwise), which Gradio refuses before storing."""
    script = LIVE_CHARTS_JS.read_text(encoding="utf-8")
    trust_no_forwarded_headers()
    return {
        "max_file_size": int(policy.upload_limit_mb * MB),
        "theme": theme(),
        "css_paths": [CSS_PATH, TOOLS_CSS_PATH, CHAT_CSS_PATH],
        "head": head_script() + f"<script>{script}</script>",
        "i18n": i18n(),
        "app_kwargs": {"routes": live_routes(Path(workspace).resolve(), policy), "middleware": middleware(policy)},
    }


# Gradio's queue looks for a new event every 1 ms while it has none, and for progress to send every 10 ms (on
# Windows every 50 and 100 ms): about 1,100 wake-ups a second of the server's event loop, all day. An idle studio with
# no page open spent 0.71 CPU-seconds every 10 s with that pace and 0.41 with this one (python
# benchmarks/studio_idle_cpu.py: 0.57 of the medians, 3 rounds), CPU a training run on the same machine could use.
# The queue has no setting for it: these are its own attributes. An event waits at most 20 ms longer to start; a
# progress update at most 50 ms.
QUEUE_IDLE_POLL_S = 0.02
PROGRESS_IDLE_POLL_S = 0.05


def paced_queue(demo: gr.Blocks) -> gr.Blocks:
    """``demo`` with Gradio's queue enabled (``Blocks.queue()``) and its idle polling slowed to the studio's pace."""
    queue = demo.queue()._queue
    paces = {"sleep_when_free": QUEUE_IDLE_POLL_S, "progress_update_sleep_when_free": PROGRESS_IDLE_POLL_S}
    for name, pace in paces.items():
        if hasattr(queue, name):  # a Gradio that renamed them keeps its own pace (tests/studio/test_paced_queue.py)
            setattr(queue, name, max(getattr(queue, name), pace))
    return demo


def middleware(policy: DemoPolicy) -> list[Middleware]:
    """The studio's own ASGI middleware: the page scripts that run before Gradio's (studio.page_prelude), and in
    demo mode the cap on the bytes one address sends an hour."""
    prelude = Middleware(PagePrelude, scripts=[TRACKER_PACING_JS.read_text(encoding="utf-8")])
    return [prelude, Middleware(SentBudget, policy=policy)] if policy.enabled else [prelude]


def trust_no_forwarded_headers() -> None:
    """Keep uvicorn from taking the client's address from ``X-Forwarded-For``.

    uvicorn trusts that header from loopback by default (FORWARDED_ALLOW_IPS, read when Gradio makes its server)
    and rewrites the request's client before the studio sees it: a client on the same machine, or behind a local
    reverse proxy, could then name any address and get new visitor tokens past the per-address limit. The studio
    reads the header itself, as far as ``DemoPolicy.proxy_hops`` trusted proxies reach (studio.demo.identity).
    An empty list of trusted hosts is the only value that trusts none; ``--forwarded-allow-ips`` has no other.
    """
    os.environ["FORWARDED_ALLOW_IPS"] = ""
