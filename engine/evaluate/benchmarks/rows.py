"""lm-eval's output as a benchmark result's rows (engine.evaluate.benchmarks.results shows their shape), and the
base's and the tuned model's rows side by side. Pure functions on plain dicts."""

from __future__ import annotations

import math
from typing import Any

SKIPPED_KEYS = ("alias", "name", "sample_len", " ")  # the non-metric entries of a task's scores


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def _samples(results: dict[str, Any], name: str) -> int | None:
    """How many documents a task's row was scored on; a group's: its subtasks' together."""
    counts = results.get("n-samples", {})
    if name in counts:
        return counts[name].get("effective")
    children = results.get("group_subtasks", {}).get(name) or []
    found = [n for n in (_samples(results, child) for child in children) if n is not None]
    return sum(found) if found else None


def to_rows(results: dict[str, Any]) -> list[dict[str, Any]]:
    """simple_evaluate's output as result rows: one per task or group, each metric with its stderr."""
    parents = {child: group for group, children in results.get("group_subtasks", {}).items() for child in children}
    rows = []
    for name, scores in results.get("results", {}).items():
        better = results.get("higher_is_better", {}).get(name, {})
        metrics = []
        for key, value in scores.items():
            if key in SKIPPED_KEYS or "," not in key or "_stderr," in key:
                continue
            metric, filter_name = key.split(",", 1)
            stderr = scores.get(f"{metric}_stderr,{filter_name}")
            metrics.append(
                {
                    "metric": metric,
                    "filter": filter_name,
                    "higher_is_better": better.get(metric, True),
                    "value": _number(value),
                    "stderr": _number(stderr),
                }
            )
        rows.append({"task": name, "parent": parents.get(name), "samples": _samples(results, name), "metrics": metrics})
    return rows


def merge_arms(base: list[dict[str, Any]], tuned: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Base and tuned rows side by side, matched by task and metric."""
    base_by_task = {row["task"]: row for row in base}
    merged = []
    for row in tuned:
        before = base_by_task.get(row["task"], {"metrics": [], "samples": None})
        base_metrics = {(m["metric"], m["filter"]): m for m in before["metrics"]}
        metrics = []
        for metric in row["metrics"]:
            other = base_metrics.get((metric["metric"], metric["filter"]), {})
            metrics.append(
                {
                    "metric": metric["metric"],
                    "filter": metric["filter"],
                    "higher_is_better": metric["higher_is_better"],
                    "base": other.get("value"),
                    "base_stderr": other.get("stderr"),
                    "tuned": metric["value"],
                    "tuned_stderr": metric["stderr"],
                }
            )
        samples = {"base": before["samples"], "tuned": row["samples"]}
        merged.append({"task": row["task"], "parent": row["parent"], "samples": samples, "metrics": metrics})
    return merged
