"""A per-browser-session tail of one run's metrics.jsonl that feeds the Monitor's charts.

It remembers the byte offset it has read up to and asks ``engine.runs.read_metrics`` for the new lines only,
folding them into decimated series: the cost of a poll is proportional to what the trainer wrote since the
last poll, never to the length of the run.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.api import (
    CONFIG_FILE,
    ConfigError,
    evaluation_key,
    load_config,
    method_charts,
    method_of,
    reward_names,
    runs,
)
from studio.charts import DecimatedSeries, Point

# The series the Monitor draws, by the metrics.jsonl key they come from.
# A method's chart draws what its evaluations log of the same metric beside it (eval_reward on the reward's).
SERIES = (
    "loss",
    "eval_loss",
    "learning_rate",
    "grad_norm",
    "tokens_per_second",
    *method_charts(),
    *map(evaluation_key, method_charts()),
)
RATE_WINDOW = 20  # recent train events used for the ETA: follows speed changes, ignores the warm-up
# TRL's trainers that learn from reward functions log their weighted sum as "reward" and each function's mean
# as "rewards/<name>/mean": the Monitor draws the parts on the total's chart.
REWARD_TOTAL = "reward"


def reward_key(name: str) -> str:
    """The metrics key of one reward function's mean, as TRL logs it."""
    return f"rewards/{name}/mean"


@dataclass(frozen=True)
class RunFacts:
    """What the Monitor asks of a run's method record (its config read once): the metrics keys of the charts the
    method adds, its reward functions (name -> metrics key of their mean), whether it learns from rewards (it
    logs no eval loss worth the name: its rewards tell how it does) and whether the run has an eval set."""

    charts: tuple[str, ...] = ()
    rewards: dict[str, str] = field(default_factory=dict)
    learns_from_rewards: bool = False
    has_eval: bool = True  # an unreadable config: nothing is said about its eval set
    held_out: str = "eval_loss"  # the method's first held-out quality metric (a sampling method's: eval_reward)


def run_facts(run_dir: Path) -> RunFacts:
    """The run's facts (``RunFacts``; the empty facts for a config that cannot be read)."""
    try:
        config = load_config(Path(run_dir) / CONFIG_FILE)
        method = method_of(config)
    except (ConfigError, OSError, KeyError):
        return RunFacts()
    specs = method.rewards(config)
    held_out = method.held_out_metrics()
    return RunFacts(
        charts=tuple(chart.key for chart in method.charts if chart.drawn_for(config)),
        rewards={name: reward_key(name) for name in reward_names(specs)},
        learns_from_rewards=bool(specs),
        has_eval=config.has_eval_data,
        held_out=held_out[0].key if held_out else "eval_loss",
    )


class MetricsFeed:
    """What one session has read of one run: offset, decimated series, resume markers and the latest values."""

    def __init__(self, run_dir: Path, max_points: int = 2000):
        self.run_dir = Path(run_dir)
        self.offset = 0
        self.facts = run_facts(self.run_dir)
        self.charts = self.facts.charts  # the metrics keys of the run's method's own charts
        # the common series, then those of the run's reward functions (each one's mean)
        keys = dict.fromkeys([*SERIES, *self.facts.rewards.values()])
        self.series = {key: DecimatedSeries(max_points=max_points) for key in keys}
        self.resumes: list[float] = []
        self.latest: dict[str, float] = {}  # the newest value of every numeric key, for the stats panel
        self.best_loss: float | None = None
        self.recent: deque[tuple[float, int]] = deque(maxlen=RATE_WINDOW)  # (time, step) of train events
        self.events_read = 0

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
        for key, series in self.series.items():
            if key in event:
                series.add(step, event[key])
        for key, value in event.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                self.latest[key] = value
        loss = event.get("loss")
        if kind == "train" and isinstance(loss, (int, float)):
            self.best_loss = loss if self.best_loss is None else min(self.best_loss, loss)
            if isinstance(event.get("time"), (int, float)):
                self.recent.append((event["time"], step))

    def parts(self, metric: str) -> dict[str, DecimatedSeries]:
        """The series a chart of ``metric`` draws beside it: each reward function's mean (by its name) on the
        weighted reward's chart; {} for any other metric."""
        if metric != REWARD_TOTAL:
            return {}
        return {name: self.series[key] for name, key in self.facts.rewards.items()}

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
