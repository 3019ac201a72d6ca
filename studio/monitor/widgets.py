"""The Monitor's components: the empty containers the page script (assets/live_charts.js) draws the charts, the
progress bar, the stats and the log into; the header, the run's control buttons and the Abort confirmation; the
config; and a sampling run's "Sample completions" section. Built by ``MonitorLayout``; studio.monitor.tab wires
them to their events.
"""

from __future__ import annotations

import html
from typing import Any

import gradio as gr

from studio.charts import LOSS_HEIGHT, SMALL_HEIGHT
from studio.context import StudioContext
from studio.i18n.widgets import marked, t
from studio.monitor.completions import (
    DEFAULT_SAMPLES,
    SHOW_CHOICES,
    SHOW_WORDS,
    TOTAL,
    TOTAL_WORD,
)
from studio.monitor.live import COMMON_CHARTS, METHOD_CHARTS

# Every Gradio event costs the browser's main thread 65 ms or more on a 2-core laptop (Gradio goes through the
# loading status of every output of the events the page has run: up to ~340 components here), 250 ms when it
# updates HTML panels. So what changes with every step goes through the page script, and the header and buttons
# are refreshed when their key changes: a timer that sent the event every second kept a quarter of a core busy
# in the browser while a run trained, and chart points waited behind it.
REFRESH_ID = "ts-monitor-refresh"  # the hidden button the page script clicks (assets/live_charts.js)
COMPLETIONS_POLL_SECONDS = 2.0  # samples arrive at logging steps; the panel's timer ticks only while it is open


def chart_html(name: str) -> str:
    """The empty container the page script draws chart ``name`` into."""
    return (
        f'<div class="ts-live-chart" data-live-chart="{html.escape(name)}" '
        f'style="min-height:{LOSS_HEIGHT if name == "loss" else SMALL_HEIGHT}px"></div>'
    )


def panel_html(name: str) -> str:
    """The empty container the page script puts panel ``name`` (progress or stats) into."""
    return f'<div data-live-panel="{html.escape(name)}"></div>'


