"""The Monitor tab: live charts, progress, state, log and the controls of one run: Save now, Pause / Continue,
Stop, Resume and Abort.

The charts, the progress bar, the stats and the log are plain containers that the page script
assets/live_charts.js fills from studio.monitor.live, outside Gradio's events, as the trainer writes. A
``gr.Timer`` refreshes the rest (header and state, buttons, error, config) once a second: each browser tab
keeps a ``MonitorSession`` in a ``gr.State`` and is sent only the outputs that changed; everything else is
``gr.skip()``. A GRPO run's "Sample completions" section (studio.monitor.completions) has a timer of its own,
which ticks only while the section is open.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import gradio as gr

from engine import runs
from engine.runs import queue as run_queue
from engine.store.workspace import workspace_of
from studio.charts import LOSS_HEIGHT, SMALL_HEIGHT
from studio.context import StudioContext
from studio.demo.policy import NORMAL, DemoPolicy, check_owner
from studio.demo.queue import resume_queued
from studio.monitor.completions import DEFAULT_SAMPLES, READ_LIMIT, SHOW_CHOICES, TOTAL, CompletionsPanel
from studio.monitor.live import COMMON_CHARTS, METHOD_CHARTS
from studio.monitor.session import MonitorSession, MonitorUpdate
from studio.scheduler import resume_in_line

# State and buttons: once a second reads as live (a click on Stop, Resume or Abort refreshes at once), and
# every Gradio event costs the browser's main thread 65 ms or more on a 2-core laptop, 250 ms when it updates
# HTML panels, which is why what changes with every step goes through the page script instead.
POLL_SECONDS = 1.0
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


def _outputs_of(update: MonitorUpdate) -> list[Any]:
    """Gradio values for the outputs, in the order of ``MonitorTab.outputs``; gr.skip() where nothing changed."""
    skip = gr.skip()
    values = [
        update.header,
        None if update.error is None else gr.HTML(value=update.error, visible=bool(update.error)),
        None if update.config is None else gr.Code(value=update.config),
    ]
    values = [skip if value is None else value for value in values]
    controls = update.controls
    if controls is None:
        values += [skip] * 6
    else:
        values += [
            gr.Button(interactive=controls.save),
            gr.Button(interactive=controls.pause, visible=not controls.continue_run),
            gr.Button(interactive=controls.continue_run, visible=controls.continue_run),
            gr.Button(interactive=controls.stop, value=controls.stop_label),
            gr.Button(interactive=controls.resume),
            gr.Button(interactive=controls.abort),
        ]
    return values


def refresh(
    run_dir: str | None, session: MonitorSession | None, policy: DemoPolicy = NORMAL, workspace: Path | None = None
) -> list[Any]:
    """The timer's handler: the session (created on first use) and the changed outputs (in demo mode without the
    server's paths: ``MonitorUpdate.shown``)."""
    session = session or MonitorSession()
    return [session, *_outputs_of(session.update(run_dir).shown(policy, workspace))]


def redraw(
    run_dir: str | None, session: MonitorSession | None, policy: DemoPolicy = NORMAL, workspace: Path | None = None
) -> list[Any]:
    """Send every output again (after a tab switch: an update that reached a hidden tab may not have stuck)."""
    if session is not None:
        session.forget_sent()
    return refresh(run_dir, session, policy, workspace)


def completions_refresh(
    run_dir: str | None,
    panel: CompletionsPanel | None,
    reward: str | None,
    show: str | None,
    count: Any,
    visitor: str | None = None,
    policy: DemoPolicy = NORMAL,
    workspace: Path | None = None,
    force: bool = False,
    opened: bool | None = None,
) -> list[Any]:
    """The sample panel's handler (studio.monitor.completions): the panel state (created on first use), then the
    accordion, the Reward dropdown, the table and the panel's timer, each gr.skip() where nothing changed."""
    panel = panel or CompletionsPanel()
    update = panel.update(run_dir, reward, show, count, policy, workspace, visitor, force, opened)
    skip = gr.skip()
    return [
        panel,
        # with the open state the panel knows, which a hidden accordion shown again may have lost
        skip if update.visible is None else gr.Accordion(visible=update.visible, open=panel.open),
        skip if update.choices is None else gr.Dropdown(choices=update.choices, value=update.reward),
        skip if update.table is None else update.table,
        skip if update.polling is None else gr.Timer(active=update.polling),
    ]


def stop_clicked(run_dir: str | None) -> None:
    """Ask the run to stop after its current step (it saves a checkpoint and reads ``stopped``); a queued run
    leaves the queue instead."""
    if run_dir and run_queue.cancel_queued(Path(run_dir)):
        gr.Info("Cancelled: the run left the queue.")
    elif run_dir and runs.stop(Path(run_dir)):
        gr.Info("Stopping: the run saves a checkpoint after the current step.")
    else:
        gr.Warning("The run is not running.")


