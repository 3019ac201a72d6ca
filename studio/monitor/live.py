"""The Monitor's four charts, served to the page outside Gradio's events.

Why outside: every Gradio event costs the browser's main thread tens of milliseconds in Gradio's own client
code, and a ``gr.Plot`` update re-creates its chart from scratch. Four charts polled four times a second kept
a core of a 2-core laptop busy in the browser, and a new loss point reached the screen 2 s late at p95
(benchmarks/browser_latency.py). So a small page script (assets/live_charts.js) asks a plain HTTP route
(studio.monitor.routes) for the charts whose data changed and hands them to ``Plotly.react``, which updates the
chart in place and keeps the user's zoom.

This module holds what that route needs, with no web framework in it:

- ``SharedFeeds``: one ``MetricsFeed`` per run for the whole studio process, read under a lock, so the metrics
  file is read once however many pages watch the run;
- ``chart_keys`` / ``changed_charts``: a key per chart that changes when its figure would, and the figures of
  the charts whose key differs from what the page holds;
- ``live_panels``: the progress bar and the stats cards, which change with every step too;
- ``live_token`` / ``run_of_token``: the page learns which run to ask for from a token in the Monitor's
  header. It names the run and carries a signature only this process can make, so a page reads the runs the
  studio chose to show it (in demo mode, the visitor's own) and no other.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.api import CONFIG_FILE, QUEUED, RunStatus, evaluation_key, method_charts, run_queue
from studio import charts
from studio.charts import Figure
from studio.i18n import catalog
from studio.i18n.catalog import SOURCE, key, text
from studio.monitor.feed import MetricsFeed
from studio.monitor.view import progress_html, queue_html, stats_html

# title, y-axis unit, colour and metrics key of the small charts: three every run has, then those the training
# methods add (engine.training.methods; a run shows its own method's only)
COMMON_CHARTS = {
    "learning_rate": ("Learning rate", "lr", charts.COLORS[2], "learning_rate"),
    "grad_norm": ("Gradient norm", "norm", charts.COLORS[4], "grad_norm"),
    "throughput": ("Throughput", "tokens/s", charts.COLORS[3], "tokens_per_second"),
}
METHOD_CHARTS = {
    key: (chart.title, chart.unit, charts.COLORS[(5 + number) % len(charts.COLORS)], key)
    for number, (key, chart) in enumerate(method_charts().items())
}
SMALL_CHARTS = {**COMMON_CHARTS, **METHOD_CHARTS}
CHARTS = ("loss", *SMALL_CHARTS)
# Every small chart's title and unit is said in the page's language (studio.i18n; a method's English is its own).
for _name, (_, _unit, *_) in SMALL_CHARTS.items():
    key(f"chart.{_name}"), key(f"unit.{_unit}")
NO_RUN = ""  # the token of "no run": the page gets the empty charts
_KEY = secrets.token_bytes(32)  # signs tokens; a restarted studio serves freshly loaded pages new ones


def live_token(run_dir: Path) -> str:
    """The token the page passes to ask for ``run_dir``'s charts: ``<run id>.<signature>``."""
    run_dir = Path(run_dir).resolve()
    return f"{run_dir.name}.{_signature(run_dir)}"


def run_of_token(runs_root: Path, token: str) -> Path | None:
    """The run a token names, when it is a run directory under ``runs_root`` and the signature is ours."""
    name, _, signature = token.rpartition(".")
    root = Path(runs_root).resolve()
    if not name or name in (".", "..") or "/" in name or "\\" in name:
        return None
    run_dir = root / name
    if not hmac.compare_digest(signature, _signature(run_dir)) or not (run_dir / CONFIG_FILE).is_file():
        return None
    return run_dir


def _signature(run_dir: Path) -> str:
    return hmac.new(_KEY, str(run_dir).encode(), hashlib.sha256).hexdigest()[:32]


@dataclass
class _Entry:
    feed: MetricsFeed
    lock: threading.Lock
    identity: tuple[int, ...]  # of the run's config file: a run deleted and made again under its name is a new run


class SharedFeeds:
    """One ``MetricsFeed`` per run, shared by every reader in the process; the least recently read are
    dropped beyond ``capacity``."""

    def __init__(self, capacity: int = 32):
        self.capacity = capacity
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._lock = threading.Lock()

    @contextmanager
    def polled(self, run_dir: Path) -> Iterator[MetricsFeed]:
        """The run's feed, brought up to date and held for the ``with`` block (no other reader moves it)."""
        entry = self._entry(Path(run_dir).resolve())
        with entry.lock:
            entry.feed.poll()
            yield entry.feed

    def _entry(self, run_dir: Path) -> _Entry:
        key = str(run_dir)
        # Inode and modification time: a file system may hand a freed inode to the next new file.
        identity = file_stamp(run_dir / CONFIG_FILE)[1:]
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or entry.identity != identity:
                entry = _Entry(MetricsFeed(run_dir), threading.Lock(), identity)
                self._entries[key] = entry
            self._entries.move_to_end(key)
            while len(self._entries) > self.capacity:
                self._entries.popitem(last=False)
            return entry


