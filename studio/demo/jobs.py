"""Demo mode's background jobs (evaluate, benchmark, export): how many run at once, and the one export a visitor
keeps.

Each job is a process of its own beside the training run, and its Start is one click: without a bound, one visitor
clicking Export again and again would start as many processes (each loading torch and the model) and write as many
exports, each under a new name. So in demo mode a visitor runs one job at a time, all visitors together at most
``DemoPolicy.max_jobs``, each for at most ``DemoPolicy.max_job_minutes`` (so no visitor holds one of those places
for hours: an evaluation of a large upload, say), and a visitor keeps one export (in
``WORKSPACE/exports/visitors/<owner>/``, counted in their quota): a new export replaces the one before, whose zip the
visitor was handed already. Outside demo mode nothing here applies.
"""

from __future__ import annotations

import shutil
import threading
from collections.abc import Callable
from pathlib import Path

from engine.api import JobStatus, jobs
from studio.demo.caller import Caller
from studio.demo.policy import visitor_exports
from studio.i18n.catalog import key

# A job's kind as the engine records it (engine.evaluate.evaluations, ...benchmarks.results, engine.export.exports)
# -> what a visitor reads when one of theirs is still running.
YOURS = {kind: key(f"demo.jobs.yours.{kind}") for kind in ("evaluate", "benchmark", "export")}
FULL = key("demo.jobs.full")
# Held from the check to the job's start: two Starts at once (Export beside Evaluate) must not both pass the check.
_STARTING = threading.Lock()


def running_jobs(workspace: Path) -> list[JobStatus]:
    """The workspace's jobs that are still going, newest first."""
    found = (jobs.status(job_dir) for job_dir in jobs.list_jobs(workspace))
    return [status for status in found if status.is_running]


def job_refusal(caller: Caller) -> str | None:
    """Why the caller may not start a job now, in their language: one of theirs is still running, or the demo runs
    as many as it runs at once; None when they may (and always outside demo mode)."""
    if not caller.policy.enabled:
        return None
    running = running_jobs(caller.workspace)
    own_runs = {run_dir.name for run_dir in caller.run_dirs()}
    mine = next((status for status in running if status.labels.get("run_id") in own_runs), None)
    if mine is not None:
        return caller.say(YOURS.get(mine.kind or "", YOURS["evaluate"]), run=mine.labels["run_id"])
    if len(running) >= caller.policy.max_jobs:
        return caller.say(FULL, count=len(running))
    return None


def start_job(caller: Caller, start: Callable[..., Path]) -> Path:
    """``start(time_limit_s=...)`` (which starts a job that runs at most that long and returns its directory) when
    the caller may start one; else JobError with why (``job_refusal``). Outside demo mode, at once and without a
    limit; in demo mode for at most ``DemoPolicy.max_job_minutes``."""
    limit = caller.policy.job_time_limit_s
    if not caller.policy.enabled:
        return start(time_limit_s=limit)
    with _STARTING:
        refusal = job_refusal(caller)
        if refusal:
            raise jobs.JobError(refusal)
        return start(time_limit_s=limit)


def export_folder(caller: Caller) -> Path | None:
    """Where the caller's export goes in demo mode, emptied of the export before it (none of their jobs runs by
    then: ``start_job``); None outside demo mode (the export goes where its name says)."""
    folder = visitor_exports(caller.workspace, caller.policy, caller.token)
    if folder is None:
        return None
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder
