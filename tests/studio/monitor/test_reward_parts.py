"""A run that learns from reward functions (GRPO) on the Monitor: its reward chart draws each reward function's mean
beside the weighted sum (as the samples table lists each), and the eval-loss card says what applies where no eval
loss will come."""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from engine import runs
from engine.config import RunConfig
from engine.store.rundir import METRICS_FILE
from studio.i18n.catalog import text
from studio.monitor import live
from studio.monitor.feed import MetricsFeed
from studio.monitor.view import stats_html

REWARDS = [
    {"kind": "exact_match", "weight": 1.0},
    {"kind": "regex", "pattern": "[A-Z][a-z]+ [0-9]+", "weight": 0.25},
    {"kind": "exact_match", "column": "other", "weight": 0.5},  # a second of one kind: exact_match_2
]


def grpo_run(tmp_path: Path, **data: Any) -> Path:
    config = RunConfig(name="g", method="grpo", grpo={"rewards": REWARDS}, data=data or {})
    return runs.create_run(config, workspace=tmp_path)


def log(run_dir: Path, *events: dict[str, Any]) -> None:
    with (run_dir / METRICS_FILE).open("a") as handle:
        handle.write("".join(json.dumps({"event": "train", **event}) + "\n" for event in events))


def step(number: int, exact: float, regex: float, other: float) -> dict[str, Any]:
    parts = {"rewards/exact_match/mean": exact, "rewards/regex/mean": regex, "rewards/exact_match_2/mean": other}
    return {"step": number, "loss": 0.01, "reward": exact + 0.25 * regex + 0.5 * other, **parts}


def test_the_reward_chart_draws_each_reward_function_beside_the_weighted_sum(tmp_path: Path) -> None:
    run_dir = grpo_run(tmp_path)
    log(run_dir, step(1, 0.0, 0.5, 1.0), step(2, 0.25, 1.0, 0.0))
    feed = MetricsFeed(run_dir)
    feed.poll()
    answer = live.changed_charts(feed, "run", {}, wanted=("reward",))
    traces = answer["figures"]["reward"]["data"]
    assert [trace["name"] for trace in traces] == ["weighted sum", "exact_match", "regex", "exact_match_2"]
    assert [list(trace["y"]) for trace in traces] == [[0.625, 0.5], [0.0, 0.25], [0.5, 1.0], [1.0, 0.0]]
    assert all(list(trace["x"]) == [1, 2] for trace in traces)
    assert answer["figures"]["reward"]["layout"]["showlegend"] is True
    # A new point of any of them redraws the chart; nothing new, nothing sent.
    assert live.changed_charts(feed, "run", answer["keys"], wanted=("reward",))["figures"] == {}
    log(run_dir, {"step": 3, "rewards/regex/mean": 0.75})
    feed.poll()
    again = live.changed_charts(feed, "run", answer["keys"], wanted=("reward",))
    assert [list(trace["y"]) for trace in again["figures"]["reward"]["data"]][2] == [0.5, 1.0, 0.75]


def test_the_parts_are_named_in_the_language_of_the_page(tmp_path: Path) -> None:
    run_dir = grpo_run(tmp_path)
    log(run_dir, step(1, 1.0, 1.0, 1.0))
    feed = MetricsFeed(run_dir)
    feed.poll()
    traces = live.chart_figure("reward", feed, 0.0, False, "ko")["data"]
    assert [trace["name"] for trace in traces] == [
        text("chart.weighted_sum", "ko"),
        "exact_match",
        "regex",
        "exact_match_2",
    ]
    assert text("chart.weighted_sum", "ko") != "weighted sum"


def test_a_run_without_reward_functions_keeps_its_one_line_charts(tmp_path: Path) -> None:
    run_dir = runs.create_run(RunConfig(name="s"), workspace=tmp_path)
    log(run_dir, {"step": 1, "loss": 1.0, "learning_rate": 1e-3})
    feed = MetricsFeed(run_dir)
    feed.poll()
    assert feed.parts("reward") == {} and feed.facts.rewards == {}
    figure = live.changed_charts(feed, "run", {}, wanted=("learning_rate",))["figures"]["learning_rate"]
    assert len(figure["data"]) == 1 and figure["layout"]["showlegend"] is False


def cards(feed: MetricsFeed, lang: str = "en") -> dict[str, tuple[str, str]]:
    """The stats cards as {label: (value, note)}."""
    found = {}
    for card in html.unescape(stats_html(feed, lang)).split('<div class="ts-stat">')[1:]:
        label = card.split("<span>")[1].split("</span>")[0]
        value = card.split("<b>")[1].split("</b>")[0]
        note = card.split("<small>")[1].split("</small>")[0] if "<small>" in card else ""
        found[label] = (value, note)
    return found


