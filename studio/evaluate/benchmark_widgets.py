"""The Evaluate tab's Benchmarks section: lm-evaluation-harness on the picked run's base and fine-tuned model, in a
background ``python -m engine benchmark`` job (engine.api.benchmarks) with progress and Cancel, its table kept in
the run directory and shown again when the run is picked.

It shares the tab's run and weights pickers; the job, its timer and its buttons are its own, so an evaluation and a
benchmark of the same run can go at once. Words in the page's language (studio.evaluate.benchmark_view).
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import gradio as gr

from engine.api import ArtifactError, benchmarks, jobs, runs
from studio.context import StudioContext
from studio.demo import jobs as demo_jobs
from studio.demo.caller import Caller
from studio.evaluate import benchmark_view as view
from studio.i18n.widgets import marked, t
from studio.jobs.view import BAD_COUNT, PICK_RUN, bad_count, checkpoint_of, job_status, progress_html, running_job
from studio.jobs.widgets import action_buttons, cancel_job
from studio.markup import message_html
from studio.path_guard import allowed_roots, path_problem

JOB = "benchmark"  # the job's kind, as studio.jobs.view words its progress


def shown_result(result: dict[str, Any] | None, lang: str) -> list[Any]:
    """The note and the table of a result (the empty state for None)."""
    return [view.result_note(result, lang), view.result_frame(result, lang)]


def benchmark_run_changed(caller: Caller, run_id: str | None) -> list[Any]:
    """A run was picked: its newest benchmark (nothing for another visitor's run)."""
    result = None
    if run_id and caller.owns_run_id(run_id):
        try:
            result = benchmarks.latest_benchmark(caller.run(run_id))
        except runs.RunError:  # deleted meanwhile
            result = None
    return shown_result(result, caller.language)


def _refused(words: str, kind: str = "warn") -> list[Any]:
    return [None, gr.Timer(active=False), message_html(words, kind), *action_buttons(False)]


def benchmark_clicked(
    caller: Caller,
    run_id: str | None,
    weights: str | None,
    tasks: list[str] | None,
    task_file: str | None,
    limit: float | None,
) -> list[Any]:
    """Check and start a benchmark: the job, the timer, the progress line and the buttons. In demo mode the
    held-out task only, capped (benchmark_view.make_request); a task file only from the allowed folders. A refusal
    in the caller's language, the engine's reason as it wrote it."""
    if not run_id:
        return _refused(caller.say(PICK_RUN))
    if bad_count(limit):
        return _refused(caller.say(BAD_COUNT, field=caller.say(view.LIMIT)))
    demo = caller.policy.enabled
    request = view.make_request(tasks, task_file, limit, checkpoint_of(weights), demo)
    if request is None:
        return _refused(caller.say(view.NO_TASK))
    for path in request.task_files:  # whoever reaches the page names the file: the workspace and allowed folders
        problem = path_problem(path, allowed_roots(caller.workspace))
        if problem:
            return _refused(caller.say(view.BAD_PATH, problem=problem), "error")
    try:
        start = partial(benchmarks.start_benchmark, caller.run(run_id), request, caller.workspace)
        job_dir = demo_jobs.start_job(caller, start)
    except (ArtifactError, jobs.JobError, runs.RunError) as exc:
        return _refused(caller.shown(str(exc)), "error")
    status = jobs.status(job_dir)
    return [str(job_dir), gr.Timer(active=True), progress_html(status, JOB, caller.language), *action_buttons(True)]


def benchmark_poll(caller: Caller, job_dir: str | None, run_id: str | None = None) -> list[Any]:
    """The timer's handler: progress while the job runs; its table (and the timer off) once it is over, unless the
    page shows another run by then."""
    lang = caller.language
    status = job_status(job_dir)
    unchanged = [gr.skip()] * 2
    if status is None:
        return [None, gr.Timer(active=False), gr.skip(), *action_buttons(False), *unchanged]
    if jobs.is_running(status):
        return [job_dir, gr.skip(), progress_html(status, JOB, lang), *action_buttons(True), *unchanged]
    path = (status.result or {}).get("path")
    result = benchmarks.read_benchmark(Path(path)) if path else None
    shown = shown_result(result, lang) if result and status.labels.get("run_id") == run_id else unchanged
    progress = caller.shown(progress_html(status, JOB, lang))
    return [None, gr.Timer(active=False), progress, *action_buttons(False), *shown]


def benchmark_opened(caller: Caller, job_dir: str | None) -> list[Any]:
    """The tab came on screen: follow a benchmark that runs (the caller's), e.g. after a page reload."""
    mine = [run_dir.name for run_dir in caller.run_dirs()] if caller.policy.enabled else None
    job_dir = job_dir or running_job(caller.workspace, benchmarks.JOB_KIND, mine)
    return [job_dir, gr.Timer(active=True) if job_dir else gr.skip()]


class BenchmarkSection:
    """The Benchmarks accordion, under the evaluation's table, driven by the tab's run and weights pickers."""

    def __init__(self, ctx: StudioContext, run: gr.Dropdown, weights: gr.Dropdown):
        self.ctx, self.run, self.weights = ctx, run, weights
        demo = ctx.policy.enabled
        with gr.Accordion(t("benchmark.title"), open=False, elem_id="ts-bench"):
            with gr.Row(equal_height=False, elem_classes="ts-tool-row"):
                self.tasks = gr.Dropdown(
                    view.offered_tasks(demo),
                    value=[benchmarks.HELDOUT],
                    multiselect=True,
                    allow_custom_value=not demo,
                    label=t("benchmark.tasks"),
                    info=t("benchmark.tasks.info"),
                    scale=4,
                    elem_id="ts-bench-tasks",
                )
                self.limit = gr.Number(
                    view.DEMO_LIMIT if demo else view.DEFAULT_LIMIT,
                    label=t(view.LIMIT),
                    precision=0,  # no bounds: Gradio refuses past them in English; a demo caps it (make_request)
                    scale=1,
                    min_width=120,
                )
            self.task_file = gr.Textbox(
                label=t("benchmark.task_file"), placeholder=t("benchmark.task_file.placeholder"), visible=not demo
            )
            with gr.Row(equal_height=True, elem_classes="ts-tool-actions"):
                self.progress = gr.HTML(elem_classes="ts-html", elem_id="ts-bench-progress", scale=5)
                self.start = gr.Button(
                    t("benchmark.start"), variant="primary", scale=0, min_width=150, elem_id="ts-bench-start"
                )
                self.cancel = gr.Button(
                    t("jobs.cancel"), interactive=False, scale=0, min_width=110, elem_id="ts-bench-cancel"
                )
            self.note = gr.HTML(f'<div class="ts-empty">{marked(view.EMPTY)}</div>', elem_classes="ts-html")
            self.table = gr.Dataframe(
                value=view.result_frame(None), interactive=False, wrap=True, elem_id="ts-bench-table"
            )
        self.job = gr.State(None)
        self.timer = gr.Timer(1.0, active=False)
        self._wire()

    def _wire(self) -> None:
        ctx, private = self.ctx, {"api_visibility": "private"}
        buttons, shown = [self.start, self.cancel], [self.note, self.table]

        def cancel(caller: Caller, job: str | None) -> str:
            return cancel_job(caller, job, JOB)

        self.run.change(ctx.handler(benchmark_run_changed), ctx.inputs(self.run), shown, **private)
        self.start.click(
            ctx.handler(benchmark_clicked),
            ctx.inputs(self.run, self.weights, self.tasks, self.task_file, self.limit),
            [self.job, self.timer, self.progress, *buttons],
            **private,
        )
        self.timer.tick(
            ctx.handler(benchmark_poll),
            ctx.inputs(self.job, self.run),
            [self.job, self.timer, self.progress, *buttons, *shown],
            show_progress="hidden",
            **private,
        )
        self.cancel.click(ctx.handler(cancel), ctx.inputs(self.job), [self.progress], **private)
        on_open = ctx.on_open()
        if on_open is not None:
            on_open(ctx.handler(benchmark_opened), ctx.inputs(self.job), [self.job, self.timer], **private)
