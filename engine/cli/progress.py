"""The progress lines ``train`` and ``resume`` print: train.log as the run writes it, with a method's own metrics in
each step's line.

The worker's line for a logged step holds what every method logs (``train step 5/20 | epoch 0.50 | loss 0 |
learning_rate ... | grad_norm 0 | ...``). For DPO that misses the reward margins, and for GRPO, whose loss and
gradient norm start at 0 by design, it misses the reward the run learns from. So the metrics a method charts
(its record's ``charts`` whose ``drawn_for`` holds for the run's config: engine.methods) are added after the
epoch, read from the same event in metrics.jsonl, which the worker appends before it prints the line.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from engine.config import RunConfig
from engine.methods import method_of
from engine.store.rundir import METRICS_FILE, read_metrics

# The worker's line for a metrics event (engine.training.callbacks): its kind, step, and where the epoch ends.
_STEP_LINE = re.compile(rb"^(train|eval) step (\d+)/\d+ \| epoch [^|\n]*")
_LINE_STARTS = (b"train step ", b"eval step ")


def method_metrics(config: RunConfig) -> list[str]:
    """The metrics keys the run's method charts for this config, in its record's order."""
    return [chart.key for chart in method_of(config).charts if chart.drawn_for(config)]


def metric_part(event: dict[str, Any], keys: list[str]) -> str:
    """`` | reward 0.5 | reward_std 0.1``: the event's values of ``keys`` (``eval_`` + key in an eval event)."""
    prefix = "eval_" if event.get("event") == "eval" else ""
    values = [(key, event.get(prefix + key)) for key in keys]
    return "".join(f" | {key} {value:.4g}" for key, value in values if _number(value))


def _may_begin(text: bytes, start: bytes) -> bool:
    """Whether a line that begins with ``text`` may be one that begins with ``start``."""
    return start.startswith(text) or text.startswith(start)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class MethodProgress:
    """An ``echo`` for engine.runs.follow: passes train.log through, adding the method's metrics to each logged
    step's line. A line is held only while it may still become a step line, so other output is never delayed."""

    def __init__(self, run_dir: Path, keys: list[str]):
        self.run_dir = Path(run_dir)
        self.keys = keys
        try:  # events from before this command (a resumed run's) are not needed: their lines were printed then
            self.offset = (self.run_dir / METRICS_FILE).stat().st_size
        except FileNotFoundError:
            self.offset = 0
        self.events: dict[tuple[str, int], dict[str, Any]] = {}
        self.held = b""  # the start of a line that may be a step line
        self.mid_line = False  # the last byte written was not the end of a line

    def __call__(self, chunk: bytes) -> None:
        data, out = self.held + chunk, []
        self.held = b""
        lines = data.split(b"\n")
        for line in lines[:-1]:
            out.append(line if self.mid_line else self._with_metrics(line))
            out.append(b"\n")
            self.mid_line = False
        rest = lines[-1]
        if (
            rest
            and not self.mid_line
            and any(start.startswith(rest) or rest.startswith(start) for start in _LINE_STARTS)
        ):
            self.held = rest
        elif rest:
            out.append(rest)
            self.mid_line = True
        self._write(b"".join(out))

    def close(self) -> None:
        """Write out a last line that never ended."""
        held, self.held = self.held, b""
        self._write(held)

    def _with_metrics(self, line: bytes) -> bytes:
        found = _STEP_LINE.match(line)
        if not found or not self.keys:
            return line
        event = self._event(found.group(1).decode(), int(found.group(2)))
        part = metric_part(event, self.keys).encode() if event else b""
        if not part:
            return line
        rest = line[found.end() :].lstrip()
        return line[: found.end()].rstrip() + part + (b" " + rest if rest else b"")

    def _event(self, kind: str, step: int) -> dict[str, Any] | None:
        if (kind, step) not in self.events:
            events, self.offset = read_metrics(self.run_dir, self.offset)
            self.events.update(((event.get("event"), event.get("step")), event) for event in events)
        return self.events.pop((kind, step), None)  # its line is printed once

    @staticmethod
    def _write(data: bytes) -> None:
        if data:
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()