def test_the_eval_card_of_a_reward_run_shows_its_reward_and_says_why(tmp_path: Path) -> None:
    run_dir = grpo_run(tmp_path)
    log(run_dir, step(1, 0.0, 0.5, 1.0), step(2, 0.25, 1.0, 0.0))
    feed = MetricsFeed(run_dir)
    feed.poll()
    shown = cards(feed)
    assert "eval loss" not in shown
    assert shown["reward"] == ("0.5000", "in place of eval loss: this method learns from rewards")
    japanese = cards(feed, "ja")
    assert japanese[text("stats.reward", "ja")] == ("0.5000", text("stats.note.rewards", "ja"))


def test_the_eval_card_of_a_reward_run_that_evaluates_shows_its_eval_reward(tmp_path: Path) -> None:
    """A GRPO run's eval loss is a policy loss (0 whenever a group's answers score alike): once it evaluates, the
    card shows the held-out reward, its method's first held-out metric, and never that loss."""
    run_dir = grpo_run(tmp_path, eval_size=8)
    log(run_dir, step(1, 0.0, 0.5, 1.0))
    feed = MetricsFeed(run_dir)
    feed.poll()
    assert cards(feed)["reward"] == ("0.6250", "in place of eval loss: this method learns from rewards")
    with (run_dir / METRICS_FILE).open("a") as handle:
        handle.write(json.dumps({"event": "eval", "step": 1, "eval_loss": 0.0, "eval_reward": 0.75}) + "\n")
    feed.poll()
    shown = cards(feed)
    assert shown["eval reward"] == ("0.7500", "") and "eval loss" not in shown and "reward" not in shown
    assert cards(feed, "ko")[text("stats.eval_reward", "ko")] == ("0.7500", "")


def test_the_eval_card_says_when_a_run_has_no_eval_set(tmp_path: Path) -> None:
    bare = runs.create_run(RunConfig(name="bare"), workspace=tmp_path)
    log(bare, {"step": 1, "loss": 1.0})
    feed = MetricsFeed(bare)
    feed.poll()
    assert cards(feed)["eval loss"] == ("—", "no eval set")
    held_out = runs.create_run(RunConfig(name="held", data={"eval_size": 8}), workspace=tmp_path)
    log(held_out, {"step": 1, "loss": 1.0})
    feed = MetricsFeed(held_out)
    feed.poll()
    assert cards(feed)["eval loss"] == ("—", "")  # its first evaluation is still to come
    with (held_out / METRICS_FILE).open("a") as handle:
        handle.write(json.dumps({"event": "eval", "step": 1, "eval_loss": 0.5}) + "\n")
    feed.poll()
    assert cards(feed)["eval loss"] == ("0.5000", "")
    assert cards(None)["eval loss"] == ("—", "")  # no run


def test_a_method_chart_draws_what_the_evaluations_logged_of_its_metric(tmp_path: Path) -> None:
    """The reward chart of a GRPO run that evaluates has the held-out reward (eval_reward) as markers beside the
    training steps' lines; a new evaluation redraws it; a chart whose metric no evaluation logged draws none."""
    run_dir = grpo_run(tmp_path, eval_size=8)
    log(run_dir, step(1, 0.0, 0.5, 1.0), {"step": 2, "completions/mean_length": 9.0})
    with (run_dir / METRICS_FILE).open("a") as handle:
        handle.write(json.dumps({"event": "eval", "step": 2, "eval_loss": 0.0, "eval_reward": 0.75}) + "\n")
    feed = MetricsFeed(run_dir)
    feed.poll()
    answer = live.changed_charts(feed, "run", {}, wanted=("reward", "completions/mean_length"), lang="ja")
    reward = answer["figures"]["reward"]["data"]
    assert [trace["name"] for trace in reward][-1] == text("chart.eval", "ja")
    assert (list(reward[-1]["x"]), list(reward[-1]["y"])) == ([2], [0.75])
    assert "markers" in reward[-1]["mode"] and len({trace["line"]["color"] for trace in reward}) == len(reward)
    assert len(answer["figures"]["completions/mean_length"]["data"]) == 1  # no eval_completions/mean_length yet
    with (run_dir / METRICS_FILE).open("a") as handle:
        handle.write(json.dumps({"event": "eval", "step": 4, "eval_reward": 1.0}) + "\n")
    feed.poll()
    again = live.changed_charts(feed, "run", answer["keys"], wanted=("reward", "completions/mean_length"), lang="ja")
    assert list(again["figures"]) == ["reward"] and list(again["figures"]["reward"]["data"][-1]["y"]) == [0.75, 1.0]
