"""The Monitor tab: live charts, progress, state, log and the controls of one run: Save now, Pause / Continue,
Stop, Resume and Abort.

The charts, the progress bar, the stats and the log are plain containers that the page script assets/live_charts.js
fills from studio.monitor.live, outside Gradio's events, as the trainer writes. The rest (header and state, buttons,
error, config) is refreshed by a Gradio event on the buttons, on a run or tab switch, and when the page script sees
its key change in a charts answer (``monitor_key``: the run started, paused, stopped or ended; it clicks a hidden
button). Each browser tab keeps a ``MonitorSession`` in a ``gr.State`` and is sent only the
outputs that changed; everything else is ``gr.skip()``. A GRPO run's "Sample completions" section
(studio.monitor.completions) has a timer of its own, which ticks only while the section is open. The components
are built in studio.monitor.widgets; here are their handlers and events.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import gradio as gr

from engine.api import run_queue, runs, workspace_of
from studio.context import StudioContext
from studio.demo.caller import Caller
from studio.demo.queue import resume_queued
from studio.i18n.catalog import key
from studio.i18n.widgets import marked
from studio.monitor.completions import CompletionsPanel, reward_labels
from studio.monitor.session import MonitorSession, MonitorUpdate
from studio.monitor.widgets import MonitorLayout
from studio.queue.scheduler import resume_in_line
from studio.queue.words import queue_message

# Stop's label by Controls.stop_label (a queued run's Stop is Cancel: it leaves the line), for the page to translate.
STOP_LABELS = {"Stop": marked("monitor.stop"), "Cancel": marked("monitor.cancel_queued")}
# The toasts of the buttons (studio.i18n), said in the page's language.
CANCELLED, STOPPING, NOT_RUNNING, SAVING, PAUSING, CONTINUING, NOT_PAUSED, ABORTED = (
    key(f"monitor.toast.{name}")
    for name in ("cancelled", "stopping", "not_running", "saving", "pausing", "continuing", "not_paused", "aborted")
)


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
            gr.Button(interactive=controls.stop, value=STOP_LABELS.get(controls.stop_label, controls.stop_label)),
            gr.Button(interactive=controls.resume),
            gr.Button(interactive=controls.abort),
        ]
    return values


def refresh(caller: Caller, run_dir: str | None, session: MonitorSession | None) -> list[Any]:
    """The refresh's handler: the session (created on first use) and the changed outputs, in the caller's language
    (in demo mode without the server's paths: ``MonitorUpdate.shown``)."""
    session = session or MonitorSession()
    return [session, *_outputs_of(session.update(run_dir, caller.language).shown(caller))]


def redraw(caller: Caller, run_dir: str | None, session: MonitorSession | None) -> list[Any]:
    """Send every output again (after a tab switch: an update that reached a hidden tab may not have stuck)."""
    if session is not None:
        session.forget_sent()
    return refresh(caller, run_dir, session)


def completions_refresh(
    caller: Caller,
    run_dir: str | None,
    panel: CompletionsPanel | None,
    reward: str | None,
    show: str | None,
    count: Any,
    force: bool = False,
    opened: bool | None = None,
) -> list[Any]:
    """The sample panel's handler (studio.monitor.completions): the panel state (created on first use), then the
    accordion, the Reward dropdown, the table and the panel's timer, each gr.skip() where nothing changed (the
    table's words and the total's name in the caller's language)."""
    panel = panel or CompletionsPanel()
    update = panel.update(caller, run_dir, reward, show, count, force, opened)
    skip = gr.skip()
    return [
        panel,
        # with the open state the panel knows, which a hidden accordion shown again may have lost
        skip if update.visible is None else gr.Accordion(visible=update.visible, open=panel.open),
        skip
        if update.choices is None
        else gr.Dropdown(
            choices=reward_labels(update.choices, caller.language),
            value=update.reward,
            visible=len(update.choices) > 1,  # the total and at least one reward
        ),
        skip if update.table is None else update.table,
        skip if update.polling is None else gr.Timer(active=update.polling),
    ]


def stop_clicked(caller: Caller, run_dir: str | None) -> None:
    """Ask the run to stop after its current step (it saves a checkpoint and reads ``stopped``); a queued run
    leaves the queue instead. The toasts of this and the other buttons are in the caller's language."""
    if run_dir and run_queue.cancel_queued(Path(run_dir)):
        gr.Info(caller.say(CANCELLED))
    elif run_dir and runs.stop(Path(run_dir)):
        gr.Info(caller.say(STOPPING))
    else:
        gr.Warning(caller.say(NOT_RUNNING))


def save_clicked(caller: Caller, run_dir: str | None) -> None:
    """Ask for a checkpoint at the end of the current step; the run goes on (a paused run stays paused)."""
    _ask(caller, run_dir, runs.save_now, caller.say(SAVING), caller.say(NOT_RUNNING))


def pause_clicked(caller: Caller, run_dir: str | None) -> None:
    """Ask the run to wait after its current step, in its process, holding its memory."""
    _ask(caller, run_dir, runs.pause, caller.say(PAUSING), caller.say(NOT_RUNNING))


def continue_clicked(caller: Caller, run_dir: str | None) -> None:
    """Let a paused run (or one asked to pause) go on from the step where it waits, in the same process."""
    _ask(caller, run_dir, runs.resume_paused, caller.say(CONTINUING), caller.say(NOT_PAUSED))


def _ask(
    caller: Caller,
    run_dir: str | None,
    request: Callable[[Path], bool],
    taken: str,
    refused: str,
) -> None:
    """Send one of the run's control requests (engine.runs) when the run is the caller's; say ``taken`` when
    the run's state takes it, ``refused`` when not."""
    run = _owned(caller, run_dir)
    if run is None:
        return
    if request(run):
        gr.Info(taken)
    else:
        gr.Warning(refused)


def _owned(caller: Caller, run_dir: str | None) -> Path | None:
    """The run a control acts on, when there is one and (in demo mode) it is the caller's; else None, with the
    same warning as for a run that does not exist."""
    if not run_dir:
        return None
    try:
        return caller.check(run_dir)
    except runs.RunError as exc:
        gr.Warning(str(exc))
        return None


def resume_clicked(caller: Caller, run_dir: str | None) -> None:
    """Continue the run from its newest checkpoint, in a new process: it joins the queue, and starts at once when
    its devices are free (in demo mode under the visitor rules). The engine's refusals stay in English."""
    if not run_dir:
        return
    lang = caller.language
    try:
        if caller.policy.enabled:
            gr.Info(resume_queued(Path(run_dir), caller.policy, caller.token, lang=lang))
        else:
            resume_in_line(Path(run_dir))
            gr.Info(queue_message(Path(run_dir), lang))  # what resume_in_line says, in the page's language
    except runs.RunError as exc:
        gr.Warning(caller.shown(str(exc), workspace_of(Path(run_dir))))


def abort_confirmed(caller: Caller, run_dir: str | None) -> Any:
    """Kill the run at once (no checkpoint); hides the confirmation again."""
    if run_dir and runs.abort(Path(run_dir)):
        gr.Warning(caller.say(ABORTED))
    return gr.Row(visible=False)


class MonitorTab(MonitorLayout):
    """The Monitor: its components (MonitorLayout) and their events."""

    def __init__(self, ctx: StudioContext):
        super().__init__(ctx)
        self._wire()
        self._wire_completions()
        self._wire_switches()

    def _wire_completions(self) -> None:
        ctx = self.ctx
        private: dict[str, Any] = {"api_visibility": "private"}
        filters = self.completions_inputs[1:]
        inputs = ctx.inputs(ctx.current_run, *self.completions_inputs)
        outputs = self.completions_outputs

        def handler(force: bool = False, opened: bool | None = None) -> dict[str, Any]:
            def fn(caller: Caller, run_dir: str | None, panel: Any, reward: Any, show: Any, count: Any) -> list[Any]:
                return completions_refresh(caller, run_dir, panel, reward, show, count, force, opened)

            return {"fn": ctx.handler(fn), "inputs": inputs, "outputs": outputs, "show_progress": "hidden", **private}

        self.completions_timer.tick(**handler(), concurrency_limit=None)
        for widget in filters:
            widget.input(**handler())
        self.completions.expand(**handler(force=True, opened=True))
        self.completions.collapse(**handler(opened=False))

    def _wire_switches(self) -> None:
        """A run switch refreshes the Monitor and its completions section, a tab switch sends both again (an update
        that reached a hidden tab may not have stuck): one event each for both, as Start makes both switches and
        every Gradio event costs the browser's main thread 65 ms or more."""
        ctx = self.ctx
        inputs = ctx.inputs(ctx.current_run, self.session, *self.completions_inputs)
        outputs = [*self.outputs, *self.completions_outputs]

        def switched(again: bool) -> Callable[..., list[Any]]:
            def fn(
                caller: Caller,
                run_dir: str | None,
                session: Any,
                panel: Any,
                reward: Any,
                show: Any,
                count: Any,
            ) -> list[Any]:
                monitor = (redraw if again else refresh)(caller, run_dir, session)
                samples = completions_refresh(caller, run_dir, panel, reward, show, count, force=again)
                return [*monitor, *samples]

            return ctx.handler(fn)

        quiet: dict[str, Any] = {"show_progress": "hidden", "api_visibility": "private"}
        ctx.current_run.change(switched(again=False), inputs, outputs, **quiet)
        if ctx.tabs is not None:  # fires on clicks and on programmatic switches alike
            ctx.tabs.change(switched(again=True), inputs, outputs, **quiet)

    def _wire(self) -> None:
        ctx = self.ctx
        inputs = ctx.inputs(ctx.current_run, self.session)
        # UI plumbing stays out of the API page; studio.runs.api offers the same actions by run id.
        private: dict[str, Any] = {"api_visibility": "private"}

        # Each handler says its words in the caller's language (the page's ts_lang cookie) and acts only on the
        # caller's runs.
        poll = {
            "fn": ctx.handler(refresh),
            "inputs": inputs,
            "outputs": self.outputs,
            "show_progress": "hidden",
            **private,
        }
        # The page script's refresh: what the page shows differs from the run's state, so everything is sent
        # again (a page applies two events' outputs in the order their answers arrive: what this session sent
        # last may not be what shows). Cheap, read-only and per session: no reason to queue one tab's behind
        # another's; a click while one is on its way runs after it, as the state it saw may be older.
        self.refresh.click(**{**poll, "fn": ctx.handler(redraw)}, concurrency_limit=None, trigger_mode="always_last")
        run = ctx.inputs(ctx.current_run)
        self.save.click(ctx.handler(save_clicked), run, None, **private).then(**poll)
        self.pause.click(ctx.handler(pause_clicked), run, None, **private).then(**poll)
        self.go_on.click(ctx.handler(continue_clicked), run, None, **private).then(**poll)
        self.stop.click(ctx.handler(stop_clicked), run, None, **private).then(**poll)
        self.resume.click(ctx.handler(resume_clicked), run, None, **private).then(**poll)
        self.abort.click(lambda: gr.Row(visible=True), None, self.confirm_row, **private)
        self.cancel.click(lambda: gr.Row(visible=False), None, self.confirm_row, **private)
        self.confirm.click(ctx.handler(abort_confirmed), run, self.confirm_row, **private).then(**poll)


def build_monitor_tab(ctx: StudioContext) -> MonitorTab:
    """Build the Monitor inside the current ``gr.Tab``."""
    return MonitorTab(ctx)
