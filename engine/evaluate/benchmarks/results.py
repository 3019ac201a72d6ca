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

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.evaluate.benchmarks.tasks import BenchmarkError, TaskSpec, resolve_tasks
from engine.evaluate.result_files import list_results, read_result, save_result
from engine.runs import jobs
from engine.runs.artifacts import FinishedRun, TrainedWeights, open_run, trained_weights
from engine.store.workspace import workspace_of
from engine.training.modality import is_vision_model

BENCHMARKS_DIR = "benchmarks"
JOB_KIND = "benchmark"
TABLE_HEADERS = ["task", "metric", "base", "tuned", "change", "samples"]


def benchmarks_dir(run_dir: Path) -> Path:
    """Where a run's benchmark results live."""
    return Path(run_dir) / BENCHMARKS_DIR


def save_benchmark(run_dir: Path, result: dict[str, Any]) -> Path:
    """Write one result atomically; returns its path."""
    return save_result(benchmarks_dir(run_dir), result)


def list_benchmarks(run_dir: Path) -> list[Path]:
    """A run's result files, newest first."""
    return list_results(benchmarks_dir(run_dir))


def read_benchmark(path: Path) -> dict[str, Any] | None:
    """One result (with ``path``, its file), or None when it cannot be read."""
    result = read_result(path)
    return {**result, "path": str(path)} if isinstance(result, dict) else None


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


@dataclass(frozen=True)
class BenchmarkRequest:
    """What to benchmark: the tasks (``heldout``, lm-eval names; ``heldout`` alone when none, and no task file, is
    named), task files, and how (documents per task, few-shot examples, the chat template, a checkpoint)."""

    tasks: tuple[str, ...] = ()
    task_files: tuple[str, ...] = ()
    limit: int | None = None  # the first N documents of each task
    num_fewshot: int | None = None  # None: each task's own
    chat_template: bool = False  # render lm-eval's and task files' prompts through the run's chat template
    checkpoint: int | None = None  # None: the final adapter / model (else the newest checkpoint)

    def args(self, run_dir: Path) -> list[str]:
        """The arguments of ``python -m engine`` for this benchmark."""
        args = ["benchmark", str(run_dir)]
        args += [part for name in self.tasks for part in ("--task", name)]
        args += [part for path in self.task_files for part in ("--task-file", str(path))]
        for flag, value in (("--limit", self.limit), ("--num-fewshot", self.num_fewshot)):
            args += [flag, str(value)] if value is not None else []
        args += ["--checkpoint", str(self.checkpoint)] if self.checkpoint is not None else []
        return [*args, "--chat-template"] if self.chat_template else args


def check_request(run_dir: Path, request: BenchmarkRequest) -> tuple[FinishedRun, TrainedWeights, list[TaskSpec]]:
    """The run, its weights and the checked tasks; ArtifactError (BenchmarkError for a task) when it cannot run."""
    run = open_run(run_dir, request.checkpoint)
    weights = trained_weights(run, request.checkpoint, newest_checkpoint=True)
    if is_vision_model(run.config):  # lm-eval's tasks are text: its model classes would read answers as images
        raise BenchmarkError(
            f"{run.name} is a vision-language run, and benchmarks (lm-evaluation-harness) score text models; "
            "Evaluate scores its held-out rows with their images"
        )
    return run, weights, resolve_tasks(run, list(request.tasks), list(request.task_files))


def start_benchmark(
    run_dir: Path,
    request: BenchmarkRequest | None = None,
    workspace: Path | None = None,
    time_limit_s: float | None = None,
) -> Path:
    """Check the request, then benchmark in a background job (stopped past ``time_limit_s``: engine.runs.jobs);
    returns the job directory.

    Raises BenchmarkError (an unknown task, a task file that cannot be read, no eval split for ``heldout``) or
    ArtifactError (a missing or running run, no weights) before anything starts, and JobError when a benchmark of
    this run is already going.
    """
    request = request or BenchmarkRequest()
    run, _, _ = check_request(run_dir, request)
    workspace = Path(workspace or workspace_of(run.run_dir) or run.run_dir.parent)
    if jobs.active_job(workspace, JOB_KIND, run_id=run.run_dir.name):
        raise jobs.JobError(f"{run.name} is already being benchmarked; wait for it or cancel it")
    labels = {"run_id": run.run_dir.name, "run_dir": str(run.run_dir)}
    return jobs.start(workspace, JOB_KIND, request.args(run.run_dir), labels=labels, time_limit_s=time_limit_s)
