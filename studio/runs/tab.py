"""The Runs tab: every run of the workspace, open one in the Monitor, compare several, delete finished ones.

Clicking a row opens that run in the Monitor (sets the shared current run and switches tab). The runs picked
in "Selected runs" are compared (overlaid curves of the metric picked beside Compare: train or eval loss or one
of the methods' own metrics; and the config fields that differ) or deleted, after a confirmation, and never
while one of them is still going.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

import gradio as gr
import pandas as pd
from gradio.components.plot import PlotData

from engine.api import ACTIVE_STATES, runs
from studio import charts
from studio.charts import Figure
from studio.context import StudioContext
from studio.demo.caller import Caller
from studio.i18n.catalog import key, text
from studio.i18n.widgets import marked, t
from studio.markup import badge_html, message_html
from studio.path_guard import resolve_run
from studio.runs.continuation import continue_values
from studio.runs.data import (
    CHOICE_WORDS,
    COLUMNS,
    EVAL_LOSS,
    STATE_COLUMN,
    TRAIN_LOSS,
    RunIndex,
    choice_labels,
    columns,
    compare_curves,
    config_diff,
    delete_run,
    metric_words,
    read_config,
)

REFRESH_SECONDS = 2.0
# The words the server composes (studio.i18n), said in the page's language.
ONE_RUN, MANY_RUNS, RUNNING, NO_RUNS, HINT_OPEN, HINT_START = (
    key(f"runs.{name}") for name in ("count_one", "count_many", "running", "none", "hint_open", "hint_start")
)
FIELD, NO_DIFFERENCES = key("runs.diff.field"), key("runs.diff.none")
PICK_FIRST, BUSY, CONFIRM_ONE, CONFIRM_MANY = (
    key(f"runs.delete.{name}") for name in ("pick_first", "busy", "confirm_one", "confirm_many")
)
DELETED_ONE, DELETED_MANY = key("runs.deleted_one"), key("runs.deleted_many")


def as_plot(figure: Figure) -> PlotData:
    """A figure dict as gr.Plot's payload: JSON that plotly.js draws, without importing plotly.py."""
    return PlotData(type="plotly", plot=json.dumps(figure))


def list_view(
    index: RunIndex,
    previous: Any,
    selected: list[str] | None,
    caller: Caller,
) -> list[Any]:
    """The table, the picker's choices and the summary line, their words in the caller's language; gr.skip() for
    each one that did not change.

    Only the visitor's runs in demo mode. The picker is only updated when the set of runs changes, so a refresh
    never disturbs someone choosing.
    """
    lang = caller.language
    rows = [row for row in index.rows() if caller.owns(row.owner)]
    cells = [row.cells(lang=lang) for row in rows]
    choices = [(f"{row.name} · {row.run_id}", row.run_id) for row in rows]
    shown = {"cells": [tuple(c) for c in cells], "choices": choices, "lang": lang}
    previous = previous or {}
    if shown == previous:
        return [previous, gr.skip(), gr.skip(), gr.skip()]
    picker: Any = gr.skip()
    if choices != previous.get("choices"):
        ids = {row.run_id for row in rows}
        kept = [run_id for run_id in (selected or []) if run_id in ids]
        picker = gr.Dropdown(choices=choices, value=kept or None)  # None, not []: Gradio warns on an empty list
    running = sum(row.state in ACTIVE_STATES for row in rows)
    summary = text(ONE_RUN, lang) if len(rows) == 1 else text(MANY_RUNS, lang, count=len(rows))
    if running:
        summary += " · " + text(RUNNING, lang, count=running)
    hint = text(HINT_OPEN if rows else HINT_START, lang)
    if not rows:
        summary = text(NO_RUNS, lang)
    for row, cell in zip(rows, cells, strict=True):
        # the Monitor's coloured badge; a pruned run's reason on hover
        cell[STATE_COLUMN] = badge_html(cell[STATE_COLUMN], row.note, lang)
    return [
        shown,
        pd.DataFrame(cells, columns=columns(lang)),
        picker,
        f'<div class="ts-summary">{html.escape(summary)} <span class="ts-hint">— {html.escape(hint)}</span></div>',
    ]


