"""The Sweeps tab: build a sweep (a base run, the fields to vary, the objective and budget, all shown as the sweep
YAML, which is what gets validated and started), start it in the background, watch its trials live, stop and
continue it, open a trial in the Monitor and carry the best trial to the Train tab.

The sweep's driver is a process of its own (engine.sweeps.control), so it goes on after a refresh or a studio
restart: the tab finds it again when it is opened. A timer polls only while a driver runs. In demo mode the tab
only says why sweeps are off (DemoPolicy.sweeps_refusal). Its labels are keys the page translates; what the server
composes (the table, charts, status, messages) is said in the language of the page that asked (studio.i18n).
"""

from __future__ import annotations

from typing import Any

import gradio as gr
import pandas as pd

from engine.api import driver_log_tail, runs
from studio import lanes
from studio.context import StudioContext
from studio.demo.caller import Caller
from studio.demo.policy import SWEEPS_OFF
from studio.i18n.catalog import SOURCE, key, text
from studio.i18n.widgets import marked, t
from studio.markup import Html, message_html
from studio.runs.tab import as_plot
from studio.sweeps import actions, view
from studio.sweeps.actions import Outcome
from studio.sweeps.view import (
    SweepView,
    best_html,
    load_view,
    parallel_figure,
    progress_figure,
    status_html,
    sweep_space,
    table_columns,
    trial_rows,
)
from studio.sweeps.widgets import PRIVATE, QUIET, SweepEditor

POLL_SECONDS = 2.0
OBJECTIVE = key("sweeps.col.objective")  # the objective's column before a sweep names its metric
# Start and Continue read the study (SQLite) and spawn the driver: bounded, but more than milliseconds.
SWEEP_START: dict[str, Any] = {"concurrency_id": "sweep-start", "concurrency_limit": lanes.SLOW_LANE_WIDTH}


def watch_outputs(caller: Caller, name: str | None, previous: Any = None) -> list[Any]:
    """The poll's outputs: [key, status, table, parallel chart, progress chart, best, timer], in the caller's
    language; gr.skip() for those of a sweep that did not change since ``previous`` (its key, the language with
    it), and the timer on only while a driver runs."""
    workspace, lang = caller.workspace, caller.language
    if not name:
        empty = SweepView("", None, None)
        return [
            None,
            "",
            _table(empty, lang),
            *_charts(empty, lang=lang),
            best_html(None, lang),
            gr.Timer(active=False),
        ]
    seen = load_view(workspace, name)
    timer = gr.Timer(active=seen.driver is not None)
    key = [*seen.key(), lang]  # another language redraws too
    if previous is not None and tuple(key) == tuple(previous):
        return [previous, gr.skip(), gr.skip(), gr.skip(), gr.skip(), gr.skip(), timer]
    tail = driver_log_tail(workspace, name) if seen.driver is None else ""
    charts = _charts(seen, sweep_space(workspace, name), lang)  # the sweep's file, read only when the charts change
    return [key, status_html(seen, tail, lang), _table(seen, lang), *charts, best_html(seen.summary, lang), timer]


def _table(seen: SweepView, lang: str = SOURCE) -> pd.DataFrame:
    metric = seen.summary.metric if seen.summary else text(OBJECTIVE, lang)
    return pd.DataFrame(trial_rows(seen, lang), columns=table_columns(metric, lang))


def _charts(seen: SweepView, space: dict[str, Any] | None = None, lang: str = SOURCE) -> list[Any]:
    return [as_plot(parallel_figure(seen.summary, space, lang)), as_plot(progress_figure(seen.summary, lang))]


def relisted(caller: Caller, current: str | None, outcome: Outcome | None = None) -> list[Any]:
    """The sweep picker with the workspace's sweeps (the one an action concerns picked, else ``current`` while it
    exists) and that sweep's view (``watch_outputs``, in the caller's language); after an action, its message
    first."""
    choices, name = view.picked(caller.workspace, (outcome.name if outcome else None) or current)
    shown = [gr.Dropdown(choices=choices, value=name), *watch_outputs(caller, name)]
    if outcome is not None and outcome.kind == "ok" and outcome.name:
        shown[-1] = gr.Timer(active=True)  # a driver just started: follow it (a tick turns this off once it ends)
    return [actions.outcome_html(outcome), *shown] if outcome is not None else shown


