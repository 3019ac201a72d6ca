"""The studio page: a header and three tabs (Train, Monitor, Runs) sharing the current run.

``build_app`` makes the Blocks; ``launch_options`` holds what Gradio 6 takes at ``launch()`` (theme, CSS).
The studio never trains: it writes run directories and talks to runs through ``engine.runs``, so a run
outlives a page refresh and a studio restart. Nothing here imports torch or the training libraries.
"""

from __future__ import annotations

import html
import importlib.util
from pathlib import Path
from typing import Any

import gradio as gr

from engine import runs
from engine.paths import PROJECT_ROOT
from studio.chat_tab import build_chat_tab
from studio.context import StudioContext
from studio.evaluate_tab import build_evaluate_tab
from studio.export_tab import build_export_tab
from studio.monitor_tab import build_monitor_tab
from studio.runs_api import register_api
from studio.runs_data import pick_initial_run
from studio.runs_tab import build_runs_tab

CSS_PATH = PROJECT_ROOT / "assets" / "studio.css"
TOOLS_CSS_PATH = PROJECT_ROOT / "assets" / "evaluate_export.css"
CHAT_CSS_PATH = PROJECT_ROOT / "assets" / "chat.css"
TITLE = "Tuning Studio"


def header_html(workspace: Path) -> str:
    """The slim bar at the top: name, what it does, and which workspace this studio serves."""
    return (
        '<div class="ts-header"><div class="ts-logo">TS</div><div>'
        f'<div class="ts-title">{TITLE}</div>'
        '<div class="ts-subtitle">Fine-tune language models with LoRA, QLoRA or full SFT, and watch them learn.</div>'
        f'</div><div class="ts-workspace">workspace<br><code>{html.escape(str(workspace))}</code></div></div>'
    )


def _build_train_tab(ctx: StudioContext) -> None:
    """The teammate's Train tab when its module exists; a pointer to the CLI until then.

    find_spec (rather than try/except ImportError) so that a real error inside the Train tab still surfaces.
    """
    if importlib.util.find_spec("studio.train_tab") is None:
        gr.Markdown(
            "### The training form is on its way\n"
            "Until it lands, start a run from a YAML file and watch it on the **Monitor** tab:\n\n"
            f"```bash\npython -m engine train assets/presets/demo.yaml --workspace {ctx.workspace}\n```"
        )
        return
    from studio.train_tab import build_train_tab

    build_train_tab(ctx)


def initial_view(workspace: Path, current: str | None) -> list[Any]:
    """On page load: keep the session's run, else pick the newest active (else newest) run; an active one
    brings the Monitor to the front, so a refresh during training lands back on its charts."""
    if current:
        return [gr.skip(), gr.skip()]
    chosen = pick_initial_run(workspace)
    if chosen and runs.is_active(runs.status(Path(chosen))):
        return [chosen, gr.Tabs(selected="monitor")]
    return [chosen, gr.skip()]


def build_app(workspace: Path) -> gr.Blocks:
    """The whole studio for one workspace (its runs live in ``workspace/runs``)."""
    workspace = Path(workspace).resolve()
    with gr.Blocks(title=TITLE, fill_width=True) as demo:
        gr.HTML(header_html(workspace), elem_classes="ts-html")
        register_api(workspace)  # first, so the public endpoints get their plain names
        current_run = gr.State(None)  # the run directory the Monitor shows, per browser tab
        with gr.Tabs(selected="train", elem_id="ts-tabs") as tabs:
            ctx = StudioContext(workspace=workspace, current_run=current_run, tabs=tabs)
            with gr.Tab("Train", id="train", elem_id="ts-tab-train"):
                _build_train_tab(ctx)
            with gr.Tab("Monitor", id="monitor", elem_id="ts-tab-monitor"):
                build_monitor_tab(ctx)
            with gr.Tab("Runs", id="runs", elem_id="ts-tab-runs"):
                build_runs_tab(ctx)
            with gr.Tab("Chat", id="chat", elem_id="ts-tab-chat"):
                build_chat_tab(ctx)
            with gr.Tab("Evaluate", id="evaluate", elem_id="ts-tab-evaluate"):
                build_evaluate_tab(ctx)
            with gr.Tab("Export", id="export", elem_id="ts-tab-export"):
                build_export_tab(ctx)
        demo.load(
            lambda current: initial_view(workspace, current),
            [current_run],
            [current_run, tabs],
            api_visibility="private",
        )
    return demo


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


def launch_options() -> dict[str, Any]:
    """What Gradio 6 takes at launch() rather than in Blocks(): theme and CSS."""
    return {"theme": theme(), "css_paths": [CSS_PATH, TOOLS_CSS_PATH, CHAT_CSS_PATH]}