def open_run(caller: Caller, run_id: str) -> list[Any]:
    """The current run and the tab switch for a clicked row."""
    try:
        run_dir = caller.run(run_id)
    except runs.RunError as exc:
        gr.Warning(caller.shown(str(exc)))
        return [gr.skip(), gr.skip()]
    return [str(run_dir), gr.Tabs(selected="monitor")]


def compare_outputs(caller: Caller, run_ids: list[str] | None, smoothing: float, metric: str = TRAIN_LOSS) -> list[Any]:
    """Overlaid curves of ``metric``, the table of config fields that differ between the picked runs (in demo
    mode the data paths as the visitor knows them: ``mine.jsonl``) and the Metric picker with the metrics the
    runs logged (its choice kept while one of them has it, else train loss); their words in the caller's
    language."""
    lang = caller.language
    run_dirs, configs = {}, {}
    for run_id in run_ids or []:
        try:
            run_dir = caller.run(run_id)
        except runs.RunError:
            continue
        config = read_config(run_dir)
        label = _unique(f"{config.get('name') or run_id}", configs)
        run_dirs[label], configs[label] = run_dir, config
    comparison = compare_curves(run_dirs, metric)
    chart = comparison.chart
    title, unit = metric_words(comparison.metric, chart, lang)
    figure = charts.compare_figure(
        comparison.curves, smoothing, title=title, y_title=unit, sparse=chart.sparse, lang=lang
    )
    headers, rows = config_diff(configs) if len(configs) > 1 else (["field"], [])
    headers = [text(FIELD, lang), *headers[1:]]
    if len(configs) > 1 and not rows:
        rows = [[text(NO_DIFFERENCES, lang), *([""] * len(configs))]]
    return [
        as_plot(figure),
        pd.DataFrame(caller.shown(rows), columns=headers),
        gr.Dropdown(choices=choice_labels(comparison.choices, lang), value=comparison.metric),
    ]


def metric_picker(caller: Caller, index: RunIndex, run_ids: list[str] | None, metric: str = TRAIN_LOSS) -> Any:
    """The Metric picker as runs are picked, before Compare is pressed: train and eval loss and the method metrics
    the picked runs logged (what Compare would offer, from what ``index`` has read), its choice kept while it is
    offered, else train loss; in the caller's language."""
    run_dirs = []
    for run_id in run_ids or []:
        try:
            run_dirs.append(caller.run(run_id))
        except runs.RunError:
            continue
    choices = index.metric_choices(run_dirs)
    value = metric if metric in {value for _, value in choices} else TRAIN_LOSS
    return gr.Dropdown(choices=choice_labels(choices, caller.language), value=value)


def _unique(label: str, taken: dict[str, Any]) -> str:
    """Two runs may share a name; the legend and the table need distinct labels."""
    candidate, n = label, 2
    while candidate in taken:
        candidate, n = f"{label} ({n})", n + 1
    return candidate


def ask_delete(caller: Caller, run_ids: list[str] | None) -> list[Any]:
    """The confirmation row with its one question (how many runs go, with what), or a refusal at once when nothing
    is picked or a picked run is going (in the caller's language): [the row, its question, the message line]."""
    workspace, lang = caller.workspace, caller.language
    if not run_ids:
        return [gr.Row(visible=False), gr.skip(), message_html(text(PICK_FIRST, lang), "warn")]
    busy = _active(workspace, run_ids)
    if busy:
        return [gr.Row(visible=False), gr.skip(), message_html(text(BUSY, lang, runs=", ".join(busy)), "error")]
    question = text(CONFIRM_ONE, lang) if len(run_ids) == 1 else text(CONFIRM_MANY, lang, count=len(run_ids))
    return [gr.Row(visible=True), f"<b>{html.escape(question)}</b>", ""]


def delete_runs(caller: Caller, run_ids: list[str] | None) -> list[Any]:
    """Delete the picked runs (each refused while active, or not the visitor's: the engine's reasons, in English);
    hides the confirmation and says what happened (in the caller's language)."""
    deleted, refused = [], []
    lang = caller.language
    for run_id in run_ids or []:
        try:
            caller.run(run_id)
            delete_run(caller.workspace, run_id)
            deleted.append(run_id)
        except runs.RunError as exc:
            refused.append(str(exc))
    done = text(DELETED_ONE, lang) if len(deleted) == 1 else text(DELETED_MANY, lang, count=len(deleted))
    parts = [done] if deleted else []
    parts += refused
    said = caller.shown(" ".join(parts))
    return [gr.Row(visible=False), message_html(said, "error" if refused else "ok"), []]


