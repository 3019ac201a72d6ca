"""Demo mode's queue, as the studio uses it: a visitor's Start joins the line (when the line is not full), the
studio's scheduler (studio.scheduler) starts it when its devices are free, and a visitor can leave the line.

The queue itself lives in the run directories (engine.runs.queue); this module adds the visitor rules (one
queued or running run each, only their own runs).
"""

from __future__ import annotations

from pathlib import Path

from engine import runs
from engine.config import RunConfig
from engine.runs import queue as run_queue
from engine.store.rundir import OPEN_STATES, RunStatus, update_status
from engine.store.workspace import workspace_of
from studio.demo.policy import DemoPolicy, check_owner, owned_run_dirs, owner_tag
from studio.demo.quota import start_refusal
from studio.scheduler import queue_message

NO_VISITOR = (
    "❌ Not started: this page has no visitor id. Reload the page; if it still has none, this address has had "
    "its share of new visitor ids for now: try again in a few minutes."
)


def visitor_busy(workspace: Path, policy: DemoPolicy, visitor: str | None) -> list[RunStatus]:
    """The visitor's runs that are queued or going (statuses reconciled)."""
    statuses = [runs.status(run_dir) for run_dir in owned_run_dirs(workspace, policy, visitor)]
    return [status for status in statuses if status.state in OPEN_STATES]


def queue_full(workspace: Path, policy: DemoPolicy) -> str | None:
    """Why the demo's line takes no more runs (every visitor's queued runs at ``policy.max_queued_runs``)."""
    waiting = len(run_queue.queued_runs(workspace))
    if waiting < policy.max_queued_runs:
        return None
    return f"the demo's line is full ({waiting} runs waiting): try again in a few minutes"


def _refusal(workspace: Path, policy: DemoPolicy, visitor: str) -> str | None:
    """Why the visitor may not put a run in line now: one of theirs is busy, the line is full, or their disk."""
    busy = visitor_busy(workspace, policy, visitor)
    if busy:
        return _busy_message(busy)
    return queue_full(workspace, policy) or start_refusal(workspace, policy, visitor)


def _busy_message(busy: list[RunStatus]) -> str:
    run = busy[0]
    return (
        f"you already have a run {run.state}: `{run.name}`. One run per visitor at a "
        "time: wait for it to finish, or stop it on the Monitor."
    )


def enqueue_run(
    config: RunConfig,
    workspace: Path,
    policy: DemoPolicy,
    visitor: str | None,
    launcher: run_queue.Launcher | None = None,
) -> tuple[Path | None, str]:
    """Create the visitor's run in state ``queued`` (owner and time limit in its status) and start it at once
    when its devices are free. Returns the run directory (None when refused) and the message for the page."""
    visitor = policy.visitor(visitor)
    if visitor is None:
        return None, NO_VISITOR
    with runs.start_lock(Path(workspace)):  # a double click must not queue two runs
        refusal = _refusal(workspace, policy, visitor)
        if refusal:
            return None, f"⏳ Not started: {refusal}"
        try:
            run_dir = runs.create_run(config, workspace=Path(workspace))
            update_status(run_dir, owner=owner_tag(visitor), time_limit_s=policy.time_limit_s)
        except (runs.RunError, OSError) as exc:
            return None, f"❌ Could not create the run: {exc}"
    run_queue.start_next_queued(workspace, launcher)
    return run_dir, queue_message(run_dir)


def resume_queued(
    run_dir: Path, policy: DemoPolicy, visitor: str | None, launcher: run_queue.Launcher | None = None
) -> str:
    """Queue a stopped, failed or aborted run of the visitor to continue from its newest checkpoint; returns the
    message.

    Raises RunError when it cannot (not theirs, nothing to resume from, another of their runs is busy).
    ``launcher`` as for engine.runs.queue.start_next_queued.
    """
    run_dir = check_owner(run_dir, policy, visitor)
    checkpoint = runs.resume_point(run_dir)  # the engine's one rule of what can be resumed, and from where
    workspace = workspace_of(run_dir)
    with runs.start_lock(workspace):
        refusal = _refusal(workspace, policy, visitor)
        if refusal:
            raise runs.RunError(refusal)
        run_queue.enqueue(run_dir, resume_checkpoint=checkpoint, time_limit_s=policy.time_limit_s)
    run_queue.start_next_queued(workspace, launcher)
    return queue_message(run_dir)