def save_clicked(run_dir: str | None, policy: DemoPolicy = NORMAL, visitor: str | None = None) -> None:
    """Ask for a checkpoint at the end of the current step; the run goes on (a paused run stays paused)."""
    run = _owned(run_dir, policy, visitor)
    if run is None:
        return
    if runs.save_now(run):
        gr.Info("Saving a checkpoint at the end of the current step; training goes on.")
    else:
        gr.Warning("The run is not running.")


def pause_clicked(run_dir: str | None, policy: DemoPolicy = NORMAL, visitor: str | None = None) -> None:
    """Ask the run to wait after its current step, in its process, holding its memory."""
    run = _owned(run_dir, policy, visitor)
    if run is None:
        return
    if runs.pause(run):
        gr.Info("Pausing: the run waits after the current step, holding its memory; Continue goes on.")
    else:
        gr.Warning("The run is not running.")


def continue_clicked(run_dir: str | None, policy: DemoPolicy = NORMAL, visitor: str | None = None) -> None:
    """Let a paused run (or one asked to pause) go on from the step where it waits, in the same process."""
    run = _owned(run_dir, policy, visitor)
    if run is None:
        return
    if runs.resume_paused(run):
        gr.Info("Continuing from the step where the run waited.")
    else:
        gr.Warning("The run is not paused.")


def _owned(run_dir: str | None, policy: DemoPolicy, visitor: str | None) -> Path | None:
    """The run a control acts on, when there is one and (in demo mode) it is the visitor's; else None, with the
    same warning as for a run that does not exist."""
    if not run_dir:
        return None
    try:
        return check_owner(Path(run_dir), policy, visitor)
    except runs.RunError as exc:
        gr.Warning(str(exc))
        return None


def resume_clicked(run_dir: str | None, policy: DemoPolicy = NORMAL, visitor: str | None = None) -> None:
    """Continue the run from its newest checkpoint, in a new process: it joins the queue, and starts at once when
    its devices are free (in demo mode under the visitor rules)."""
    if not run_dir:
        return
    try:
        if policy.enabled:
            gr.Info(resume_queued(Path(run_dir), policy, visitor))
        else:
            gr.Info(resume_in_line(Path(run_dir)))
    except runs.RunError as exc:
        gr.Warning(policy.shown(str(exc), workspace_of(Path(run_dir))))


def abort_confirmed(run_dir: str | None) -> Any:
    """Kill the run at once (no checkpoint); hides the confirmation again."""
    if run_dir and runs.abort(Path(run_dir)):
        gr.Warning("The run was aborted.")
    return gr.Row(visible=False)


