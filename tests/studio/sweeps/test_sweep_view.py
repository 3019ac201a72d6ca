"""The Sweeps tab's view of a real small study (no training): the trials ranked with their badges, the
parallel-coordinates and progress charts, the best trial, the driver's state and the sweep picker."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from engine.store.rundir import update_status
from studio.sweeps import view
from tests.studio.sweeps.small_study import PRUNED_NOTE, make_study


def test_trials_are_ranked_by_the_objective_with_the_run_states_as_badges(workspace: Path) -> None:
    shown = view.load_view(workspace, "small")
    assert shown.driver is None and shown.summary is not None
    rows = view.trial_rows(shown)
    assert [row[:2] for row in rows] == [[1, 0], [2, 1], ["-", 2], ["-", 3], ["-", 4]]
    assert [row[3] for row in rows] == ["1.5", "2.5", "-", "-", "-"]
    assert rows[0][4] == "train.learning_rate=0.003 adapter.r=16 adapter.use_rslora=False"
    assert rows[0][5] == shown.summary.trials[0].run_id and rows[0][5].endswith("small-trial-0")
    badges = [row[2] for row in rows]
    assert 'ts-state-completed"' in badges[0] and 'ts-state-pruned"' in badges[2] and 'ts-state-failed"' in badges[3]
    assert f'title="{PRUNED_NOTE}"' in badges[2]  # why, on hover
    assert 'title="the run failed: out of memory"' in badges[3]  # the error's first line
    # The running trial shows its run's own state (created, not started: queued) and, once it trains, its step.
    assert badges[4] == '<span class="ts-badge ts-state-queued">queued</span>'
    update_status(workspace / "runs" / rows[4][5], step=7, max_steps=20)
    assert view.trial_rows(view.load_view(workspace, "small"))[4][2].endswith('<span class="ts-hint">7/20</span>')
    assert list(shown.running) == [rows[4][5]]
    assert view.table_columns(shown.summary.metric) == ["Rank", "Trial", "State", "eval_loss", "Params", "Run id"]


def test_the_parallel_coordinates_have_an_axis_per_parameter_and_the_objective(workspace: Path) -> None:
    summary = view.load_view(workspace, "small").summary
    space = view.sweep_space(workspace, "small")  # from the sweep's file
    assert list(space) == ["train.learning_rate", "adapter.r", "adapter.use_rslora"]
    assert space["train.learning_rate"].log
    figure = view.parallel_figure(summary, space)
    [trace] = figure["data"]
    assert trace["type"] == "parcoords" and trace["line"]["color"] == [1.5, 2.5]
    assert trace["line"]["reversescale"] is True  # minimize: the lowest loss in the bright colour
    lr, rank, rslora, objective = trace["dimensions"]
    assert lr["label"] == "train.learning_rate (log)"
    assert lr["values"] == pytest.approx([math.log10(0.003), math.log10(0.0002)])
    assert lr["ticktext"] == ["0.0001", "0.001", "0.01"] and lr["tickvals"] == [-4, -3, -2]
    # Every choice is a tick, tried or not, in the sweep's order.
    assert (rank["label"], rank["ticktext"], rank["values"]) == ("adapter.r", ["4", "8", "16"], [2, 0])
    assert (rslora["ticktext"], rslora["values"]) == (["true", "false"], [1, 0])
    assert (objective["label"], objective["values"]) == ("eval_loss", [1.5, 2.5])
    # Without the sweep's file: numbers as numbers (0.0002 to 0.003 is no wide range), other values as seen.
    lr, rank, rslora, _ = view.parallel_figure(summary)["data"][0]["dimensions"]
    assert (lr["label"], lr["values"], rank["values"]) == ("train.learning_rate", [0.003, 0.0002], [16, 4])
    assert (rslora["ticktext"], rslora["values"]) == (["false", "true"], [0, 1])
    assert view.parallel_figure(None)["data"] == []
    assert view.parallel_figure(None)["layout"]["annotations"][0]["text"] == "the chart fills as trials complete"


def test_the_progress_chart_draws_each_objective_and_the_best_so_far(workspace: Path) -> None:
    figure = view.progress_figure(view.load_view(workspace, "small").summary)
    trials, best = figure["data"]
    assert (trials["x"], trials["y"]) == ([0, 1], [1.5, 2.5])
    assert (best["name"], best["x"], best["y"], best["line"]["shape"]) == ("best so far", [0, 1], [1.5, 1.5], "hv")
    assert figure["layout"]["yaxis"]["title"]["text"] == "eval_loss"


def test_the_best_trial_and_the_status_line(workspace: Path) -> None:
    shown = view.load_view(workspace, "small")
    best = view.best_html(shown.summary)
    assert "Best: trial 0 · eval_loss <b>1.5</b>" in best
    assert "<code>train.learning_rate</code> = <b>0.003</b>" in best and "<b>16</b>" in best
    status = view.status_html(shown, "sweep small: 6 trials\ninterrupted: run the same command again")
    assert 'ts-state-stopped"' in status and "small  4/6 trials (2 complete, 1 pruned, 1 failed, 1 running)" in status
    assert "Continue runs the rest" in status and "interrupted: run the same command again" in status  # the log
    running = view.SweepView("small", shown.summary, 4242)
    assert 'ts-state-running"' in view.status_html(running) and "driver log" not in view.status_html(running)
    assert "no study yet" in view.status_html(view.SweepView("fresh", None, None))
    assert shown.key() == view.load_view(workspace, "small").key()  # an unchanged sweep: nothing to redraw


def test_the_picker_lists_the_sweeps_by_name(workspace: Path) -> None:
    make_study(workspace, "another", with_runs=())
    assert view.sweep_names(workspace) == ["another", "small"]
    assert view.picked(workspace, "small") == (["another", "small"], "small")
    assert view.picked(workspace, "gone")[1] == "another"
    assert view.picked(workspace / "empty", None) == ([], None)
