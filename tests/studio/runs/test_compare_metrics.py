"""The Runs tab's Compare chart draws train loss, eval loss or a method's own metric, picked in "Metric"."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from engine import runs
from engine.config import parse_config
from engine.store.rundir import append_metrics, update_status
from engine.training.methods import method_charts
from studio import charts
from studio.demo.caller import Caller
from studio.demo.ownership import owner_tag
from studio.i18n.catalog import text
from studio.runs import tab as runs_tab
from studio.runs.data import (
    EVAL_LOSS,
    TRAIN_LOSS,
    choice_labels,
    compare_curves,
    loss_curve,
    metric_curve,
    metric_words,
)
from tests.helpers.visitors import ALICE, BOB, DEMO

MARGIN = "rewards/margins"


def dpo_events() -> list[dict[str, Any]]:
    """What a DPO run logs: train events with its reward metrics, eval events with eval_ keys."""
    return [
        {"event": "train", "step": 1, "loss": 0.69, MARGIN: 0.0, "rewards/accuracies": 0.5},
        {"event": "train", "step": 2, "loss": 0.61, MARGIN: 0.3, "rewards/accuracies": 0.75},
        {"event": "eval", "step": 2, "eval_loss": 0.65, f"eval_{MARGIN}": 0.2},
        {"event": "train", "step": 3, "loss": 0.52, MARGIN: 0.7, "rewards/accuracies": 1.0},
        {"event": "train", "step": 4, "loss": math.nan, MARGIN: 0.9},  # a NaN cannot be drawn: skipped
        {"event": "eval", "step": 4, "eval_loss": 0.58, f"eval_{MARGIN}": 0.5},
        {"event": "summary", "step": 4, "loss": 0.1},
    ]


def sft_events() -> list[dict[str, Any]]:
    return [
        {"event": "train", "step": 1, "loss": 2.0},
        {"event": "train", "step": 2, "loss": 1.5},
        {"event": "eval", "step": 2, "eval_loss": 1.8},
    ]


def make_run(workspace: Path, name: str, events: list[dict[str, Any]], method: str = "sft", **status: Any) -> Path:
    run_dir = runs.create_run(parse_config({"name": name, "method": method}), workspace=workspace)
    update_status(run_dir, state="completed", **status)
    append_metrics(run_dir, events)
    return run_dir


def figure_of(outputs: list[Any]) -> dict[str, Any]:
    return json.loads(outputs[0].plot)


def test_metric_curve_reads_the_points_written_for_each_event_kind(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path, "dpo", dpo_events(), method="dpo")
    assert metric_curve(run_dir, "train", "loss") == [(1, 0.69), (2, 0.61), (3, 0.52)]
    assert loss_curve(run_dir) == metric_curve(run_dir, "train", "loss")
    assert metric_curve(run_dir, "eval", "eval_loss") == [(2, 0.65), (4, 0.58)]
    assert metric_curve(run_dir, "train", MARGIN) == [(1, 0.0), (2, 0.3), (3, 0.7), (4, 0.9)]
    assert metric_curve(run_dir, "eval", f"eval_{MARGIN}") == [(2, 0.2), (4, 0.5)]
    assert metric_curve(run_dir, "train", "kl") == []


def test_choices_hold_the_losses_and_only_the_method_metrics_a_picked_run_logged(tmp_path: Path) -> None:
    dpo = make_run(tmp_path, "dpo", dpo_events(), method="dpo")
    sft = make_run(tmp_path, "sft", sft_events())
    titles = {key: chart.title for key, chart in method_charts().items()}
    comparison = compare_curves({"dpo": dpo, "sft": sft}, MARGIN)
    assert comparison.choices == [
        (TRAIN_LOSS, TRAIN_LOSS),
        (EVAL_LOSS, EVAL_LOSS),
        (titles[MARGIN], MARGIN),
        (titles["rewards/accuracies"], "rewards/accuracies"),
        (f"{titles[MARGIN]} · eval", f"eval_{MARGIN}"),  # what the evaluations logged of it
    ]
    assert "kl" in titles and "log_odds_ratio" in titles  # in the registry, but no picked run logged them
    assert comparison.metric == MARGIN and comparison.chart.title == titles[MARGIN]
    assert comparison.curves == {"dpo": [(1, 0.0), (2, 0.3), (3, 0.7), (4, 0.9)], "sft": []}
    held_out = compare_curves({"dpo": dpo, "sft": sft}, f"eval_{MARGIN}")
    assert held_out.chart.sparse and held_out.curves == {"dpo": [(2, 0.2), (4, 0.5)], "sft": []}
    japanese = dict((value, title) for title, value in choice_labels(comparison.choices, "ja"))
    assert japanese[f"eval_{MARGIN}"] == f"{japanese[MARGIN]} · {text('chart.eval', 'ja')}"
    assert metric_words(f"eval_{MARGIN}", held_out.chart, "ja")[0] == japanese[f"eval_{MARGIN}"]
    sft_only = compare_curves({"sft": sft}, MARGIN)  # no picked run has the margin: back to train loss
    assert [value for _, value in sft_only.choices] == [TRAIN_LOSS, EVAL_LOSS]
    assert sft_only.metric == TRAIN_LOSS and sft_only.curves == {"sft": [(1, 2.0), (2, 1.5)]}


def test_compare_outputs_follow_the_picked_metric(tmp_path: Path) -> None:
    ids = [make_run(tmp_path, "dpo", dpo_events(), method="dpo").name, make_run(tmp_path, "sft", sft_events()).name]
    figure = figure_of(runs_tab.compare_outputs(Caller(tmp_path), ids, 0.0))
    assert figure["layout"]["title"]["text"] == "Train loss"
    assert [trace["y"] for trace in figure["data"]] == [[0.69, 0.61, 0.52], [2.0, 1.5]]

    plot, _, picker = runs_tab.compare_outputs(Caller(tmp_path), ids, 0.6, EVAL_LOSS)
    figure = json.loads(plot.plot)
    assert figure["layout"]["title"]["text"] == "Eval loss" and picker.value == EVAL_LOSS
    assert [trace["name"] for trace in figure["data"]] == ["dpo", "sft"]
    assert [(trace["x"], trace["y"]) for trace in figure["data"]] == [([2, 4], [0.65, 0.58]), ([2], [1.8])]
    assert all(trace["mode"] == "lines+markers" and trace["marker"]["size"] == 7 for trace in figure["data"])

    plot, _, picker = runs_tab.compare_outputs(Caller(tmp_path), ids, 0.0, MARGIN)
    figure = json.loads(plot.plot)
    chart = method_charts()[MARGIN]
    assert figure["layout"]["title"]["text"] == chart.title
    assert figure["layout"]["yaxis"]["title"]["text"] == chart.unit
    assert figure["data"][0]["y"] == [0.0, 0.3, 0.7, 0.9] and figure["data"][1]["y"] == []
    assert (MARGIN, MARGIN) not in picker.choices and (chart.title, MARGIN) in picker.choices
    assert ("KL estimate (policy ‖ reference)", "kl") not in picker.choices


def test_compare_keeps_demo_ownership(tmp_path: Path) -> None:
    mine = make_run(tmp_path, "mine", dpo_events(), method="dpo", owner=owner_tag(ALICE))
    theirs = make_run(tmp_path, "theirs", sft_events(), owner=owner_tag(BOB))
    outputs = runs_tab.compare_outputs(Caller(tmp_path, DEMO, ALICE), [mine.name, theirs.name], 0.0, MARGIN)
    assert [trace["name"] for trace in figure_of(outputs)["data"]] == ["mine"]  # Bob's run is not Alice's to read
    outputs = runs_tab.compare_outputs(Caller(tmp_path, DEMO, ALICE), [theirs.name], 0.0, MARGIN)
    assert figure_of(outputs)["data"] == [] and outputs[2].value == TRAIN_LOSS
    plot, diff, _ = runs_tab.compare_outputs(Caller(tmp_path, DEMO, ALICE), [mine.name], 0.0, EVAL_LOSS)
    assert json.loads(plot.plot)["data"][0]["y"] == [0.65, 0.58]


def test_compare_figure_names_the_metric_and_leaves_sparse_curves_unsmoothed() -> None:
    curve = [(1, 3.0), (2, 1.0), (3, 2.0)]
    default = charts.compare_figure({"a": curve}, 0.6)
    assert default["layout"]["title"]["text"] == "Train loss" and default["layout"]["yaxis"]["title"]["text"] == "loss"
    assert default["data"][0]["y"] == charts.ema([3.0, 1.0, 2.0], 0.6)
    sparse = charts.compare_figure({"a": curve}, 0.6, log_y=True, title="Eval loss", y_title="loss", sparse=True)
    assert sparse["data"][0]["y"] == [3.0, 1.0, 2.0] and sparse["data"][0]["mode"] == "lines+markers"
    assert sparse["layout"]["yaxis"]["type"] == "log"
    empty = charts.compare_figure({"a": []}, title="Eval loss")
    assert empty["layout"]["annotations"][0]["text"] == "none of these runs logged eval loss"
