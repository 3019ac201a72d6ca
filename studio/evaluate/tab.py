"""The Evaluate tab: score a run's base and fine-tuned model on a dataset, with progress, cancel and results.

The work runs in a background ``python -m engine evaluate`` job (engine.evaluate.evaluations / engine.runs.jobs);
this tab starts it, follows its progress.json with a ``gr.Timer`` that is active only while a job runs, and shows the
result: eval loss, perplexity and exact match of base → fine-tuned, and the predictions beside the references; for
a preference run (dpo, kto, orpo) the preference accuracy base → fine-tuned, the reward margin and the pairs.
Below it, the Benchmarks section (studio.evaluate.benchmark_widgets) runs lm-evaluation-harness on the same run.
The page's job lives in a ``gr.State``; a page loaded while a job runs picks it up again. What the server writes
here is in the page's language (studio.i18n), the engine's own messages (a job's error) as the engine wrote them.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import gradio as gr

from engine.api import CONFIG_FILE, ArtifactError, ConfigError, evaluations, jobs, load_config, runs
from studio.context import StudioContext
from studio.demo import jobs as demo_jobs
from studio.demo.caller import Caller
from studio.evaluate import cards, tables
from studio.evaluate.benchmark_widgets import BenchmarkSection
from studio.i18n.catalog import SOURCE, key
from studio.i18n.widgets import marked, t
from studio.jobs.view import (
    BAD_COUNT,
    PICK_RUN,
    bad_count,
    checkpoint_of,
    finished_runs,
    job_status,
    progress_html,
    weight_choices,
)
from studio.jobs.widgets import action_buttons, cancel_job, refresh_on_open, stale_outcome
from studio.markup import message_html
from studio.path_guard import allowed_roots, path_problem, resolve_run

POLL_SECONDS = 1.0
DATA_CHOICES = [
    (t("evaluate.choice.eval"), evaluations.DATA_EVAL),
    (t("evaluate.choice.train"), evaluations.DATA_TRAIN),
    (t("evaluate.choice.file"), "file"),
]
DEFAULT_MAX_ROWS = 100
DEMO_NO_FILE = key("evaluate.refuse.demo_file")
NO_PATH, BAD_PATH = key("evaluate.refuse.no_path"), key("evaluate.refuse.bad_path")
MAX_ROWS = key("evaluate.max_rows")
JOB = "evaluation"  # the job's kind, as studio.jobs.view words its progress


def result_view(result: dict[str, Any] | None, which: str = tables.FILTERS[0], lang: str = SOURCE) -> list[Any]:
    """Metric cards, the predictions (or pairs) table with its label and columns, and the result kept for
    filtering; in ``lang``."""
    frame = tables.predictions_frame(result, which, lang)
    datatype, widths = tables.table_layout(result)
    label = tables.predictions_label(result, len(frame), lang)
    table = gr.Dataframe(value=frame, label=label, datatype=datatype, column_widths=widths)
    return [cards.metrics_html(result, lang), table, result]


def run_changed(caller: Caller, run_id: str | None, job_dir: str | None = None) -> list[Any]:
    """A run was picked: its weights, a sensible data choice, its newest evaluation (nothing for another visitor's
    run), in the caller's language, and the progress line emptied of an answer about the run picked before
    (``stale_outcome``)."""
    workspace, lang = caller.workspace, caller.language
    if not caller.owns_run_id(run_id):
        run_id = None
    choices = weight_choices(workspace, run_id, lang)
    data = gr.skip()
    result = None
    if run_id:
        try:
            run_dir = resolve_run(workspace, run_id)
            has_eval = load_config(run_dir / CONFIG_FILE).has_eval_data
            data = gr.Radio(value=evaluations.DATA_EVAL if has_eval else evaluations.DATA_TRAIN)
            result = evaluations.latest_evaluation(run_dir)
        except (runs.RunError, ConfigError, OSError) as exc:  # a run deleted meanwhile
            gr.Warning(caller.shown(str(exc)))
    weights = gr.Dropdown(choices=choices, value=choices[0][1] if choices else None)
    return [weights, data, *result_view(result, lang=lang), stale_outcome(job_dir)]


def _refused(text: str, kind: str = "warn") -> list[Any]:
    return [None, gr.Timer(active=False), message_html(text, kind), *action_buttons(False)]


def start_clicked(
    caller: Caller,
    run_id: str | None,
    weights: str | None,
    data: str,
    path: str,
    max_rows: float | None,
) -> list[Any]:
    """Check and start an evaluation; returns the job, the timer, the progress line and the buttons. In demo
    mode only the visitor's runs, on their own eval or training set (no file path on the server), and a refusal
    names files as the visitor knows them. A refusal is in the caller's language (the engine's reason as it
    wrote it)."""
    workspace = caller.workspace
    if not run_id:
        return _refused(caller.say(PICK_RUN))
    if bad_count(max_rows):
        return _refused(caller.say(BAD_COUNT, field=caller.say(MAX_ROWS)))
    if caller.policy.enabled and data == "file":
        return _refused(caller.say(DEMO_NO_FILE))
    choice = (path or "").strip() if data == "file" else data
    if not choice:
        return _refused(caller.say(NO_PATH))
    # Whoever reaches the page picks the file: only the workspace and the allowed folders (or a hub dataset id).
    problem = path_problem(choice, allowed_roots(workspace)) if data == "file" else None
    if problem:
        return _refused(caller.say(BAD_PATH, problem=problem), "error")
    try:
        rows, run_dir = int(max_rows) if max_rows else None, caller.run(run_id)
        start = partial(evaluations.start_evaluation, run_dir, choice, checkpoint_of(weights), rows, workspace)
        job_dir = demo_jobs.start_job(caller, start)
    except (ArtifactError, jobs.JobError, runs.RunError) as exc:
        return _refused(caller.shown(str(exc)), "error")
    status = jobs.status(job_dir)
    return [str(job_dir), gr.Timer(active=True), progress_html(status, JOB, caller.language), *action_buttons(True)]


def poll(caller: Caller, job_dir: str | None, which: str, run_id: str | None = None) -> list[Any]:
    """The timer's handler: progress while the job runs; its result (and the timer off) once it is over. With
    ``run_id`` (the run the page shows) the result of an evaluation of another run is not shown under its name.
    In demo mode the error of a failed job names files as the visitor knows them. All in the caller's
    language."""
    lang = caller.language
    status = job_status(job_dir)
    unchanged = [gr.skip()] * 3
    if status is None:
        return [None, gr.Timer(active=False), gr.skip(), *action_buttons(False), *unchanged]
    if jobs.is_running(status):
        return [job_dir, gr.skip(), progress_html(status, JOB, lang), *action_buttons(True), *unchanged]
    result_path = (status.result or {}).get("path")
    result = evaluations.read_evaluation(Path(result_path)) if result_path else None
    if run_id is not None and status.labels.get("run_id") != run_id:
        result = None  # the page moved on to another run meanwhile: its own cards stay
    shown = result_view(result, which, lang) if result else unchanged
    progress = caller.shown(progress_html(status, JOB, lang))  # a failed job's error names files
    return [None, gr.Timer(active=False), progress, *action_buttons(False), *shown]


def pending_view(caller: Caller, job_dir: str | None) -> list[Any]:
    """Once Start has started an evaluation: empty the cards and the table at once (those of an earlier
    evaluation would read as this one's until it ends), in the caller's language; nothing changes when Start was
    refused."""
    if not job_dir:
        return [gr.skip()] * 3
    _, table, result = result_view(None, lang=caller.language)
    return [cards.pending_html(caller.language), table, result]


def filtered(caller: Caller, result: dict[str, Any] | None, which: str) -> list[Any]:
    """The filter's handler: the kept result's cards and the rows ``which`` picks, in the caller's language."""
    return result_view(result, which, caller.language)


class EvaluateTab:
    """The Evaluate tab's components and events."""

    def __init__(self, ctx: StudioContext):
        self.ctx = ctx
        demo = ctx.policy.enabled  # a visitor's own runs (listed when the tab opens), no server file paths
        choices = [] if demo else finished_runs(ctx.workspace)
        with gr.Row(equal_height=False, elem_classes="ts-tool-row"):
            self.run = gr.Dropdown(choices=choices, value=None, label=t("jobs.run"), scale=3, elem_id="ts-eval-run")
            self.weights = gr.Dropdown(choices=[], label=t("jobs.weights"), scale=2, elem_id="ts-eval-weights")
            self.data = gr.Radio(
                DATA_CHOICES[:2] if demo else DATA_CHOICES,
                value=evaluations.DATA_EVAL,
                label=t("evaluate.data"),
                scale=3,
                elem_id="ts-eval-data",
            )
            self.max_rows = gr.Number(DEFAULT_MAX_ROWS, label=t(MAX_ROWS), precision=0, scale=1, min_width=100)
        self.path = gr.Textbox(
            label=t("evaluate.data_file"), placeholder=t("evaluate.data_file.placeholder"), visible=False
        )
        with gr.Row(equal_height=True, elem_classes="ts-tool-actions"):
            self.progress = gr.HTML(elem_classes="ts-html", elem_id="ts-eval-progress", scale=5)
            self.start = gr.Button(
                t("evaluate.start"), variant="primary", scale=0, min_width=130, elem_id="ts-eval-start"
            )
            self.cancel = gr.Button(
                t("jobs.cancel"), interactive=False, scale=0, min_width=110, elem_id="ts-eval-cancel"
            )
        # The page translates the empty state it starts with; the server's answers come in the page's language.
        empty = f'<div class="ts-empty">{marked(cards.EMPTY)}</div>'
        self.metrics = gr.HTML(empty, elem_classes="ts-html", elem_id="ts-eval-metrics")
        self.filter = gr.Radio(
            [(t(f"evaluate.filter.{tables.FILTER_WORDS[which]}"), which) for which in tables.FILTERS],
            value=tables.FILTERS[0],
            show_label=False,
            elem_id="ts-eval-filter",
        )
        datatype, widths = tables.table_layout(None)
        self.table = gr.Dataframe(
            value=tables.predictions_frame(None),
            datatype=datatype,
            column_widths=widths,
            interactive=False,
            max_height=330,
            wrap=True,
            label=t(tables.LIST_TITLES["predictions"][0]),
            elem_id="ts-eval-table",
        )
        self.job = gr.State(None)
        self.result = gr.State(None)
        self.timer = gr.Timer(POLL_SECONDS, active=False)
        self._wire()
        self.benchmarks = BenchmarkSection(ctx, self.run, self.weights)  # lm-eval on the same run and weights

    def _wire(self) -> None:
        private: dict[str, Any] = {"api_visibility": "private"}
        shown = [self.metrics, self.table, self.result]
        buttons = [self.start, self.cancel]
        ctx = self.ctx

        # Each handler answers the caller: their runs, in the language of the page that asked.
        def cancel(caller: Caller, job: str | None) -> str:
            return cancel_job(caller, job, JOB)

        relisted = [self.weights, self.data, *shown, self.progress]
        self.run.change(ctx.handler(run_changed), ctx.inputs(self.run, self.job), relisted, **private)
        self.data.change(lambda d: gr.Textbox(visible=d == "file"), [self.data], [self.path], **private)
        self.start.click(
            ctx.handler(start_clicked),
            ctx.inputs(self.run, self.weights, self.data, self.path, self.max_rows),
            [self.job, self.timer, self.progress, *buttons],
            **private,
        ).then(ctx.handler(pending_view), ctx.inputs(self.job), shown, show_progress="hidden", **private)
        self.timer.tick(
            ctx.handler(poll),
            ctx.inputs(self.job, self.filter, self.run),
            [self.job, self.timer, self.progress, *buttons, *shown],
            show_progress="hidden",
            **private,
        )
        self.cancel.click(ctx.handler(cancel), ctx.inputs(self.job), [self.progress], **private)
        self.filter.change(ctx.handler(filtered), ctx.inputs(self.result, self.filter), shown, **private)
        refresh_on_open(ctx, evaluations.JOB_KIND, self.run, self.job, self.timer, self.weights)


def build_evaluate_tab(ctx: StudioContext) -> EvaluateTab:
    """Build the Evaluate tab inside the current ``gr.Tab``."""
    return EvaluateTab(ctx)
