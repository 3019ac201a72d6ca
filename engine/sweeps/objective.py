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


def metric_key(metric: str) -> tuple[str, str | None]:
    """The metrics.jsonl key of an objective metric, and the kind of event that holds it (None: any)."""
    if metric == "eval_loss":
        return "eval_loss", "eval"
    if metric == "train_loss":
        return "loss", "train"
    return metric, None


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