def _active(workspace: Path, run_ids: list[str]) -> list[str]:
    busy = []
    for run_id in run_ids:
        try:
            if runs.status(resolve_run(workspace, run_id)).is_active:
                busy.append(run_id)
        except runs.RunError:
            continue
    return busy


class RunsTab:
    """The Runs tab's components and events."""

    def __init__(self, ctx: StudioContext):
        self.ctx = ctx
        workspace = ctx.workspace
        self.index = RunIndex(workspace)  # one per app: shared by every page's refresh
        self.last_key = gr.State(None)
        with gr.Row(equal_height=True, elem_classes="ts-runs-head"):
            self.summary = gr.HTML(elem_classes="ts-html", scale=4)
            self.refresh = gr.Button(t("runs.refresh"), size="sm", scale=0, min_width=110, elem_id="ts-runs-refresh")
        self.table = gr.Dataframe(
            value=pd.DataFrame(columns=COLUMNS),
            datatype=["str", "str", "html", "str", "number", "number", "str", "str", "str", "str"],
            interactive=False,
            max_height=300,
            show_label=False,
            # A cell wraps rather than cut its end: a resumed run's duration and a run id are long.
            wrap=True,
            column_widths=["13%", "6%", "9%", "6%", "6%", "6%", "9%", "9%", "17%", "19%"],
            elem_id="ts-runs-table",
        )
        with gr.Row(equal_height=False, elem_classes="ts-pick-row"):
            self.selected = gr.Dropdown(
                choices=[], multiselect=True, label=t("runs.selected"), scale=4, elem_id="ts-runs-selected"
            )
            self.metric = gr.Dropdown(
                choices=[(marked(CHOICE_WORDS[loss]), loss) for loss in (TRAIN_LOSS, EVAL_LOSS)],
                value=TRAIN_LOSS,
                label=t("runs.metric"),
                scale=1,
                min_width=180,
                elem_id="ts-compare-metric",
            )
            # Fills the Train form (ctx.train_form); not in the demo, where every run starts from the demo model.
            can_continue = ctx.train_form is not None and ctx.tabs is not None and not ctx.policy.enabled
            # Room for the three buttons on one line each (studio.css keeps their words on one line).
            with gr.Column(scale=0, min_width=490 if can_continue else 230), gr.Row(elem_classes="ts-actions"):
                self.compare = gr.Button(t("runs.compare"), variant="primary", elem_id="ts-compare")
                self.delete = gr.Button(t("runs.delete"), variant="stop", elem_id="ts-delete")
                self.continue_from = gr.Button(t("runs.continue"), visible=can_continue, elem_id="ts-runs-continue")
        with gr.Row(visible=False, elem_classes="ts-confirm") as self.confirm_row:
            # The one question Delete asks (how many runs go), set when it is asked.
            self.question = gr.HTML(scale=4, elem_id="ts-delete-question")
            self.confirm = gr.Button(
                t("runs.delete.yes"), variant="stop", elem_id="ts-delete-confirm", scale=0, min_width=140
            )
            self.cancel = gr.Button(t("runs.delete.cancel"), elem_id="ts-delete-cancel", scale=0, min_width=120)
        self.message = gr.HTML(elem_classes="ts-html")
        with gr.Row():
            with gr.Column(scale=3):
                self.compare_plot = gr.Plot(
                    as_plot(charts.compare_figure({})),
                    show_label=False,
                    elem_classes="ts-chart",
                    elem_id="ts-compare-chart",
                )
            with gr.Column(scale=2):
                self.smoothing = gr.Slider(0, 0.99, value=0.6, step=0.01, label=t("runs.smoothing"))
                self.diff = gr.Dataframe(
                    value=pd.DataFrame(columns=["field"]),
                    label=t("runs.diff"),
                    interactive=False,
                    max_height=300,
                    elem_id="ts-diff",
                )
        self.timer = gr.Timer(REFRESH_SECONDS)
        self._wire(workspace)

    def _wire(self, workspace: Path) -> None:
        private: dict[str, Any] = {"api_visibility": "private"}
        ctx = self.ctx

        # Each handler says its words in the page's language (the caller's: the ts_lang cookie); the list's key
        # holds the language, so a page that switched gets the table again at the next tick.
        def list_fn(caller: Caller, previous: Any, selected: list[str] | None) -> list[Any]:
            return list_view(self.index, previous, selected, caller)

        def relist_fn(caller: Caller, _previous: Any, selected: list[str] | None) -> list[Any]:
            return list_view(self.index, None, selected, caller)

        listing = {
            "fn": ctx.handler(list_fn),
            "inputs": ctx.inputs(self.last_key, self.selected),
            "outputs": [self.last_key, self.table, self.selected, self.summary],
            "show_progress": "hidden",
            **private,
        }
        self.timer.tick(**listing, concurrency_limit=None)
        relist = {**listing, "fn": ctx.handler(relist_fn)}
        self.refresh.click(**relist)
        if (on_open := ctx.on_open()) is not None:  # a table updated while hidden may not show it: again
            on_open(**relist)
        ctx.tick_while_shown(self.timer)  # the list follows the runs while the tab is on screen

        def on_select(who: str | None, event: gr.SelectData, request: gr.Request) -> list[Any]:
            row = event.row_value or []
            return open_run(ctx.caller(request, who), str(row[-1])) if row else [gr.skip(), gr.skip()]

        def empty_chart(caller: Caller) -> list[Any]:
            # What Compare shows for no runs: the chart's title and note, the table's header, the picker's names.
            return compare_outputs(caller, [], 0.0)

        self.table.select(on_select, [ctx.visitor], [ctx.current_run, ctx.tabs], **private)
        compare = {
            "fn": ctx.handler(compare_outputs),
            "inputs": ctx.inputs(self.selected, self.smoothing, self.metric),
            "outputs": [self.compare_plot, self.diff, self.metric],
            **private,
        }
        self.compare.click(**compare)
        self.smoothing.release(**compare)
        self.metric.input(**compare)  # input, not change: the handler's own update of the picker must not loop
        # The empty chart and table in the page's language, once the page has loaded (a few hundred bytes).
        gr.on(
            None,
            ctx.handler(empty_chart),
            ctx.inputs(),
            [self.compare_plot, self.diff, self.metric],
            show_progress="hidden",
            concurrency_limit=None,
            **private,
        )

        # The picked runs' method metrics are offered at once, not only once Compare has been pressed.
        def picked(caller: Caller, run_ids: list[str] | None, metric: str) -> Any:
            return metric_picker(caller, self.index, run_ids, metric)

        self.selected.change(
            ctx.handler(picked),
            ctx.inputs(self.selected, self.metric),
            [self.metric],
            show_progress="hidden",
            **private,
        )
        self.delete.click(
            ctx.handler(ask_delete),
            ctx.inputs(self.selected),
            [self.confirm_row, self.question, self.message],
            **private,
        )
        self.cancel.click(lambda: [gr.Row(visible=False), ""], None, [self.confirm_row, self.message], **private)
        self.confirm.click(
            ctx.handler(delete_runs),
            ctx.inputs(self.selected),
            [self.confirm_row, self.message, self.selected],
            **private,
        ).then(**relist)
        self._wire_continue()

    def _wire_continue(self) -> None:
        """Continue from this run: fill the Train form from the picked run and show the Train tab."""
        ctx, form = self.ctx, self.ctx.train_form
        if form is None or ctx.tabs is None or ctx.policy.enabled:
            return

        def on_continue(caller: Caller, ids: list[str] | None) -> list[Any]:
            values, said = continue_values(caller, ids)
            if values is None:
                return [message_html(said, "warn"), *([gr.skip()] * len(form.paths)), gr.skip()]
            gr.Info(said)  # a toast: the page switches to the Train tab, away from this tab's message
            return ["", *form.value_updates(values), gr.Tabs(selected="train")]

        outputs = [self.message, *form.inputs, ctx.tabs]
        progress = {"show_progress_on": self.message}  # one of 131 outputs: see studio.train.tab._wire_form
        inputs = ctx.inputs(self.selected)
        continued = self.continue_from.click(
            ctx.handler(on_continue), inputs, outputs, **progress, api_visibility="private"
        )
        form.after_write(continued)


def build_runs_tab(ctx: StudioContext) -> RunsTab:
    """Build the Runs tab inside the current ``gr.Tab``."""
    return RunsTab(ctx)