class MonitorLayout:
    """The Monitor's components, kept so the tab can wire its events and the app page-load and cross-tab events to
    them."""

    def __init__(self, ctx: StudioContext):
        self.ctx = ctx
        self.session = gr.State(None)
        with gr.Row(elem_classes="ts-monitor-head", equal_height=False):
            with gr.Column(scale=3, elem_classes="ts-tight"):
                self.header = gr.HTML(elem_classes="ts-html")
                gr.HTML(panel_html("progress"), elem_classes="ts-html")
            with gr.Column(scale=2, min_width=560), gr.Row(elem_classes="ts-actions"):
                self.save = gr.Button(t("monitor.save"), variant="secondary", interactive=False, elem_id="ts-save")
                self.pause = gr.Button(t("monitor.pause"), variant="secondary", interactive=False, elem_id="ts-pause")
                self.go_on = gr.Button(
                    t("monitor.continue"), variant="primary", interactive=False, visible=False, elem_id="ts-continue"
                )
                self.stop = gr.Button(t("monitor.stop"), variant="secondary", interactive=False, elem_id="ts-stop")
                self.resume = gr.Button(t("monitor.resume"), variant="primary", interactive=False, elem_id="ts-resume")
                self.abort = gr.Button(t("monitor.abort"), variant="stop", interactive=False, elem_id="ts-abort")
        with gr.Row(visible=False, elem_classes="ts-confirm") as self.confirm_row:
            gr.HTML(t("monitor.abort_question"), scale=4)
            self.confirm = gr.Button(
                t("monitor.abort_yes"), variant="stop", elem_id="ts-abort-confirm", scale=0, min_width=140
            )
            self.cancel = gr.Button(t("monitor.abort_cancel"), elem_id="ts-abort-cancel", scale=0, min_width=120)
        self.error = gr.HTML(visible=False, elem_classes="ts-html")
        with gr.Row(equal_height=False):
            with gr.Column(scale=3, min_width=420):
                gr.HTML(chart_html("loss"), elem_id="ts-loss-chart", elem_classes="ts-chart")
            with gr.Column(scale=1, min_width=240, elem_classes="ts-side"):
                gr.HTML(panel_html("stats"), elem_classes="ts-html")
                # Read by the chart script in the page, not by the server; no event takes them as input, so
                # Gradio must be told they are interactive.
                self.smoothing = gr.Slider(
                    0,
                    0.99,
                    value=0.6,
                    step=0.01,
                    label=t("monitor.smoothing"),
                    elem_id="ts-smoothing",
                    interactive=True,
                )
                self.log_y = gr.Checkbox(False, label=t("monitor.log_scale"), elem_id="ts-log-y", interactive=True)
        with gr.Row():
            for name in COMMON_CHARTS:
                with gr.Column(min_width=260):
                    gr.HTML(chart_html(name), elem_id=f"ts-{name.replace('_', '-')}-chart", elem_classes="ts-chart")
        if METHOD_CHARTS:  # the page script shows those of the run's method and hides the others
            with gr.Row(elem_classes="ts-method-charts"):
                for name in METHOD_CHARTS:
                    with gr.Column(min_width=260, elem_classes="ts-method-chart"):
                        gr.HTML(chart_html(name), elem_classes="ts-chart")
        self._build_completions()
        with gr.Accordion("train.log", open=False):
            gr.HTML('<pre class="ts-log" data-live-log></pre>', elem_classes="ts-html")
        with gr.Accordion("config.yaml", open=False):
            self.config = gr.Code(language="yaml", show_label=False, interactive=False)
        self.refresh = gr.Button(visible="hidden", elem_id=REFRESH_ID)  # in the page, so a script can click it

    def _build_completions(self) -> None:
        """The "Sample completions" section of a GRPO run (hidden for other methods until a run shows it)."""
        self.completions_panel = gr.State(None)
        with gr.Accordion(t("monitor.completions"), open=False, visible=False, elem_id="ts-completions") as accordion:
            self.completions = accordion
            with gr.Row():
                self.completions_reward = gr.Dropdown(
                    [(marked(TOTAL_WORD), TOTAL)],
                    value=TOTAL,
                    label=t("monitor.completions.reward"),
                    elem_id="ts-completions-reward",
                )
                self.completions_show = gr.Dropdown(
                    [(marked(SHOW_WORDS[show]), show) for show in SHOW_CHOICES],
                    value=SHOW_CHOICES[0],
                    label=t("monitor.completions.show"),
                    elem_id="ts-completions-show",
                )
                self.completions_count = gr.Number(
                    # No minimum / maximum: Gradio would refuse a value past them in English; the count is clamped
                    # to 1..READ_LIMIT where it is read (studio.monitor.completions).
                    DEFAULT_SAMPLES,
                    label=t("monitor.completions.samples"),
                    precision=0,
                )
            self.completions_table = gr.HTML(elem_id="ts-completions-table", elem_classes="ts-html")
        self.completions_timer = gr.Timer(COMPLETIONS_POLL_SECONDS, active=False)
        filters = [self.completions_reward, self.completions_show, self.completions_count]
        # What ``completions_refresh`` takes after the caller and the run: the panel state, the filters.
        self.completions_inputs = [self.completions_panel, *filters]

    @property
    def completions_outputs(self) -> list[Any]:
        """The components studio.monitor.tab.completions_refresh returns values for."""
        return [
            self.completions_panel,
            self.completions,
            self.completions_reward,
            self.completions_table,
            self.completions_timer,
        ]

    @property
    def outputs(self) -> list[Any]:
        """The components studio.monitor.tab.refresh returns values for (after the session state)."""
        return [
            self.session,
            self.header,
            self.error,
            self.config,
            self.save,
            self.pause,
            self.go_on,
            self.stop,
            self.resume,
            self.abort,
        ]