def open_trial(caller: Caller, run_id: str) -> list[Any]:
    """A clicked trial: its run in the Monitor (current run and tab); nothing for a trial without a run, or one
    that is not the caller's."""
    try:
        run_dir = caller.run(run_id)
    except runs.RunError:  # a trial whose run was never made, or was deleted
        return [gr.skip(), gr.skip()]
    return [str(run_dir), gr.Tabs(selected="monitor")]


class SweepsTab:
    """The Sweeps tab's components and events."""

    def __init__(self, ctx: StudioContext):
        self.ctx = ctx
        if ctx.policy.sweeps_refusal:  # a public demo: said plainly (in the page's language), and nothing to click
            refusal = message_html(Html(marked(SWEEPS_OFF)), "warn")
            gr.HTML(refusal, elem_id="ts-sweeps-off", elem_classes="ts-html")
            return
        choices, name = view.picked(ctx.workspace, None)
        self._build_watch(choices, name)
        with gr.Accordion(t("sweeps.new"), open=not choices, elem_id="ts-sweep-new"):
            self.editor = SweepEditor(ctx)
        self._wire_watch()
        self._wire_start()

    # --- watching -----------------------------------------------------------------------------------------------

    def _build_watch(self, choices: list[str], name: str | None) -> None:
        with gr.Row(equal_height=False, elem_classes="ts-pick-row"):
            self.sweep = gr.Dropdown(choices, value=name, label=t("sweeps.sweep"), scale=3, elem_id="ts-sweep-pick")
            with gr.Column(scale=0, min_width=380), gr.Row(elem_classes="ts-actions"):
                self.refresh = gr.Button(t("sweeps.refresh"), min_width=130, elem_id="ts-sweep-refresh")
                self.stop = gr.Button(t("sweeps.stop"), variant="stop", min_width=90, elem_id="ts-sweep-stop")
                self.resume = gr.Button(t("sweeps.continue"), min_width=110, elem_id="ts-sweep-continue")
        with gr.Row(equal_height=False):  # what the sweep does, beside what the last button did
            with gr.Column(scale=2):
                self.status = gr.HTML(elem_classes="ts-html", elem_id="ts-sweep-status")
            with gr.Column(scale=1):
                self.message = gr.HTML(elem_classes="ts-html", elem_id="ts-sweep-message")
        self.table = gr.Dataframe(
            value=_table(SweepView("", None, None)),
            datatype=["str", "number", "html", "str", "str", "str"],
            interactive=False,
            max_height=280,
            show_label=False,
            column_widths=["7%", "7%", "15%", "11%", "36%", "24%"],
            elem_id="ts-sweep-table",
        )
        with gr.Row(equal_height=False):
            with gr.Column(scale=3):
                self.parallel = gr.Plot(show_label=False, elem_classes="ts-chart", elem_id="ts-sweep-parallel")
            with gr.Column(scale=2):
                self.progress = gr.Plot(show_label=False, elem_classes="ts-chart", elem_id="ts-sweep-progress")
        with gr.Row(equal_height=False, elem_classes="ts-pick-row"):
            self.best = gr.HTML(best_html(None), elem_classes="ts-html", elem_id="ts-sweep-best")
            linked = self.ctx.train_form is not None and self.ctx.tabs is not None
            self.best_run = gr.Button(
                t("sweeps.best_run"), scale=0, min_width=300, visible=linked, elem_id="ts-sweep-best-run"
            )
        self.key = gr.State(None)
        self.timer = gr.Timer(POLL_SECONDS, active=False)

    def _wire_watch(self) -> None:
        ctx = self.ctx
        shown = [self.key, self.status, self.table, self.parallel, self.progress, self.best, self.timer]

        def tick(caller: Caller, name: str | None, key: Any) -> list[Any]:
            return watch_outputs(caller, name, key)

        self.timer.tick(
            ctx.handler(tick),
            ctx.inputs(self.sweep, self.key),
            shown,
            concurrency_limit=None,  # reads the study and a few status files: no lane others wait on
            **QUIET,
        )

        def pick(caller: Caller, name: str | None) -> list[Any]:
            return watch_outputs(caller, name)

        # input, not change: a pick by hand (the handlers' own updates of the picker already show the sweep)
        self.sweep.input(ctx.handler(pick), ctx.inputs(self.sweep), shown, **QUIET)

        def relist(caller: Caller, current: str | None) -> list[Any]:
            return relisted(caller, current)

        self.refresh.click(ctx.handler(relist), ctx.inputs(self.sweep), [self.sweep, *shown], **QUIET)
        # Opening the tab shows a driver started or ended meanwhile (by another page, the CLI, before a refresh).
        if (on_open := ctx.on_open()) is not None:
            on_open(ctx.handler(relist), ctx.inputs(self.sweep), [self.sweep, *shown], **QUIET)
        ctx.tick_while_shown(self.timer, resume=False)  # back on screen, the opening's relist sets it again

        after = [self.message, self.sweep, *shown]

        def stop(caller: Caller, name: str | None) -> list[Any]:
            return relisted(caller, name, actions.stop(caller, name))

        self.stop.click(ctx.handler(stop), ctx.inputs(self.sweep), after, **PRIVATE)

        def resume(caller: Caller, name: str | None) -> list[Any]:
            return relisted(caller, name, actions.resume(caller, name))

        self.resume.click(ctx.handler(resume), ctx.inputs(self.sweep), after, **PRIVATE, **SWEEP_START)
        self._wire_links()

    def _wire_links(self) -> None:
        """A trial's row opens its run in the Monitor; the best trial fills the Train form."""
        ctx = self.ctx
        if ctx.tabs is None:
            return

        def on_select(who: str | None, event: gr.SelectData, request: gr.Request) -> list[Any]:
            return open_trial(ctx.caller(request, who), str((event.row_value or [""])[-1]))

        self.table.select(on_select, [ctx.visitor], [ctx.current_run, ctx.tabs], **PRIVATE)
        form = ctx.train_form
        if form is None:
            return

        def best_run(caller: Caller, name: str | None) -> list[Any]:
            values, outcome = actions.best_values(caller, name)
            if values is None:
                return [actions.outcome_html(outcome), *([gr.skip()] * len(form.paths)), gr.skip()]
            gr.Info(outcome.message)  # a toast: the page switches to the Train tab
            return ["", *form.value_updates(values), gr.Tabs(selected="train")]

        outputs = [self.message, *form.inputs, ctx.tabs]
        progress = {"show_progress_on": self.message}  # one of 131 outputs: see studio.train.tab._wire_form
        filled = self.best_run.click(ctx.handler(best_run), ctx.inputs(self.sweep), outputs, **progress, **PRIVATE)
        form.after_write(filled)

    def _wire_start(self) -> None:
        """The editor's Start: validate its YAML, start the driver and watch the sweep it started."""
        ctx, editor = self.ctx, self.editor
        shown = [self.key, self.status, self.table, self.parallel, self.progress, self.best, self.timer]

        def start(caller: Caller, sweep: str, current: str | None) -> list[Any]:
            return relisted(caller, current, actions.start(caller, sweep))

        editor.start.click(
            ctx.handler(start),
            ctx.inputs(editor.yaml, self.sweep),
            [editor.start_message, self.sweep, *shown],
            **PRIVATE,
            **SWEEP_START,
        )


def build_sweeps_tab(ctx: StudioContext) -> SweepsTab:
    """Build the Sweeps tab inside the current ``gr.Tab`` (``ctx.opened``: that tab, whose selection refreshes it)."""
    return SweepsTab(ctx)
