"""What the Evaluate and Export tabs share: which runs they offer, and how a background job looks.

Pure functions of the workspace and of job statuses (engine.jobs), kept apart from the Gradio wiring so they
are tested directly. No Gradio and no ML library here.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from pathlib import Path

from engine import jobs, runs
from engine.config import ConfigError, load_config
from engine.jobs import JobStatus
from engine.store.rundir import CONFIG_FILE, RunStatus, checkpoint_steps, final_weights
from studio.markup import message_html, progress_bar_html
from studio.path_guard import resolve_run

FINAL_WEIGHTS = ""  # the weights choice that means "the run's final adapter / model"


def _has_final_weights(run_dir: Path) -> bool:
    """Whether the run's final adapter (LoRA) or model (full, freeze) holds weights; not when its config is
    unreadable, since the config says which of the two it is."""
    try:
        config = load_config(run_dir / CONFIG_FILE)
    except ConfigError:
        return False
    return final_weights(run_dir, config.adapter.is_lora) is not None


def finished_runs(workspace: Path, visible: Callable[[RunStatus], bool] | None = None) -> list[tuple[str, str]]:
    """(label, run id) of the runs that have weights, newest first: those that are not going (final or a
    checkpoint), and those still going that have a checkpoint (made by Save now, say), labelled with their state;
    only those whose status ``visible`` accepts (in demo mode, the visitor's own)."""
    found = []
    for run_dir in runs.run_dirs(workspace):
        current = runs.status(run_dir)
        if visible is not None and not visible(current):
            continue
        has_weights = current.checkpoints or (not current.is_active and _has_final_weights(run_dir))
        if not has_weights:
            continue
        name = current.name or run_dir.name
        found.append(
            (current.created_at or 0, run_dir.name, f"{name} ({current.state})" if current.is_active else name)
        )
    found.sort(reverse=True)
    return [(f"{name} · {run_id}", run_id) for _, run_id, name in found]


def weight_choices(workspace: Path, run_id: str | None) -> list[tuple[str, str]]:
    """The final result (when there is one) and every checkpoint of a run, as (label, value)."""
    if not run_id:
        return []
    try:
        run_dir = resolve_run(workspace, run_id)
    except runs.RunError:
        return []
    choices = [("final result", FINAL_WEIGHTS)] if _has_final_weights(run_dir) else []
    return choices + [(f"checkpoint {step}", str(step)) for step in reversed(checkpoint_steps(run_dir))]


def checkpoint_of(weights: str | None) -> int | None:
    """The checkpoint step of a weights choice; None for the final result."""
    return int(weights) if weights else None


def pick_run(choices: list[tuple[str, str]], current: str | None, preferred: str | None) -> str | None:
    """Keep the picked run while it is offered, else the preferred one (the run open in the Monitor), else the
    newest."""
    ids = [run_id for _, run_id in choices]
    for candidate in (current, preferred and Path(preferred).name):
        if candidate in ids:
            return candidate
    return ids[0] if ids else None


def progress_html(status: JobStatus | None, what: str) -> str:
    """A job's progress: a bar with its phase while it runs; what happened once it is over."""
    if status is None:
        return ""
    state = status.state
    if state == "completed":
        return message_html(f"{what.capitalize()} finished.", "ok")
    if state == "cancelled":
        return message_html(f"{what.capitalize()} cancelled; nothing half-written was kept.", "warn")
    if state == "failed":
        return message_html(f"{what.capitalize()} failed: {status.error or 'unknown error'}", "error")
    done, total = status.done or 0, status.total or 0
    count = f"<b>{done} / {total}</b>" if total else ""
    phase = html.escape(str(status.phase or "starting"))
    text = f'<span><span class="ts-pulse"></span> {phase}</span><span>{count}</span>'
    return progress_bar_html(100 * done / total if total else 0, text, "ts-job-progress", "ts-fill ts-fill-live")


def job_status(job_dir: str | None) -> JobStatus | None:
    """The reconciled status of the job a page follows, or None when it follows none (or it vanished)."""
    if not job_dir or not Path(job_dir).is_dir():
        return None
    return jobs.status(Path(job_dir))


def running_job(workspace: Path, kind: str, run_ids: list[str] | None = None) -> str | None:
    """The newest running job of ``kind`` (of one of ``run_ids`` when given): a page loaded while one runs picks
    up its progress again."""
    if run_ids is None:
        job_dir = jobs.active_job(workspace, kind)
        return str(job_dir) if job_dir else None
    found = [job for run_id in run_ids if (job := jobs.active_job(workspace, kind, run_id=run_id))]
    return str(max(found, key=lambda job: job.name)) if found else None
