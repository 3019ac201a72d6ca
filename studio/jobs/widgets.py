"""The Gradio side the Evaluate and Export tabs share: Start / Cancel states, cancel, and re-attaching on open.

Each of those tabs follows one background job per browser tab (its directory in a ``gr.State``) with a
``gr.Timer`` that runs only while the job does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gradio as gr

from engine import jobs
from studio.context import StudioContext
from studio.demo.policy import NORMAL, DemoPolicy, owned_run_dirs, owns
from studio.jobs.view import finished_runs, pick_run, running_job
from studio.markup import message_html


def action_buttons(running: bool) -> list[Any]:
    """Start is usable while no job runs, Cancel while one does."""
    return [gr.Button(interactive=not running), gr.Button(interactive=running)]


def cancel_job(job_dir: str | None, what: str) -> str:
    """Ask the page's job to stop; its timer reports when it has."""
    if job_dir and jobs.cancel(Path(job_dir)):
        return message_html(f"Cancelling the {what}…", "warn")
    return message_html(f"No {what} is running.", "warn")


def tab_opened(
    workspace: Path,
    kind: str,
    current_run: str | None,
    run_id: str | None,
    job_dir: str | None,
    policy: DemoPolicy = NORMAL,
    visitor: str | None = None,
) -> list[Any]:
    """Offer the finished runs as they are now, and pick up a running job of ``kind`` (after a page reload);
    in demo mode only the visitor's runs and jobs."""
    choices = finished_runs(workspace, lambda status: owns(policy, status.owner, visitor))
    mine = [run_dir.name for run_dir in owned_run_dirs(workspace, policy, visitor)] if policy.enabled else None
    job_dir = job_dir or running_job(workspace, kind, mine)
    timer = gr.Timer(active=True) if job_dir else gr.skip()
    return [_relisted(choices, run_id, current_run), job_dir, timer]


def _relisted(choices: list[tuple[str, str]], run_id: str | None, current_run: str | None) -> dict[str, Any]:
    """The run picker with new choices. ``run_id`` is the pick when the tab was opened: while it is still offered
    the value is left alone, so a pick made since, before this answer arrives on a busy machine, is not undone."""
    if run_id in {value for _, value in choices}:
        return gr.update(choices=choices)
    return gr.update(choices=choices, value=pick_run(choices, run_id, current_run))


def refresh_on_open(ctx: StudioContext, kind: str, run: gr.Dropdown, job: gr.State, timer: gr.Timer) -> None:
    """Whenever a tab of the page is picked, refresh the run choices and re-attach to a running job."""
    if ctx.tabs is None:
        return
    ctx.tabs.select(
        lambda current, run_id, job_dir, who: tab_opened(
            ctx.workspace, kind, current, run_id, job_dir, ctx.policy, who
        ),
        [ctx.current_run, run, job, ctx.visitor],
        [run, job, timer],
        api_visibility="private",
    )
