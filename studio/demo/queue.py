"""Demo mode's queue, as the studio uses it: a visitor's Start joins the line (when the line is not full), the
studio's scheduler (studio.queue.scheduler) starts it when its devices are free, and a visitor can leave the line.

The queue itself lives in the run directories (engine.runs.queue); this module adds the visitor rules (one
queued or running run each, only their own runs).
"""

from __future__ import annotations

from pathlib import Path

from engine.api import OPEN_STATES, RunConfig, RunStatus, run_queue, runs, workspace_of
from studio.demo.ownership import check_owner, owned_run_dirs, owner_tag
from studio.demo.policy import DemoPolicy
from studio.demo.quota import start_refusal
from studio.i18n.catalog import SOURCE, key, text
from studio.markup import STATE_WORDS
from studio.queue.words import queue_message

CREATE_FAILED = key("start.create_failed")  # as one's own studio says it (studio.train.starting)
NO_VISITOR_KEY, QUEUE_FULL, BUSY, NOT_STARTED = (
    key(f"demo.{name}") for name in ("no_visitor", "queue_full", "busy", "not_started")
)
NO_VISITOR = text(NO_VISITOR_KEY)  # its English


def visitor_busy(workspace: Path, policy: DemoPolicy, visitor: str | None) -> list[RunStatus]:
    """The visitor's runs that are queued or going (statuses reconciled)."""
    statuses = [runs.status(run_dir) for run_dir in owned_run_dirs(workspace, policy, visitor)]
    return [status for status in statuses if status.state in OPEN_STATES]


def queue_full(workspace: Path, policy: DemoPolicy, lang: str = SOURCE) -> str | None:
    """Why the demo's line takes no more runs (every visitor's queued runs at ``policy.max_queued_runs``), in
    ``lang``."""
    waiting = len(run_queue.queued_runs(workspace))
    if waiting < policy.max_queued_runs:
        return None
    return text(QUEUE_FULL, lang, count=waiting)


def _refusal(workspace: Path, policy: DemoPolicy, visitor: str, lang: str = SOURCE) -> str | None:
    """Why the visitor may not put a run in line now: one of theirs is busy, the line is full, or their disk."""
    busy = visitor_busy(workspace, policy, visitor)
    if busy:
        return _busy_message(busy, lang)
    return queue_full(workspace, policy, lang) or start_refusal(workspace, policy, visitor, lang)


def _busy_message(busy: list[RunStatus], lang: str = SOURCE) -> str:
    run = busy[0]
    state = text(STATE_WORDS[run.state], lang) if run.state in STATE_WORDS else run.state
    return text(BUSY, lang, state=state, name=run.name)


def enqueue_run(
    config: RunConfig,
    workspace: Path,
    policy: DemoPolicy,
    visitor: str | None,
    launcher: run_queue.Launcher | None = None,
    lang: str = SOURCE,
) -> tuple[Path | None, str]:
    """Create the visitor's run in state ``queued`` (owner and time limit in its status) and start it at once
    when its devices are free. Returns the run directory (None when refused) and the message for the page (where
    the studio can, in ``lang``)."""
    visitor = policy.visitor(visitor)
    if visitor is None:
        return None, text(NO_VISITOR_KEY, lang)
    with runs.start_lock(Path(workspace)):  # a double click must not queue two runs
        refusal = _refusal(workspace, policy, visitor, lang)
        if refusal:
            return None, text(NOT_STARTED, lang, reason=refusal)
        try:
            owner = owner_tag(visitor)
            run_dir = runs.create_run(config, Path(workspace), owner=owner, time_limit_s=policy.time_limit_s)
        except (runs.RunError, OSError) as exc:
            return None, text(CREATE_FAILED, lang, error=exc)
    run_queue.start_next_queued(workspace, launcher)
    return run_dir, queue_message(run_dir, lang)


def resume_queued(
    run_dir: Path,
    policy: DemoPolicy,
    visitor: str | None,
    launcher: run_queue.Launcher | None = None,
    lang: str = SOURCE,
) -> str:
    """Queue a stopped, failed or aborted run of the visitor to continue from its newest checkpoint; returns the
    message (in ``lang``, as the refusals are).

    Raises RunError when it cannot (not theirs, nothing to resume from, another of their runs is busy).
    ``launcher`` as for engine.runs.queue.start_next_queued.
    """
    run_dir = check_owner(run_dir, policy, visitor)
    checkpoint = runs.resume_point(run_dir)  # the engine's one rule of what can be resumed, and from where
    workspace = workspace_of(run_dir)
    with runs.start_lock(workspace):
        refusal = _refusal(workspace, policy, visitor, lang)
        if refusal:
            raise runs.RunError(refusal)
        run_queue.enqueue(run_dir, resume_checkpoint=checkpoint, time_limit_s=policy.time_limit_s)
    run_queue.start_next_queued(workspace, launcher)
    return queue_message(run_dir, lang)
