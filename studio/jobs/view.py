"""What the Evaluate and Export tabs share: which runs they offer, and how a background job looks.

Pure functions of the workspace and of job statuses (engine.runs.jobs), kept apart from the Gradio wiring so they
are tested directly. No Gradio and no ML library here.

What they write is in ``lang`` (English by default): the weights' labels, a run's state, a job's outcome, and
its phase: the job writes that in English (engine.evaluate, engine.export), and ``said_phase`` says the phases it
knows again (one it does not know stays as written).
"""

from __future__ import annotations

import html
from collections.abc import Callable
from pathlib import Path

from engine.api import (
    CONFIG_FILE,
    ConfigError,
    JobStatus,
    RunStatus,
    checkpoint_steps,
    final_weights,
    jobs,
    load_config,
    runs,
)
from studio.i18n import catalog
from studio.i18n.catalog import SOURCE, key, text
from studio.markup import STATE_WORDS, message_html, progress_bar_html
from studio.path_guard import resolve_run

FINAL_WEIGHTS = ""  # the weights choice that means "the run's final adapter / model"
FINAL_LABEL, CHECKPOINT_LABEL = key("jobs.weights.final"), key("jobs.weights.checkpoint")
PICK_RUN = key("jobs.pick_run")  # what both tabs say to a Start without a run
BAD_COUNT = key("jobs.refuse.count")  # a count box (rows, documents) below 1


def bad_count(value: float | None) -> bool:
    """Whether a count box holds neither nothing (all) nor 1 or more. The boxes set no ``minimum``: Gradio would
    refuse such a value itself, before the handler, in English and naming no field."""
    return value is not None and not value >= 1


UNKNOWN_ERROR = key("jobs.unknown_error")
JOB_KINDS = ("evaluation", "export", "benchmark")  # a job's kind, as the tabs name it: the keys of its words
# A job's outcome in words, by its kind and state (``{error}``: a failed job's error, as the engine wrote it).
OUTCOMES = {
    (kind, state): key(f"jobs.{kind}.{state}") for kind in JOB_KINDS for state in ("completed", "cancelled", "failed")
}
# The phases the evaluation and export jobs write (engine.evaluate.worker, .models, .preference, .rewards;
# engine.export.worker), their English in en.json with the values they name as ``{placeholders}``; the first that
# reads a phase says it.
PHASES = [
    key(f"jobs.phase.{name}")
    for name in (
        "starting",
        "loading_data",
        "saving_results",
        "eval_loss",
        "generating",
        "scoring",
        "completions",
        "loading_base_dtype",  # before "loading the {weights}", which would read it too
        "loading_tuned",
        "loading_base",
        "loading_weights",
        "merging",
        "saving_merged",
        "writing_zip",
        "creating_repo",
        "uploading",
        "copying",
        "model_card",
        "moving",
        "preparing_tasks",  # engine.evaluate.benchmarks.runner
        "benchmark_task",  # "{model}: {task}" last: it reads any phase with a colon the ones above did not
    )
]
MODEL_WORDS = {model: key(f"jobs.model.{model}") for model in ("base", "tuned")}  # a phase's {model}


def _has_final_weights(run_dir: Path) -> bool:
    """Whether the run's final adapter (LoRA) or model (full, freeze) holds weights; not when its config is
    unreadable, since the config says which of the two it is."""
    try:
        config = load_config(run_dir / CONFIG_FILE)
    except ConfigError:
        return False
    return final_weights(run_dir, config.adapter.is_lora) is not None


def finished_runs(
    workspace: Path, visible: Callable[[RunStatus], bool] | None = None, lang: str = SOURCE
) -> list[tuple[str, str]]:
    """(label, run id) of the runs that have weights, newest first: those that are not going (final or a
    checkpoint), and those still going that have a checkpoint (made by Save now, say), labelled with their state
    (in ``lang``); only those whose status ``visible`` accepts (in demo mode, the visitor's own)."""
    found = []
    for run_dir in runs.run_dirs(workspace):
        current = runs.status(run_dir)
        if visible is not None and not visible(current):
            continue
        has_weights = current.checkpoints or (not current.is_active and _has_final_weights(run_dir))
        if not has_weights:
            continue
        name = current.name or run_dir.name
        state = text(STATE_WORDS[current.state], lang) if current.state in STATE_WORDS else current.state
        found.append((current.created_at or 0, run_dir.name, f"{name} ({state})" if current.is_active else name))
    found.sort(reverse=True)
    return [(f"{name} · {run_id}", run_id) for _, run_id, name in found]


def weight_choices(workspace: Path, run_id: str | None, lang: str = SOURCE) -> list[tuple[str, str]]:
    """The final result (when there is one) and every checkpoint of a run, as (label, value), labelled in
    ``lang``."""
    if not run_id:
        return []
    try:
        run_dir = resolve_run(workspace, run_id)
    except runs.RunError:
        return []
    choices = [(text(FINAL_LABEL, lang), FINAL_WEIGHTS)] if _has_final_weights(run_dir) else []
    steps = reversed(checkpoint_steps(run_dir))
    return choices + [(text(CHECKPOINT_LABEL, lang, step=step), str(step)) for step in steps]


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


def said_phase(phase: str, lang: str = SOURCE) -> str:
    """A job's phase (English, as the job wrote it) in ``lang``; a phase not in ``PHASES`` as it is."""

    def said_model(values: dict[str, str]) -> dict[str, str]:
        model = values.get("model")
        return {**values, "model": text(MODEL_WORDS[model], lang)} if model in MODEL_WORDS else values

    return catalog.say_again(phase, PHASES, lang, said_model)


def progress_html(status: JobStatus | None, what: str, lang: str = SOURCE) -> str:
    """A job's progress: a bar with its phase while it runs; what happened once it is over. ``what`` is the job's
    kind (``JOB_KINDS``); the words are in ``lang``."""
    if status is None:
        return ""
    state = status.state
    if state == "completed":
        return message_html(text(OUTCOMES[what, state], lang), "ok")
    if state == "cancelled":
        return message_html(text(OUTCOMES[what, state], lang), "warn")
    if state == "failed":
        error = status.error or text(UNKNOWN_ERROR, lang)
        return message_html(text(OUTCOMES[what, state], lang, error=error), "error")
    done, total = status.done or 0, status.total or 0
    count = f"<b>{done} / {total}</b>" if total else ""
    phase = html.escape(said_phase(str(status.phase or "starting"), lang))
    line = f'<span><span class="ts-pulse"></span> {phase}</span><span>{count}</span>'
    return progress_bar_html(100 * done / total if total else 0, line, "ts-job-progress", "ts-fill ts-fill-live")


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
