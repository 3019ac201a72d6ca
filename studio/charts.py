"""Chart data and figures for the Monitor and the run comparison: pure functions, no I/O.

A long run must not make each chart update slower, so a series is kept decimated as it grows
(``DecimatedSeries``: fixed-width step buckets holding their min and max point, merged pairwise when there are
too many) and a figure never carries more than ``MAX_POINTS`` points per series. Min/max buckets keep the
shape that matters on a loss curve: spikes and the envelope survive, only the density inside a bucket goes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from studio.i18n.catalog import SOURCE, key, text

Point = tuple[float, float]  # (step, value)
# A plotly figure as plain JSON data ({"data": [...], "layout": {...}}): plotly.js draws it as is. Building the
# dict directly skips plotly.py's validation and template, which cost more than the rest of a poll together.
Figure = dict[str, Any]

MAX_POINTS = 1000  # about one point per pixel of a laptop-wide chart
LOSS_HEIGHT, SMALL_HEIGHT = 300, 200  # pixels: the Monitor's loss chart and its small charts

# One palette for every chart, readable on white and for the common colour-vision deficiencies.
COLORS = ("#4f46e5", "#f97316", "#0891b2", "#16a34a", "#db2777", "#ca8a04", "#7c3aed", "#64748b")
TRAIN_COLOR, EVAL_COLOR = COLORS[0], COLORS[1]
# The words on the Monitor's charts (studio.i18n), said in the page's language.
LOSS, TRAIN_LOSS, TRAIN_RAW, EVAL_LOSS, RESUMED, WAITING, NO_DATA, STEP = (
    key(f"chart.{name}")
    for name in ("loss", "train_loss", "train_raw", "eval_loss", "resumed", "waiting", "no_data", "step")
)
LOSS_UNIT = key("unit.loss")
HELD_OUT = key("chart.eval")  # a method metric's points logged by evaluations, beside the training steps' line
WEIGHTED_SUM = key("chart.weighted_sum")  # the total beside its parts (a reward's functions)
NOT_LOGGED, PICK_RUNS = key("runs.compare.not_logged"), key("runs.compare.pick")  # the Compare chart's empty notes


def minmax_decimate(points: Sequence[Point], max_points: int = MAX_POINTS) -> list[Point]:
    """At most ``max_points`` points that keep the first, the last and each bucket's min and max, in order."""
    if max_points < 4:
        raise ValueError("max_points must be at least 4 (first, last and one min/max pair)")
    if len(points) <= max_points:
        return list(points)
    inner = points[1:-1]
    buckets = (max_points - 2) // 2
    size = math.ceil(len(inner) / buckets)
    kept = [points[0]]
    for start in range(0, len(inner), size):
        chunk = inner[start : start + size]
        low = min(range(len(chunk)), key=lambda i: chunk[i][1])
        high = max(range(len(chunk)), key=lambda i: chunk[i][1])
        kept.extend(chunk[i] for i in sorted({low, high}))
    kept.append(points[-1])
    return kept


@dataclass
class _Bucket:
    low: Point
    high: Point

    def add(self, point: Point) -> None:
        if point[1] < self.low[1]:
            self.low = point
        if point[1] > self.high[1]:
            self.high = point

    def merge(self, other: _Bucket) -> None:
        self.add(other.low)
        self.add(other.high)


@dataclass
class _Settled:
    """The columns of a series' buckets other than the newest, and EMA states over them per weight."""

    key: tuple[Any, ...]
    xs: list[float]
    ys: list[float]
    ema: dict[float, tuple[list[float], tuple[float, float]]] = field(default_factory=dict)


