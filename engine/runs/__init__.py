"""The control side of runs, no torch: status, control, standby, supervisor, queue, artifacts.

``engine.runs`` is the API for other programs (the studio, scripts): the names below are re-exported from
``engine.runs.control``, ``engine.runs.requests`` and ``engine.runs.status`` so that
``from engine import runs; runs.start(...)`` works.
"""

from engine.runs.control import (
    RunAlreadyRunning,
    RunError,
    abort,
    create_and_start,
    create_run,
    delete,
    find_run,
    keep_standby,
    new_run_id,
    resume,
    resume_point,
    run_processes,
    start,
    start_lock,
    stop,
)
from engine.runs.requests import pause, resume_paused, save_now
from engine.runs.status import (
    RunSummary,
    active_runs,
    list_runs,
    read_metrics,
    run_dirs,
    status,
    summarize,
    wait,
)

__all__ = [
    "RunAlreadyRunning",
    "RunError",
    "RunSummary",
    "abort",
    "active_runs",
    "create_and_start",
    "create_run",
    "delete",
    "find_run",
    "keep_standby",
    "list_runs",
    "new_run_id",
    "pause",
    "read_metrics",
    "resume",
    "resume_paused",
    "resume_point",
    "run_dirs",
    "run_processes",
    "save_now",
    "start",
    "start_lock",
    "status",
    "stop",
    "summarize",
    "wait",
]
