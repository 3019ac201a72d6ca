"""Decimation, smoothing and figure contents of studio.charts (pure functions, no Gradio)."""

from __future__ import annotations

import math
import random

import pytest

from studio import charts
from studio.charts import DecimatedSeries, ema, minmax_decimate


def noisy_curve(n: int, seed: int = 0) -> list[tuple[float, float]]:
    rng = random.Random(seed)
    return [(step, 5 * math.exp(-step / (n / 4)) + rng.gauss(0, 0.2)) for step in range(1, n + 1)]


def test_minmax_decimate_keeps_first_last_min_max_and_bounds_size():
    points = noisy_curve(50_000)
    points[12_345] = (points[12_345][0], 99.0)  # a spike must survive
    kept = minmax_decimate(points, 2000)
    assert len(kept) <= 2000
    assert kept[0] == points[0] and kept[-1] == points[-1]
    assert max(p[1] for p in kept) == 99.0
    assert min(p[1] for p in kept) == min(p[1] for p in points)
    assert [p[0] for p in kept] == sorted(p[0] for p in kept)


def test_minmax_decimate_leaves_short_series_alone():
    points = noisy_curve(100)
    assert minmax_decimate(points, 2000) == points
    with pytest.raises(ValueError):
        minmax_decimate(points, 2)


@pytest.mark.parametrize("n", [10, 1999, 2000, 2001, 10_000, 123_457])
def test_streaming_series_is_bounded_and_keeps_extremes(n):
    points = noisy_curve(n, seed=n)
    series = DecimatedSeries(max_points=2000)
    for step, value in points:
        series.add(step, value)
    kept = series.points()
    assert len(kept) <= 2000
    assert kept[0] == points[0] and kept[-1] == points[-1]
    assert min(p[1] for p in kept) == min(p[1] for p in points)
    assert max(p[1] for p in kept) == max(p[1] for p in points)
    assert [p[0] for p in kept] == sorted({p[0] for p in kept})
    if n <= 998:  # fewer points than buckets: nothing is dropped
        assert kept == points


def test_streaming_series_equals_rebucketing_at_its_width():
    """Merging buckets pairwise gives what bucketing the raw data at the final width would: no drift."""
    points = noisy_curve(9_000, seed=3)
    series = DecimatedSeries(max_points=200)
    for step, value in points:
        series.add(step, value)
    width = series.width
    buckets: dict[int, list[tuple[float, float]]] = {}
    for point in points:
        buckets.setdefault(int(point[0]) // width, []).append(point)
    expected = {points[0], points[-1]}
    for members in buckets.values():
        expected.add(min(members, key=lambda p: p[1]))
        expected.add(max(members, key=lambda p: p[1]))
    assert set(series.points()) == expected


def test_streaming_series_skips_nan_and_counts_versions():
    series = DecimatedSeries()
    series.add(1, 2.0)
    series.add(2, float("nan"))
    series.add(3, None)
    series.add(4, float("inf"))
    assert series.points() == [(1, 2.0)]
    assert series.version == 1


def test_ema_matches_tensorboard_debiasing():
    assert ema([3.0, 3.0, 3.0], 0.9) == pytest.approx([3.0, 3.0, 3.0])  # debiased: no pull towards zero
    assert ema([1.0, 2.0, 3.0], 0.0) == [1.0, 2.0, 3.0]
    smoothed = ema([0.0, 10.0], 0.5)
    assert smoothed[0] == 0.0 and smoothed[1] == pytest.approx(5 / 0.75)
    with pytest.raises(ValueError):
        ema([1.0], 1.0)


def test_loss_figure_traces_smoothing_log_and_resumes():
    train = [(1, 3.0), (2, 2.5), (3, 2.0)]
    figure = charts.loss_figure(train, [(2, 2.7)], smoothing=0.6, log_y=True, resumes=[2])
    names = [trace["name"] for trace in figure["data"]]
    assert names == ["train (raw)", "train loss", "eval loss"]
    assert figure["data"][0]["y"] == [3.0, 2.5, 2.0]
    assert figure["data"][1]["y"] == pytest.approx(ema([3.0, 2.5, 2.0], 0.6))
    assert figure["layout"]["yaxis"]["type"] == "log"
    assert [shape["x0"] for shape in figure["layout"]["shapes"]] == [2]
    plain = charts.loss_figure(train)
    assert [trace["name"] for trace in plain["data"]] == ["train loss"]
    assert plain["layout"]["yaxis"]["type"] == "linear"


def test_empty_figures_say_so_and_compare_overlays_runs():
    empty = charts.line_figure([], "Learning rate", "lr", charts.COLORS[2])
    assert empty["layout"]["annotations"][0]["text"] == "no data yet"
    figure = charts.compare_figure({"a": noisy_curve(5000), "b": noisy_curve(10)})
    assert [trace["name"] for trace in figure["data"]] == ["a", "b"]
    assert len(figure["data"][0]["x"]) <= charts.MAX_POINTS
    assert figure["data"][0]["line"]["color"] != figure["data"][1]["line"]["color"]


def test_short_series_show_markers_and_long_ones_plain_lines():
    """A run's first point or two must be visible: drawn as a bare line, one point shows nothing."""
    short = charts.line_figure([(5, 0.1)], "Learning rate", "lr", charts.COLORS[2])["data"][0]
    long = charts.line_figure(
        [(s, 0.1) for s in range(charts.MARKERS_UP_TO + 1)], "Learning rate", "lr", charts.COLORS[2]
    )
    assert short["mode"] == "lines+markers"
    assert long["data"][0]["mode"] == "lines"


def test_cached_columns_match_a_fresh_series_at_every_step():
    """The settled-part cache never shows stale points: after each add, columns and EMA equal a rebuild."""
    points = noisy_curve(3_000, seed=5)
    live = DecimatedSeries(max_points=60)
    for count, (step, value) in enumerate(points, start=1):
        live.add(step, value)
        if count % 97 and count != len(points):
            continue
        fresh = DecimatedSeries(max_points=60)
        for old_step, old_value in points[:count]:
            fresh.add(old_step, old_value)
        fresh_points = fresh.points()  # built without any cache
        assert live.points() == fresh_points
        assert live.smoothed(0.6) == pytest.approx(ema([p[1] for p in fresh_points], 0.6))
