"""The ``pruned`` run state that sweeps add: final, not resumable, and shown as pruned with its reason (never as
failed) wherever the studio labels a run's state: the Monitor's badge, progress line and controls, the Runs list."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine import runs
from engine.config import parse_config
from engine.store.paths import PROJECT_ROOT
from engine.store.rundir import (
    ACTIVE_STATES,
    FINAL_STATES,
    OPEN_STATES,
    PRUNED,
    RESUMABLE_STATES,
    RUN_STATES,
    RunStatus,
    update_status,
)

REASON = "pruned at step 20: eval_loss 2.31 is worse than the median 1.9 of earlier trials at that step"


def pruned_run(workspace: Path) -> Path:
    run_dir = runs.create_run(parse_config({"name": "s-trial-1"}), workspace=workspace)
    update_status(run_dir, state=PRUNED, error=REASON, step=22, max_steps=40, sweep={"name": "s", "trial": 1})
    return run_dir


def test_pruned_is_a_final_state_that_is_not_resumed() -> None:
    assert PRUNED in FINAL_STATES and PRUNED in RUN_STATES
    assert PRUNED not in RESUMABLE_STATES and PRUNED not in OPEN_STATES and PRUNED not in ACTIVE_STATES
    status = RunStatus(state=PRUNED)
    assert status.is_final and not status.is_resumable and not status.is_open


def test_a_pruned_run_keeps_its_state_and_reason_and_is_not_resumed(tmp_path: Path) -> None:
    run_dir = pruned_run(tmp_path)
    current = runs.status(run_dir)  # reconciled: no process, but a final state is left as it is
    assert (current.state, current.error, current.sweep) == (PRUNED, REASON, {"name": "s", "trial": 1})
    assert current.log_tail is None  # the tail of the log comes with failed runs only
    with pytest.raises(runs.RunError, match="the run is pruned; only a stopped, failed or aborted run"):
        runs.resume_point(run_dir)


def test_the_monitor_shows_pruned_with_its_reason_not_failed() -> None:
    from studio.monitor.view import controls_for, error_html, header_html, progress_html, run_note

    status = RunStatus(state=PRUNED, error=REASON, step=22, max_steps=40, checkpoints=[22])
    assert run_note(status) == REASON
    progress = progress_html(status, None)
    assert f"<b>{REASON}</b>" in progress and "ts-state-pruned" in progress and "ETA" not in progress
    assert ">pruned<" in header_html(status, "run-id") and "failed" not in header_html(status, "run-id")
    assert error_html(status) == ""  # the red "Run failed" box is for failed runs
    controls = controls_for(status)
    assert (controls.stop, controls.resume, controls.abort) == (False, False, False)


def test_the_runs_list_shows_pruned_with_its_reason(tmp_path: Path) -> None:
    from studio.markup import badge_html
    from studio.runs.data import STATE_COLUMN, RunIndex

    pruned_run(tmp_path)
    [row] = RunIndex(tmp_path).rows()
    assert (row.state, row.note) == (PRUNED, REASON)
    assert row.cells()[STATE_COLUMN] == PRUNED
    badge = badge_html(row.state, row.note)
    assert 'class="ts-badge ts-state-pruned"' in badge and f'title="{REASON}"' in badge and ">pruned<" in badge


def test_the_page_styles_the_pruned_badge_and_bar() -> None:
    css = (PROJECT_ROOT / "assets" / "studio.css").read_text()
    assert ".ts-badge.ts-state-pruned" in css and ".ts-state-pruned .ts-fill" in css
