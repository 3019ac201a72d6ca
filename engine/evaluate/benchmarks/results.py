"""Benchmark results of a run: where they are kept, how they read as a table, how a benchmark is started.

``python -m engine benchmark RUN_DIR`` (engine.evaluate.benchmarks.runner) runs lm-evaluation-harness tasks on the
base model and on the tuned one and writes ``RUN_DIR/benchmarks/<id>.json``::

    {"id", "created_at", "seconds", "run_id", "weights": "adapter" | "model" | "checkpoint-N",
     "tuned_as": "adapter" | "model",  # adapter: the peft adapter on the base as the run trained it, unmerged
     "baseline": "base" | the run it started from, "lm_eval_version",
     "settings": {"limit", "num_fewshot", "chat_template", "batch_size"},
     "tasks": [{"name", "kind": "heldout" | "lm-eval" | "file", "source",
                "base_from_cache": bool, "base_cache": path,
                "rows": [{"task", "parent",  # parent: the group a subtask's row belongs to, else None
                          "samples": {"base": n, "tuned": n},
                          "metrics": [{"metric", "filter", "higher_is_better",
                                       "base", "base_stderr", "tuned", "tuned_stderr"}, ...]}, ...]}, ...]}

A score or stderr lm-eval could not give (one sample: no stderr) is None. Standard library only: the studio reads
results through it (engine.api.benchmarks).
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

from engine.evaluate.benchmarks.tasks import TaskSpec, resolve_tasks
from engine.runs import jobs
from engine.runs.artifacts import FinishedRun, TrainedWeights, open_run, trained_weights
from engine.store.rundir import write_text_atomic
from engine.store.workspace import workspace_of

BENCHMARKS_DIR = "benchmarks"
JOB_KIND = "benchmark"
TABLE_HEADERS = ["task", "metric", "base", "tuned", "change", "samples"]


def benchmarks_dir(run_dir: Path) -> Path:
    """Where a run's benchmark results live."""
    return Path(run_dir) / BENCHMARKS_DIR


def new_benchmark_id() -> str:
    """A sortable id: the newest result sorts last."""
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{time.time_ns() % 10**6:06d}"


def save_benchmark(run_dir: Path, result: dict[str, Any]) -> Path:
    """Write one result atomically; returns its path."""
    path = benchmarks_dir(run_dir) / f"{result['id']}.json"
    write_text_atomic(path, json.dumps(result, indent=1))
    return path


def list_benchmarks(run_dir: Path) -> list[Path]:
    """A run's result files, newest first."""
    root = benchmarks_dir(run_dir)
    return sorted(root.glob("*.json"), reverse=True) if root.is_dir() else []


def read_benchmark(path: Path) -> dict[str, Any] | None:
    """One result, or None when it cannot be read."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None


def latest_benchmark(run_dir: Path) -> dict[str, Any] | None:
    """The newest readable result of a run, if any."""
    return next(filter(None, map(read_benchmark, list_benchmarks(run_dir))), None)


def _score(value: float | None, stderr: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "—"
    text = f"{value:.4g}"
    return text if stderr is None or not math.isfinite(stderr) else f"{text} ± {stderr:.2g}"


def _change(metric: dict[str, Any]) -> str:
    base, tuned = metric.get("base"), metric.get("tuned")
    if base is None or tuned is None or not (math.isfinite(base) and math.isfinite(tuned)):
        return "—"
    better = (tuned > base) == bool(metric.get("higher_is_better", True))
    return f"{tuned - base:+.4g}" + ("" if tuned == base else " ▲" if better else " ▼")


def table_rows(result: dict[str, Any] | None) -> list[list[str]]:
    """The result as a table (TABLE_HEADERS): a line per task and metric; a group's subtasks indented."""
    lines = []
    for task in (result or {}).get("tasks", []):
        for row in task["rows"]:
            name = f"  {row['task']}" if row.get("parent") else row["task"]
            samples = row.get("samples") or {}
            count = str(samples.get("tuned") or samples.get("base") or "—")
            for metric in row["metrics"]:
                label = metric["metric"] + ("" if metric.get("filter") in (None, "none") else f" ({metric['filter']})")
                base = _score(metric.get("base"), metric.get("base_stderr"))
                tuned = _score(metric.get("tuned"), metric.get("tuned_stderr"))
                lines.append([name, label, base, tuned, _change(metric), count])
    return lines


def summary_text(result: dict[str, Any] | None) -> str:
    """One line: each top-level task's first metric, base → tuned."""
    parts = []
    for task in (result or {}).get("tasks", []):
        for row in task["rows"]:
            if row.get("parent") or not row["metrics"]:
                continue
            metric = row["metrics"][0]
            base, tuned = _score(metric.get("base"), None), _score(metric.get("tuned"), None)
            parts.append(f"{row['task']} {metric['metric']} {base} → {tuned}")
    return "; ".join(parts)


def check_request(
    run_dir: Path, tasks: list[str] | None, task_files: list[str] | None, checkpoint: int | None = None
) -> tuple[FinishedRun, TrainedWeights, list[TaskSpec]]:
    """The run, its weights and the checked tasks; ArtifactError (BenchmarkError for a task) when it cannot run."""
    run = open_run(run_dir, checkpoint)
    weights = trained_weights(run, checkpoint, newest_checkpoint=True)
    return run, weights, resolve_tasks(run, tasks, task_files)


def benchmark_args(
    run_dir: Path,
    tasks: list[str] | None = None,
    task_files: list[str] | None = None,
    limit: int | None = None,
    num_fewshot: int | None = None,
    chat_template: bool = False,
    checkpoint: int | None = None,
) -> list[str]:
    """The arguments of ``python -m engine`` for one benchmark."""
    args = ["benchmark", str(run_dir)]
    args += [part for name in tasks or [] for part in ("--task", name)]
    args += [part for path in task_files or [] for part in ("--task-file", str(path))]
    for flag, value in (("--limit", limit), ("--num-fewshot", num_fewshot), ("--checkpoint", checkpoint)):
        if value is not None:
            args += [flag, str(value)]
    return [*args, "--chat-template"] if chat_template else args


def start_benchmark(
    run_dir: Path,
    tasks: list[str] | None = None,
    task_files: list[str] | None = None,
    limit: int | None = None,
    num_fewshot: int | None = None,
    chat_template: bool = False,
    checkpoint: int | None = None,
    workspace: Path | None = None,
) -> Path:
    """Check the request, then benchmark in a background job; returns the job directory.

    Raises BenchmarkError (an unknown task, a task file that cannot be read, no eval split for ``heldout``) or
    ArtifactError (a missing or running run, no weights) before anything starts, and JobError when a benchmark of
    this run is already going.
    """
    run, _, _ = check_request(run_dir, tasks, task_files, checkpoint)
    workspace = Path(workspace or workspace_of(run.run_dir) or run.run_dir.parent)
    if jobs.active_job(workspace, JOB_KIND, run_id=run.run_dir.name):
        raise jobs.JobError(f"{run.name} is already being benchmarked; wait for it or cancel it")
    args = benchmark_args(run.run_dir, tasks, task_files, limit, num_fewshot, chat_template, checkpoint)
    return jobs.start(workspace, JOB_KIND, args, labels={"run_id": run.run_dir.name, "run_dir": str(run.run_dir)})