def file_stamp(path: Path) -> tuple[int, int, int]:
    """Size, modification time (ns) and inode of a file; zeros for one that is not there."""
    try:
        info = path.stat()
    except OSError:
        return 0, 0, 0
    return info.st_size, info.st_mtime_ns, info.st_ino


FEEDS = SharedFeeds()  # the studio's one set of feeds


def chart_keys(feed: MetricsFeed | None, smoothing: float, log_y: bool) -> dict[str, str]:
    """A key per chart that changes whenever the chart's figure would (no feed: the empty charts)."""
    if feed is None:
        return dict.fromkeys(CHARTS, "empty")
    series = feed.series
    keys = {"loss": f"{series['loss'].version}.{series['eval_loss'].version}.{len(feed.resumes)}.{smoothing}.{log_y}"}
    for name, (*_, metric) in SMALL_CHARTS.items():
        parts = feed.parts(metric).values()  # drawn on the same chart: each changes it
        held_out = [series[key]] if (key := evaluation_key(metric)) in series else []
        keys[name] = ".".join(str(one.version) for one in (series[metric], *parts, *held_out))
    return keys


def chart_figure(name: str, feed: MetricsFeed | None, smoothing: float, log_y: bool, lang: str = SOURCE) -> Figure:
    """The figure of one chart in ``lang`` (empty, waiting for data, when there is no feed)."""
    if name == "loss":
        if feed is None:
            return charts.loss_figure([], lang=lang)
        loss, evals = feed.series["loss"], feed.series["eval_loss"]
        return charts.loss_figure(loss, evals, smoothing, log_y, feed.resumes, lang=lang)
    title, unit, color, metric = SMALL_CHARTS[name]
    title, unit = _said(f"chart.{name}", title, lang), _said(f"unit.{unit}", unit, lang)
    parts = feed.parts(metric) if feed else {}
    # What evaluations log of a method's metric, on its chart (the common charts' metrics have none).
    held_out = feed.series.get(evaluation_key(metric), []) if feed else []
    if parts:  # a weighted reward, with each reward function's mean beside it (as the samples table lists them)
        return charts.parts_figure(feed.series[metric], parts, title, unit, color, held_out, lang=lang)
    return charts.line_figure(feed.series[metric] if feed else [], title, unit, color, held_out=held_out, lang=lang)


def _said(name: str, english: str, lang: str) -> str:
    """``name``'s text in ``lang``; ``english`` itself for a chart the catalog does not know."""
    return text(name, lang) if name in catalog.english() else english


def changed_charts(
    feed: MetricsFeed | None,
    run_key: str,
    have: dict[str, str],
    smoothing: float = 0.0,
    log_y: bool = False,
    wanted: tuple[str, ...] = CHARTS,
    lang: str = SOURCE,
) -> dict[str, Any]:
    """What the page lacks: ``{"keys": {chart: key}, "figures": {chart: figure}, "hidden": [chart]}`` with a
    figure for each ``wanted`` chart whose key differs from ``have`` (the keys the page holds); ``hidden`` are
    the charts of other training methods than the run's, which the page hides. ``run_key`` names the run in the
    keys, so switching runs redraws every chart; so does switching the language (``lang``: the words on them)."""
    run_key = run_key if lang == SOURCE else f"{run_key}@{lang}"
    hidden = [name for name in wanted if name in METHOD_CHARTS and (feed is None or name not in feed.charts)]
    shown = [name for name in wanted if name not in hidden]
    keys = {name: f"{run_key}|{key}" for name, key in chart_keys(feed, smoothing, log_y).items() if name in shown}
    figures = {
        name: chart_figure(name, feed, smoothing, log_y, lang) for name, key in keys.items() if have.get(name) != key
    }
    return {"keys": keys, "figures": figures, "hidden": hidden}


def live_panels(
    run_dir: Path | None,
    status: RunStatus | None,
    feed: MetricsFeed | None,
    now: float | None = None,
    lang: str = SOURCE,
) -> dict[str, str]:
    """The two panels that change with every logged step, sent with the charts: the progress bar (a queued
    run's place in line instead) and the latest numbers, in ``lang``."""
    if run_dir is None or status is None:
        return {"progress": "", "stats": ""}
    if status.state == QUEUED:
        progress = queue_html(run_queue.runs_ahead(run_dir) or 0, lang)
    else:
        progress = progress_html(status, feed, now or time.time(), lang)
    return {"progress": progress, "stats": stats_html(feed, lang)}
