"""The Gradio side the Evaluate and Export tabs share: Start / Cancel states, cancel, and re-attaching on open.

Each of those tabs follows one background job per browser tab (its directory in a ``gr.State``) with a
``gr.Timer`` that runs only while the job does. What they say is in the page's language.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gradio as gr

from engine.api import jobs
from studio.context import StudioContext
from studio.demo.caller import Caller
from studio.i18n.catalog import SOURCE, key
from studio.jobs.view import JOB_KINDS, finished_runs, pick_run, running_job, weight_choices
from studio.markup import message_html

CANCELLING = {kind: key(f"jobs.{kind}.cancelling") for kind in JOB_KINDS}
NOT_RUNNING = {kind: key(f"jobs.{kind}.not_running") for kind in JOB_KINDS}


def action_buttons(running: bool) -> list[Any]:
    """Start is usable while no job runs, Cancel while one does."""
    return [gr.Button(interactive=not running), gr.Button(interactive=running)]


def stale_outcome(job_dir: str | None) -> Any:
    """The progress line once the request changed (another run picked, the name edited): emptied of the last
    Start's answer (a refusal, or how the last job ended), which no longer answers what the form now asks; left
    alone while a job runs (``job_dir``), whose progress it follows."""
    return gr.skip() if job_dir else ""


def cancel_job(caller: Caller, job_dir: str | None, what: str) -> str:
    """Ask the page's job (of kind ``what``, studio.jobs.view.JOB_KINDS) to stop; its timer reports when it has.
    Said in the caller's language."""
    if job_dir and jobs.cancel(Path(job_dir)):
        return message_html(caller.say(CANCELLING[what]), "warn")
    return message_html(caller.say(NOT_RUNNING[what]), "warn")


def tab_opened(
    caller: Caller,
    kind: str,
    current_run: str | None,
    run_id: str | None,
    job_dir: str | None,
    weights: str | None = None,
) -> list[Any]:
    """Offer the runs with weights as they are now, and pick up a running job of ``kind`` (after a page reload);
    in demo mode only the visitor's runs and jobs. The picked run's weights are listed again too: a checkpoint
    saved since (Save now on a running run) shows at once. Labels are in the caller's language."""
    workspace, lang = caller.workspace, caller.language
    choices = finished_runs(workspace, lambda status: caller.owns(status.owner), lang)
    mine = [run_dir.name for run_dir in caller.run_dirs()] if caller.policy.enabled else None
    job_dir = job_dir or running_job(workspace, kind, mine)
    timer = gr.Timer(active=True) if job_dir else gr.skip()
    return [
        _relisted(choices, run_id, current_run),
        job_dir,
        timer,
        _weights_relisted(workspace, choices, run_id, weights, lang),
    ]


def _relisted(choices: list[tuple[str, str]], run_id: str | None, current_run: str | None) -> dict[str, Any]:
    """The run picker with new choices. ``run_id`` is the pick when the tab was opened: while it is still offered
    the value is left alone, so a pick made since, before this answer arrives on a busy machine, is not undone."""
    if run_id in {value for _, value in choices}:
        return gr.update(choices=choices)
    return gr.update(choices=choices, value=pick_run(choices, run_id, current_run))


def _weights_relisted(
    workspace: Path, choices: list[tuple[str, str]], run_id: str | None, weights: str | None, lang: str = SOURCE
) -> Any:
    """The weights picker of a run that stays picked, with its weights as they are now (the pick kept while it is
    offered); a new pick of run lists its own weights when it changes."""
    if run_id not in {value for _, value in choices}:
        return gr.skip()
    offered = weight_choices(workspace, run_id, lang)
    values = [value for _, value in offered]
    return gr.update(choices=offered, value=weights if weights in values else (values[0] if values else None))


def refresh_on_open(
    ctx: StudioContext, kind: str, run: gr.Dropdown, job: gr.State, timer: gr.Timer, weights: gr.Dropdown
) -> None:
    """Whenever the tab is opened, refresh the run choices and the picked run's weights, and re-attach to a running
    job (the caller's, in the language of the page)."""
    on_open = ctx.on_open()
    if on_open is None:
        return

    def opened(
        caller: Caller, current: str | None, run_id: str | None, job_dir: str | None, picked: str | None
    ) -> list[Any]:
        return tab_opened(caller, kind, current, run_id, job_dir, picked)

    on_open(
        ctx.handler(opened),
        ctx.inputs(ctx.current_run, run, job, weights),
        [run, job, timer, weights],
        api_visibility="private",
    )
