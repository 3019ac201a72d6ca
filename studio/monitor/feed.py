"""A per-browser-session tail of one run's metrics.jsonl that feeds the Monitor's charts.

It remembers the byte offset it has read up to and asks ``engine.runs.read_metrics`` for the new lines only,
folding them into decimated series: the cost of a poll is proportional to what the trainer wrote since the
last poll, never to the length of the run.
"""

from __future__ import annotations

from collections import deque
from pathlib import Path
from typing import Any

from engine.api import CONFIG_FILE, METHODS, ConfigError, load_config, method_charts, runs
from studio.charts import DecimatedSeries, Point

# The series the Monitor draws, by the metrics.jsonl key they come from.
SERIES = ("loss", "eval_loss", "learning_rate", "grad_norm", "tokens_per_second", *method_charts())
RATE_WINDOW = 20  # recent train events used for the ETA: follows speed changes, ignores the warm-up


class MetricsFeed:
    """What one session has read of one run: offset, decimated series, resume markers and the latest values."""

    def __init__(self, run_dir: Path, max_points: int = 2000):
        self.run_dir = Path(run_dir)
        self.offset = 0
        self.series = {key: DecimatedSeries(max_points=max_points) for key in SERIES}
        self.resumes: list[float] = []
        self.latest: dict[str, float] = {}  # the newest value of every numeric key, for the stats panel
        self.best_loss: float | None = None
        self.recent: deque[tuple[float, int]] = deque(maxlen=RATE_WINDOW)  # (time, step) of train events
        self.events_read = 0
        self.charts = _charts_of(self.run_dir)  # the metrics keys of the run's method's own charts

    def poll(self) -> bool:
        """Read the lines appended since the last poll; True when there was anything new."""
        events, self.offset = runs.read_metrics(self.run_dir, self.offset)
        for event in events:
            self._add(event)
        self.events_read += len(events)
        return bool(events)

    def _add(self, event: dict[str, Any]) -> None:
        kind, step = event.get("event", "train"), event.get("step", 0)
        if kind == "resume":
            self.resumes.append(step)
            self.recent.clear()  # the pause between stop and resume is not training speed
            return
        if kind == "pause":
            self.recent.clear()  # nor is a Pause: the speed is measured again from the steps after it
            return
        if kind == "summary":
            return
        for key in SERIES:
            if key in event:
                self.series[key].add(step, event[key])
        for key, value in event.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                self.latest[key] = value
        loss = event.get("loss")
        if kind == "train" and isinstance(loss, (int, float)):
            self.best_loss = loss if self.best_loss is None else min(self.best_loss, loss)
            if isinstance(event.get("time"), (int, float)):
                self.recent.append((event["time"], step))

    def points(self, key: str) -> list[Point]:
        """The decimated points of one series."""
        return self.series[key].points()

    def seconds_per_step(self) -> float | None:
        """Recent training speed, from the last RATE_WINDOW train events (None until there are two)."""
        if len(self.recent) < 2:
            return None
        (t0, s0), (t1, s1) = self.recent[0], self.recent[-1]
        if s1 <= s0 or t1 <= t0:
            return None
        return (t1 - t0) / (s1 - s0)


def eta_seconds(step: int, max_steps: int, seconds_per_step: float | None) -> float | None:
    """Time left at the recent speed; None when it cannot be known yet."""
    if not seconds_per_step or not max_steps or max_steps <= 0:
        return None
    return max(0, max_steps - step) * seconds_per_step


def _charts_of(run_dir: Path) -> tuple[str, ...]:
    """The metrics keys of the charts the run's method adds to the Monitor (none for an unreadable config)."""
    try:
        config = load_config(run_dir / CONFIG_FILE)
        method = METHODS[config.method]
    except (ConfigError, OSError, KeyError):
        return ()
    return tuple(chart.key for chart in method.charts if chart.drawn_for(config))
