"""The studio's HTTP API (``gradio_client`` / MCP): list runs, read a run's status and metrics, stop, resume, save a
checkpoint now, pause and continue.

The page's own events are private plumbing (they take session state); these endpoints take plain run ids,
so a script can watch and steer runs the same way the page does. They are plain functions: a run they cannot
act on raises ``engine.runs.RunError``, which studio.app turns into the message the caller sees when it
registers them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from engine.api import runs
from studio.path_guard import resolve_run
from studio.runs.data import COLUMNS, RunIndex


def endpoints(workspace: Path) -> list[Callable[..., Any]]:
    """The API's functions for one workspace; each is published under its own name."""
    index = RunIndex(workspace)

    def list_runs() -> list[dict[str, Any]]:
        """Every run of the workspace, newest first: name, state, step, losses, start time and run id."""
        return [dict(zip(COLUMNS, row.cells(), strict=True)) for row in index.rows()]

    def run_status(run_id: str) -> dict[str, Any]:
        """The reconciled status of one run (state, step, max_steps, epoch, error, checkpoints, ...)."""
        return asdict(runs.status(resolve_run(workspace, run_id)))

    def run_metrics(run_id: str, offset: int = 0) -> dict[str, Any]:
        """Metric events written since byte ``offset``, and the offset to pass next time."""
        events, next_offset = runs.read_metrics(resolve_run(workspace, run_id), int(offset))
        return {"events": events, "offset": next_offset}

    def stop_run(run_id: str) -> bool:
        """Ask a run to stop after its current step (it saves a checkpoint); False if it was not running."""
        return runs.stop(resolve_run(workspace, run_id))

    def resume_run(run_id: str) -> int:
        """Continue a stopped, failed or aborted run from its newest checkpoint; returns the supervisor's pid."""
        return runs.resume(resolve_run(workspace, run_id))

    def save_run(run_id: str) -> bool:
        """Save a checkpoint at the end of the current step while the run goes on; False if it is not running
        or paused."""
        return runs.save_now(resolve_run(workspace, run_id))

    def pause_run(run_id: str) -> bool:
        """Pause a running run after its current step (the process waits, holding its memory); False if it is not
        running."""
        return runs.pause(resolve_run(workspace, run_id))

    def continue_run(run_id: str) -> bool:
        """Let a paused run go on from the step where it waits, in the same process; False if it is not paused."""
        return runs.resume_paused(resolve_run(workspace, run_id))

    return [list_runs, run_status, run_metrics, stop_run, resume_run, save_run, pause_run, continue_run]