@dataclass
class DecimatedSeries:
    """A series that grows one point at a time but never holds more than about ``max_points`` of them.

    Points fall into buckets ``width`` steps wide; a bucket keeps its lowest and highest point. When there are
    more buckets than fit, neighbours merge and the width doubles, which equals re-bucketing the raw data at
    the new width, so the result does not drift however long the run. Adding a point is amortised O(1).
    """

    max_points: int = MAX_POINTS
    width: int = 1
    first: Point | None = None
    last: Point | None = None
    version: int = 0  # bumped on every change, so a chart knows when to redraw
    _buckets: dict[int, _Bucket] = field(default_factory=dict)
    _settled: _Settled | None = None
    _settled_changes: int = 0  # bumped when a bucket other than the newest changes
    _newest: int = -1  # index of the newest bucket

    def add(self, step: float, value: float | None) -> None:
        """Append one (step, value); None and non-finite values are skipped (a NaN cannot be drawn)."""
        if value is None or not math.isfinite(value):
            return
        point = (step, float(value))
        if self.first is None or step < self.first[0]:
            self.first = point
        if self.last is None or step >= self.last[0]:
            self.last = point
        index = int(step) // self.width
        if index < self._newest:
            self._settled_changes += 1  # out of order (e.g. a resume's first point): rebuild the settled part
        self._newest = max(self._newest, index)
        bucket = self._buckets.get(index)
        if bucket is None:
            self._buckets[index] = _Bucket(point, point)
        else:
            bucket.add(point)
        while len(self._buckets) > (self.max_points - 2) // 2:
            self._halve()
        self.version += 1

    def _halve(self) -> None:
        merged: dict[int, _Bucket] = {}
        for index in sorted(self._buckets):
            bucket = self._buckets[index]
            target = merged.get(index // 2)
            if target is None:
                merged[index // 2] = _Bucket(bucket.low, bucket.high)
            else:
                target.merge(bucket)
        self._buckets = merged
        self.width *= 2
        self._newest = max(merged)

    def points(self) -> list[Point]:
        """The kept points in step order: the first, each bucket's min and max, and the last."""
        xs, ys = self.columns()
        return list(zip(xs, ys, strict=True))

    def columns(self) -> tuple[list[float], list[float]]:
        """The kept points as (steps, values) lists, ready for a chart.

        Steps arrive in order, so between two calls only the newest bucket changes: the columns of the others
        (the settled part) are kept and rebuilt only after a merge or a point landing in an older bucket. A
        call then costs a list copy, not a pass in Python over every point.
        """
        settled = self._settled_part()
        tail = self._tail()
        return settled.xs + [p[0] for p in tail], settled.ys + [p[1] for p in tail]

    def smoothed(self, weight: float) -> list[float]:
        """``ema`` of the kept values, continuing from the settled part's cached state."""
        settled = self._settled_part()
        if weight not in settled.ema:
            settled.ema[weight] = _ema_from(settled.ys, weight, (0.0, 1.0))
        smoothed, state = settled.ema[weight]
        return smoothed + _ema_from([p[1] for p in self._tail()], weight, state)[0]

    def _settled_part(self) -> _Settled:
        """Columns of every bucket but the newest, led by the first point when no bucket kept it."""
        key = (self.width, self._newest, self._settled_changes, self.first)
        if self._settled is None or self._settled.key != key:
            points = [p for i in sorted(self._buckets) if i != self._newest for p in self._bucket_points(i)]
            if points and self.first is not None and self.first[0] < points[0][0]:
                points.insert(0, self.first)
            self._settled = _Settled(key, [p[0] for p in points], [p[1] for p in points])
        return self._settled

    def _tail(self) -> list[Point]:
        """The newest bucket's points, with the last point (and the first, when nothing is settled yet)."""
        tail = self._bucket_points(self._newest) if self._buckets else []
        if not self._settled_part().xs and self.first is not None and (not tail or self.first[0] < tail[0][0]):
            tail.insert(0, self.first)
        if self.last is not None and (not tail or self.last[0] > tail[-1][0]):
            tail.append(self.last)
        return tail

    def _bucket_points(self, index: int) -> list[Point]:
        bucket = self._buckets[index]
        return sorted({bucket.low, bucket.high})

    def __len__(self) -> int:
        return len(self.points())


def ema(values: Sequence[float], weight: float) -> list[float]:
    """Exponential moving average with TensorBoard's debiasing, so the start is not pulled towards zero."""
    if not 0 <= weight < 1:
        raise ValueError("the smoothing weight must be in [0, 1)")
    return _ema_from(values, weight, (0.0, 1.0))[0]


def _ema_from(
    values: Sequence[float], weight: float, state: tuple[float, float]
) -> tuple[list[float], tuple[float, float]]:
    """EMA of ``values`` continuing from ``state`` (running average, weight ** points so far); new state."""
    running, decay = state
    smoothed = []
    for value in values:
        running = running * weight + (1 - weight) * value
        decay *= weight  # weight ** i, without a power per point
        smoothed.append(running / (1 - decay))
    return smoothed, (running, decay)


def _layout(title: str, y_title: str, height: int, log_y: bool = False, x_title: str = "step") -> dict[str, Any]:
    """The common look: compact margins, light grid, legend on top, zoom kept across live updates."""
    axis = {
        "gridcolor": "#eef0f4",
        "zeroline": False,
        "linecolor": "#d4d7de",
        "ticks": "outside",
        "tickcolor": "#d4d7de",
    }
    return {
        "title": {"text": title, "x": 0.01, "xanchor": "left", "y": 0.97, "font": {"size": 14}},
        "height": height,
        "margin": {"l": 56, "r": 16, "t": 36, "b": 40},
        "paper_bgcolor": "white",
        "plot_bgcolor": "white",
        "font": {"family": "Inter, ui-sans-serif, system-ui, sans-serif", "size": 12, "color": "#374151"},
        "xaxis": {**axis, "title": {"text": x_title}},
        "yaxis": {**axis, "title": {"text": y_title}, "type": "log" if log_y else "linear"},
        "legend": {"orientation": "h", "x": 1, "xanchor": "right", "y": 1.02, "yanchor": "bottom"},
        "hovermode": "x unified",
        # Keeps the user's zoom and hidden traces across updates where plotly.js reuses the plot.
        "uirevision": title,
        "showlegend": True,
    }


# Up to this many points a line also shows its markers: one or two points drawn as a bare line are invisible.
MARKERS_UP_TO = 20


Series = Sequence[Point] | DecimatedSeries  # what a figure function takes for one line


def _columns(series: Series) -> tuple[list[float], list[float]]:
    if isinstance(series, DecimatedSeries):
        return series.columns()
    return [p[0] for p in series], [p[1] for p in series]


def _trace(series: Series, name: str, color: str, **style: Any) -> dict[str, Any]:
    xs, ys = _columns(series)
    return _trace_xy(xs, ys, name, color, **style)


def _trace_xy(xs: list[float], ys: list[float], name: str, color: str, **style: Any) -> dict[str, Any]:
    default_mode = "lines+markers" if len(xs) <= MARKERS_UP_TO else "lines"
    return {
        "type": "scatter",
        "mode": style.pop("mode", default_mode),
        "name": name,
        "x": xs,
        "y": ys,
        "line": {"color": color, "width": style.pop("width", 2)},
        **style,
    }


def _figure(traces: list[dict[str, Any]], layout: dict[str, Any], empty_text: str) -> Figure:
    # Each trace's steps are in order: its ends give the range without a pass over every point.
    ends = [x for trace in traces if trace.get("x") for x in (trace["x"][0], trace["x"][-1])]
    if not ends:
        layout["annotations"] = [*layout.get("annotations", []), _note(empty_text)]
        layout["xaxis"]["showticklabels"] = layout["yaxis"]["showticklabels"] = False
    elif max(ends) - min(ends) < 10:
        layout["xaxis"]["dtick"] = 1  # steps are whole numbers: no "step 1.5" ticks on a short run
    return {"data": traces, "layout": layout, "config": {"displaylogo": False}}


def _note(text: str) -> dict[str, Any]:
    return {
        "text": text,
        "showarrow": False,
        "xref": "paper",
        "yref": "paper",
        "x": 0.5,
        "y": 0.5,
        "font": {"size": 13, "color": "#9ca3af"},
    }


_RESUME_LINE = {"dash": "dot", "color": "#9ca3af", "width": 1.5}
_RESUME_FONT = {"size": 11, "color": "#6b7280"}


def loss_figure(
    train: Series,
    evals: Series = (),
    smoothing: float = 0.0,
    log_y: bool = False,
    resumes: Iterable[float] = (),
    height: int = LOSS_HEIGHT,
    lang: str = SOURCE,
) -> Figure:
    """Train loss (raw, faint when smoothed, plus its EMA) and eval loss on one chart; resumes as dotted lines.
    Its words are in ``lang``."""
    traces = []
    xs, ys = _columns(train)
    train_name = text(TRAIN_LOSS, lang)
    if smoothing > 0 and xs:
        raw = text(TRAIN_RAW, lang)
        traces.append(_trace_xy(xs, ys, raw, TRAIN_COLOR, width=1, opacity=0.3, showlegend=False))
        smoothed = train.smoothed(smoothing) if isinstance(train, DecimatedSeries) else ema(ys, smoothing)
        traces.append(_trace_xy(xs, smoothed, train_name, TRAIN_COLOR))
    else:
        traces.append(_trace_xy(xs, ys, train_name, TRAIN_COLOR))
    if len(evals):
        traces.append(_trace(evals, text(EVAL_LOSS, lang), EVAL_COLOR, mode="lines+markers", marker={"size": 7}))
    layout = _layout(text(LOSS, lang), text(LOSS_UNIT, lang), height, log_y, text(STEP, lang))
    # A dotted line and a label where the run was resumed from a checkpoint.
    layout["shapes"] = [
        {"type": "line", "x0": x, "x1": x, "yref": "paper", "y0": 0, "y1": 1, "line": _RESUME_LINE} for x in resumes
    ]
    layout["annotations"] = [
        {
            "x": x,
            "y": 1,
            "yref": "paper",
            "text": text(RESUMED, lang),
            "showarrow": False,
            "xanchor": "left",
            "font": _RESUME_FONT,
        }
        for x in resumes
    ]
    return _figure(traces, layout, text(WAITING, lang))


def line_figure(
    points: Series,
    title: str,
    y_title: str,
    color: str,
    height: int = SMALL_HEIGHT,
    held_out: Series = (),
    lang: str = SOURCE,
) -> Figure:
    """One metric over the steps (learning rate, gradient norm, throughput, a method's metric), with the points
    evaluations logged of it (``held_out``) as markers, named in a legend; ``title`` and ``y_title`` as given, the
    other words in ``lang``."""
    layout = _layout(title, y_title, height, x_title=text(STEP, lang))
    layout["showlegend"] = bool(len(held_out))
    layout["margin"] = {"l": 56, "r": 12, "t": 32, "b": 36}
    fill = {"fill": "tozeroy", "fillcolor": _tint(color)}
    traces = [_trace(points, title, color, **fill), *_held_out_traces(held_out, color, lang)]
    return _figure(traces, layout, text(NO_DATA, lang))


def _held_out_traces(held_out: Series, color: str, lang: str) -> list[dict[str, Any]]:
    """The evaluations' points of a metric as markers joined by a line (none when it has none), in the eval
    loss's colour, or the train loss's where the chart's own is that."""
    if not len(held_out):
        return []
    return [_trace(held_out, text(HELD_OUT, lang), _held_out_color(color), mode="lines+markers", marker={"size": 7})]


def _held_out_color(color: str) -> str:
    """The colour of the evaluations' points on a chart drawn in ``color``."""
    return EVAL_COLOR if color != EVAL_COLOR else TRAIN_COLOR


def parts_figure(
    total: Series,
    parts: dict[str, Series],
    title: str,
    y_title: str,
    color: str,
    held_out: Series = (),
    height: int = SMALL_HEIGHT,
    lang: str = SOURCE,
) -> Figure:
    """A total over the steps (filled, as ``line_figure`` draws one metric) with each of its parts as a line of its
    own, named in a legend: a weighted reward and each reward function's mean; the evaluations' points of the
    total as markers (``held_out``). ``title``, ``y_title`` and the parts' names as given, the other words in
    ``lang``."""
    layout = _layout(title, y_title, height, x_title=text(STEP, lang))
    layout["margin"] = {"l": 56, "r": 12, "t": 32, "b": 36}
    # Inside the plot, at its foot: above it, in a column of four small charts, the legend ran over the title. A
    # reward rises, so the lower right is where its lines are least.
    layout["legend"] = {
        **layout["legend"],
        "y": 0.02,
        "yanchor": "bottom",
        "bgcolor": "rgba(255,255,255,0.75)",
        "font": {"size": 10},
    }
    fill = {"fill": "tozeroy", "fillcolor": _tint(color)}
    traces = [_trace(total, text(WEIGHTED_SUM, lang), color, **fill)]
    held = _held_out_traces(held_out, color, lang)
    others = [one for one in COLORS if one not in (color, _held_out_color(color))]  # the same before and after
    for number, (name, series) in enumerate(parts.items()):
        traces.append(_trace(series, name, others[number % len(others)], width=1.5))
    return _figure([*traces, *held], layout, text(NO_DATA, lang))


def _tint(color: str, alpha: float = 0.08) -> str:
    red, green, blue = (int(color[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({red},{green},{blue},{alpha})"


def compare_figure(
    curves: dict[str, Sequence[Point]],
    smoothing: float = 0.0,
    log_y: bool = False,
    title: str = "Train loss",
    y_title: str = "loss",
    sparse: bool = False,
    lang: str = SOURCE,
) -> Figure:
    """Several runs' curves of one metric overlaid, one colour each (decimated to at most MAX_POINTS per run).

    ``title`` and ``y_title`` name the metric (as given); the other words are in ``lang``. ``sparse`` curves
    (logged at evaluations only) are drawn as the Monitor draws eval loss: with markers, and not smoothed.
    """
    traces = []
    style: dict[str, Any] = {"mode": "lines+markers", "marker": {"size": 7}} if sparse else {}
    for i, (name, points) in enumerate(curves.items()):
        points = minmax_decimate(points)
        if smoothing > 0 and points and not sparse:
            points = list(zip([p[0] for p in points], ema([p[1] for p in points], smoothing), strict=True))
        traces.append(_trace(points, name, COLORS[i % len(COLORS)], **style))
    empty = text(NOT_LOGGED, lang, metric=title.lower()) if curves else text(PICK_RUNS, lang)
    return _figure(traces, _layout(title, y_title, 360, log_y, text(STEP, lang)), empty)
