"""The charts a training method adds to the Monitor: drawn for runs of that method, hidden for the others."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from engine import runs
from engine.config import RunConfig
from engine.store.rundir import METRICS_FILE
from engine.training.methods import METHODS, MetricChart
from studio import charts
from studio.monitor import feed as feed_module
from studio.monitor import live
from studio.monitor.feed import MetricsFeed

MARGIN = MetricChart("rewards/margins", "Reward margin", "margin")


@pytest.fixture
def margin_chart(monkeypatch: pytest.MonkeyPatch) -> None:
    """A method chart, as a method with one would register it (the page and the feed know every such chart)."""
    monkeypatch.setattr(feed_module, "SERIES", (*feed_module.SERIES, MARGIN.key))
    monkeypatch.setitem(live.METHOD_CHARTS, MARGIN.key, (MARGIN.title, MARGIN.unit, charts.COLORS[5], MARGIN.key))
    monkeypatch.setitem(live.SMALL_CHARTS, MARGIN.key, live.METHOD_CHARTS[MARGIN.key])


def _run(tmp_path: Path, margins: list[float]) -> Path:
    run_dir = runs.create_run(RunConfig(name="m"), workspace=tmp_path)
    lines = [{"event": "train", "step": i + 1, "loss": 1.0, MARGIN.key: m} for i, m in enumerate(margins)]
    (run_dir / METRICS_FILE).write_text("".join(json.dumps(line) + "\n" for line in lines))
    return run_dir


@pytest.mark.usefixtures("margin_chart")
def test_a_method_chart_is_hidden_for_runs_of_another_method(tmp_path: Path) -> None:
    feed = MetricsFeed(_run(tmp_path, [0.1, 0.3]))
    feed.poll()
    answer = live.changed_charts(feed, "run", {}, wanted=live.CHARTS)  # an sft run: no method chart of its own
    assert set(answer["hidden"]) == set(live.METHOD_CHARTS) and MARGIN.key in answer["hidden"]
    assert set(answer["figures"]) == set(live.CHARTS) - set(live.METHOD_CHARTS)


@pytest.mark.usefixtures("margin_chart")
def test_a_method_chart_draws_its_metric_for_runs_of_its_method(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setitem(METHODS, "sft", dataclasses.replace(METHODS["sft"], charts=(MARGIN,)))
    feed = MetricsFeed(_run(tmp_path, [0.1, 0.3]))
    feed.poll()
    answer = live.changed_charts(feed, "run", {}, wanted=(MARGIN.key,))
    assert answer["hidden"] == []
    trace = answer["figures"][MARGIN.key]["data"][0]
    assert list(trace["x"]) == [1, 2] and list(trace["y"]) == [0.1, 0.3]
    again = live.changed_charts(feed, "run", answer["keys"], wanted=(MARGIN.key,))
    assert again["figures"] == {}  # nothing new: the page keeps what it has


def test_the_page_has_the_common_charts_then_every_methods_own() -> None:
    assert ("loss", *live.COMMON_CHARTS, *live.METHOD_CHARTS) == live.CHARTS
    own = {chart.key for method in METHODS.values() for chart in method.charts}
    assert set(live.METHOD_CHARTS) == own and {"rewards/margins", "kl", "log_odds_ratio"} <= own


@pytest.mark.parametrize(("beta", "drawn"), [(0.0, False), (0.04, True)])
def test_grpo_draws_kl_only_when_it_trains_against_a_reference(tmp_path: Path, beta: float, drawn: bool) -> None:
    # TRL logs no "kl" when beta is 0 (no reference model): an empty chart would only puzzle.
    config = RunConfig(
        name="g", method="grpo", grpo={"beta": beta, "rewards": [{"kind": "length", "target_tokens": 8}]}
    )
    feed = MetricsFeed(runs.create_run(config, workspace=tmp_path))
    assert ("kl" in feed.charts) is drawn and {"reward", "entropy"} <= set(feed.charts)
    assert ("kl" in live.changed_charts(feed, "run", {}, wanted=live.CHARTS)["hidden"]) is not drawn
