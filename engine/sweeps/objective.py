"""A trial's objective, read from its run's metrics.jsonl as the run writes it (by byte offset: only new lines).

eval_loss is the ``eval_loss`` of eval events; train_loss the ``loss`` of train events; any other metric is that
key in any event (GRPO's ``reward`` is logged on train events). Values that are not finite numbers are skipped: a
NaN loss ends the run as failed anyway.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from engine import runs
from engine.config import RunConfig
from engine.sweeps.sections import EXACT_MATCH, Objective
from engine.training.methods import method_of
from engine.training.methods.base import QualityMetric


def metric_key(metric: str) -> tuple[str, str | None]:
    """The metrics.jsonl key of an objective metric, and the kind of event that holds it (None: any)."""
    if metric == "eval_loss":
        return "eval_loss", "eval"
    if metric == "train_loss":
        return "loss", "train"
    return metric, None


def pruning_feed(objective: Objective, base: RunConfig) -> tuple[str, float]:
    """The metric a trial reports to the pruner while it trains, and the sign that turns it the study's way: the
    objective itself, but for exact_match (scored only after the run, engine.sweeps.evaluated, and maximized) the
    held-out metric of the base's method (the eval loss, negated; a GRPO run's eval reward, whose loss says nothing
    of how well it does)."""
    if objective.metric != EXACT_MATCH:
        return objective.metric, 1.0
    held_out = method_of(base).held_out_metrics()
    fed = held_out[0] if held_out else QualityMetric("eval_loss", "minimize")
    return fed.key, -1.0 if fed.direction == "minimize" else 1.0


class MetricTail:
    """The objective's values in one run's metrics.jsonl, read from where the last read stopped."""

    def __init__(self, run_dir: Path, metric: str):
        self.run_dir = Path(run_dir)
        self.key, self.event = metric_key(metric)
        self.offset = 0
        self.last: tuple[int, float] | None = None  # (step, value) of the newest value read

    def read(self) -> list[tuple[int, float]]:
        """(step, value) of each value written since the last read, in order."""
        events, self.offset = runs.read_metrics(self.run_dir, self.offset)
        found = [pair for pair in map(self._value, events) if pair is not None]
        if found:
            self.last = found[-1]
        return found

    def _value(self, event: dict[str, Any]) -> tuple[int, float] | None:
        if self.event is not None and event.get("event") != self.event:
            return None
        value, step = event.get(self.key), event.get("step")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return None
        return (int(step), float(value)) if isinstance(step, int) else None
