"""The Evaluate tab's Benchmarks section without Gradio: which tasks it offers, the request a Start makes, and a
benchmark result (engine.api.benchmarks) as a table and a note, in the page's language.

Demo mode runs only the held-out task (the run's own eval set: no hub download, no file of the server), on at most
``DEMO_LIMIT`` documents.
"""

from __future__ import annotations

import html
from typing import Any

import pandas as pd

from engine.api import benchmarks
from studio.i18n.catalog import SOURCE, key, text

# Offered in the task picker (any other lm-eval name can be typed): the run's own held-out task, then well-known
# lm-eval tasks, whose data comes from the hub.
TASK_CHOICES = [benchmarks.HELDOUT, "mmlu", "gsm8k", "hellaswag", "arc_easy", "arc_challenge", "ifeval"]
DEFAULT_LIMIT = 100
DEMO_LIMIT = 50  # documents per task in demo mode: a benchmark there takes seconds, not minutes
COLUMNS = [key(f"benchmark.column.{name}") for name in ("task", "metric", "base", "tuned", "change", "samples")]
EMPTY = key("benchmark.empty")
NO_TASK, BAD_PATH = key("benchmark.refuse.no_task"), key("benchmark.refuse.bad_path")
LIMIT = key("benchmark.limit")
TUNED_AS = {"adapter": key("benchmark.note.adapter"), "model": key("benchmark.note.model")}
CACHED, VERSION = key("benchmark.note.cached"), key("benchmark.note.version")


def offered_tasks(demo: bool) -> list[str]:
    """The task picker's choices: the held-out task alone in demo mode."""
    return [benchmarks.HELDOUT] if demo else TASK_CHOICES


def make_request(
    tasks: list[str] | None, task_file: str | None, limit: float | None, checkpoint: int | None, demo: bool
) -> benchmarks.BenchmarkRequest | None:
    """The request a Start makes; None when it names no task at all. Demo mode keeps the held-out task only (a
    typed name or a file of the server is dropped) and at most DEMO_LIMIT documents."""
    names = tuple(dict.fromkeys(name.strip() for name in tasks or [] if name and name.strip()))
    files = (task_file.strip(),) if task_file and task_file.strip() else ()
    count = int(limit) if limit else None
    if demo:
        names, files = tuple(name for name in names if name == benchmarks.HELDOUT), ()
        count = min(count or DEMO_LIMIT, DEMO_LIMIT)
    if not names and not files:
        return None
    return benchmarks.BenchmarkRequest(names, files, count, checkpoint=checkpoint)


def result_frame(result: dict[str, Any] | None, lang: str = SOURCE) -> pd.DataFrame:
    """A line per task and metric: base and fine-tuned score (± stderr), the change, the samples; headers in
    ``lang``."""
    return pd.DataFrame(benchmarks.table_rows(result), columns=[text(name, lang) for name in COLUMNS])


def result_note(result: dict[str, Any] | None, lang: str = SOURCE) -> str:
    """How the fine-tuned model was loaded, which base scores came from the cache, and the lm-eval version; the
    empty state when there is no result."""
    if not result:
        return f'<div class="ts-empty">{html.escape(text(EMPTY, lang))}</div>'
    parts = [text(TUNED_AS.get(result.get("tuned_as"), TUNED_AS["model"]), lang, weights=result.get("weights", ""))]
    cached = [task["name"] for task in result.get("tasks", []) if task.get("base_from_cache")]
    if cached:
        parts.append(text(CACHED, lang, tasks=", ".join(cached)))
    parts.append(text(VERSION, lang, version=result.get("lm_eval_version", "?")))
    return f'<div class="ts-eval-caption">{" · ".join(map(html.escape, parts))}</div>'