class MonitorTab:
    """The Monitor's components, kept so the app can wire page-load and cross-tab events to them."""

    def __init__(self, ctx: StudioContext):
        self.ctx = ctx
        self.session = gr.State(None)
        with gr.Row(elem_classes="ts-monitor-head", equal_height=False):
            with gr.Column(scale=3, elem_classes="ts-tight"):
                self.header = gr.HTML(elem_classes="ts-html")
                gr.HTML(panel_html("progress"), elem_classes="ts-html")
            with gr.Column(scale=2, min_width=560), gr.Row(elem_classes="ts-actions"):
                self.save = gr.Button("Save now", variant="secondary", interactive=False, elem_id="ts-save")
                self.pause = gr.Button("Pause", variant="secondary", interactive=False, elem_id="ts-pause")
                self.go_on = gr.Button(
                    "Continue", variant="primary", interactive=False, visible=False, elem_id="ts-continue"
                )
                self.stop = gr.Button("Stop", variant="secondary", interactive=False, elem_id="ts-stop")
                self.resume = gr.Button("Resume", variant="primary", interactive=False, elem_id="ts-resume")
                self.abort = gr.Button("Abort", variant="stop", interactive=False, elem_id="ts-abort")
        with gr.Row(visible=False, elem_classes="ts-confirm") as self.confirm_row:
            gr.HTML("<b>Abort the run?</b> It is killed at once; work since the last checkpoint is lost.", scale=4)
            self.confirm = gr.Button("Yes, abort", variant="stop", elem_id="ts-abort-confirm", scale=0, min_width=140)
            self.cancel = gr.Button("Cancel", elem_id="ts-abort-cancel", scale=0, min_width=120)
        self.error = gr.HTML(visible=False, elem_classes="ts-html")
        with gr.Row(equal_height=False):
            with gr.Column(scale=3, min_width=420):
                gr.HTML(chart_html("loss"), elem_id="ts-loss-chart", elem_classes="ts-chart")
            with gr.Column(scale=1, min_width=240, elem_classes="ts-side"):
                gr.HTML(panel_html("stats"), elem_classes="ts-html")
                # Read by the chart script in the page, not by the server; no event takes them as input, so
                # Gradio must be told they are interactive.
                self.smoothing = gr.Slider(
                    0, 0.99, value=0.6, step=0.01, label="Smoothing (EMA)", elem_id="ts-smoothing", interactive=True
                )
                self.log_y = gr.Checkbox(False, label="Log scale", elem_id="ts-log-y", interactive=True)
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
        self.timer = gr.Timer(POLL_SECONDS)
        self._wire()
        self._wire_completions()

    def _build_completions(self) -> None:
        """The "Sample completions" section of a GRPO run (hidden for other methods until a run shows it)."""
        self.completions_panel = gr.State(None)
        with gr.Accordion("Sample completions", open=False, visible=False, elem_id="ts-completions") as accordion:
            self.completions = accordion
            with gr.Row():
                self.completions_reward = gr.Dropdown(
                    [TOTAL], value=TOTAL, label="Reward", elem_id="ts-completions-reward"
                )
                self.completions_show = gr.Dropdown(
                    list(SHOW_CHOICES), value=SHOW_CHOICES[0], label="Show", elem_id="ts-completions-show"
                )
                self.completions_count = gr.Number(
                    DEFAULT_SAMPLES, label="Samples", precision=0, minimum=1, maximum=READ_LIMIT
                )
            self.completions_table = gr.HTML(elem_id="ts-completions-table", elem_classes="ts-html")
        self.completions_timer = gr.Timer(COMPLETIONS_POLL_SECONDS, active=False)

    def _wire_completions(self) -> None:
        policy, workspace = self.ctx.policy, self.ctx.workspace
        private: dict[str, Any] = {"api_visibility": "private"}
        visitor = self.ctx.visitor if self.ctx.visitor is not None else gr.State(None)
        filters = [self.completions_reward, self.completions_show, self.completions_count]
        inputs = [self.ctx.current_run, self.completions_panel, *filters, visitor]
        outputs = [
            self.completions_panel,
            self.completions,
            self.completions_reward,
            self.completions_table,
            self.completions_timer,
        ]

        def handler(force: bool = False, opened: bool | None = None) -> dict[str, Any]:
            def fn(run_dir: str | None, panel: Any, reward: Any, show: Any, count: Any, who: Any) -> list[Any]:
                return completions_refresh(run_dir, panel, reward, show, count, who, policy, workspace, force, opened)

            return {"fn": fn, "inputs": inputs, "outputs": outputs, "show_progress": "hidden", **private}

        self.completions_timer.tick(**handler(), concurrency_limit=None)
        self.ctx.current_run.change(**handler())
        for widget in filters:
            widget.input(**handler())
        self.completions.expand(**handler(force=True, opened=True))
        self.completions.collapse(**handler(opened=False))
        if self.ctx.tabs is not None:  # an update that reached a hidden tab may not have stuck
            self.ctx.tabs.change(**handler(force=True))

    @property
    def outputs(self) -> list[Any]:
        """The components ``refresh`` returns values for (after the session state)."""
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

    def _wire(self) -> None:
        inputs = [self.ctx.current_run, self.session]
        # UI plumbing stays out of the API page; studio.runs.api offers the same actions by run id.
        private: dict[str, Any] = {"api_visibility": "private"}
        policy, workspace = self.ctx.policy, self.ctx.workspace
        poll = {
            "fn": lambda run_dir, session: refresh(run_dir, session, policy, workspace),
            "inputs": inputs,
            "outputs": self.outputs,
            "show_progress": "hidden",
            **private,
        }
        # Cheap, read-only and per session: no reason to queue one tab's poll behind another's.
        self.timer.tick(**poll, concurrency_limit=None)
        self.ctx.current_run.change(**poll)
        if self.ctx.tabs is not None:  # fires on clicks and on programmatic switches alike
            self.ctx.tabs.change(**{**poll, "fn": lambda run_dir, session: redraw(run_dir, session, policy, workspace)})
        run = [self.ctx.current_run]
        visitor = [self.ctx.visitor]
        save = {"fn": lambda run_dir, who: save_clicked(run_dir, policy, who), "inputs": [*run, *visitor]}
        self.save.click(**save, outputs=None, **private).then(**poll)
        pause = {"fn": lambda run_dir, who: pause_clicked(run_dir, policy, who), "inputs": [*run, *visitor]}
        self.pause.click(**pause, outputs=None, **private).then(**poll)
        go_on = {"fn": lambda run_dir, who: continue_clicked(run_dir, policy, who), "inputs": [*run, *visitor]}
        self.go_on.click(**go_on, outputs=None, **private).then(**poll)
        self.stop.click(stop_clicked, run, None, **private).then(**poll)
        resume = {
            "fn": lambda run_dir, who: resume_clicked(run_dir, policy, who),
            "inputs": [*run, self.ctx.visitor],
        }
        self.resume.click(**resume, outputs=None, **private).then(**poll)
        self.abort.click(lambda: gr.Row(visible=True), None, self.confirm_row, **private)
        self.cancel.click(lambda: gr.Row(visible=False), None, self.confirm_row, **private)
        self.confirm.click(abort_confirmed, run, self.confirm_row, **private).then(**poll)


def build_monitor_tab(ctx: StudioContext) -> MonitorTab:
    """Build the Monitor inside the current ``gr.Tab``."""
    return MonitorTab(ctx)
