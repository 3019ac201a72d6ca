"""``python -m engine benchmark RUN``: lm-evaluation-harness on a run's base model and its tuned model.

    python -m engine benchmark DIR [--task NAME ...] [--task-file PATH ...] [--limit N] [--num-fewshot N]
                                   [--chat-template] [--checkpoint N]

With no task it runs ``heldout`` (the run's own eval split). It prints its progress and a table; with ``--job-dir``
(set by engine.runs.jobs when the studio starts it) it also keeps the job's progress.json. Ctrl-C or SIGTERM
cancels it. An unknown task, a task file that cannot be read and a run without an eval split for ``heldout`` are
refused before any model loads (exit 2).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any


def add_benchmark_command(commands: Any, count: Callable[[str], int], positive: Callable[[str], int]) -> None:
    """The benchmark sub-command (a background job when the studio starts it with --job-dir); ``count`` and
    ``positive`` read a whole number >= 0 and >= 1 as the other commands do."""
    command = commands.add_parser(
        "benchmark", help="lm-evaluation-harness tasks on the base and the fine-tuned model of a run, side by side"
    )
    command.add_argument("run_dir", type=Path, help="the run's directory")
    command.add_argument(
        "--task",
        action="append",
        metavar="NAME",
        help="heldout (the run's eval split; the default) or an lm-eval task, group or tag (mmlu, gsm8k, hellaswag, "
        "arc_easy, ifeval, ...: their data comes from the hub); repeatable",
    )
    command.add_argument(
        "--task-file",
        action="append",
        metavar="PATH",
        help="an lm-eval task YAML of your own with local data files (relative paths from its folder); repeatable",
    )
    command.add_argument("--limit", type=positive, metavar="N", help="score only the first N documents of each task")
    command.add_argument("--num-fewshot", type=count, metavar="N", help="few-shot examples (default: the task's)")
    command.add_argument(
        "--chat-template",
        action="store_true",
        help="render lm-eval tasks' prompts through the run's chat template (heldout always is)",
    )
    command.add_argument("--checkpoint", type=count, help="benchmark this checkpoint (default: the final result)")
    command.add_argument("--job-dir", type=Path, help=argparse.SUPPRESS)


def benchmark(args: argparse.Namespace) -> int:
    """Run the benchmark as a job (engine.runs.jobs.run_job); returns the exit code."""
    from engine.config import ConfigError
    from engine.data import DataError
    from engine.runs.artifacts import ArtifactError
    from engine.runs.jobs import Progress, run_job

    def work(progress: Progress) -> dict[str, Any]:
        import warnings

        warnings.filterwarnings("ignore", category=FutureWarning)
        warnings.filterwarnings("ignore", category=UserWarning)
        from engine.evaluate.benchmarks.results import TABLE_HEADERS, BenchmarkRequest, summary_text, table_rows
        from engine.evaluate.benchmarks.runner import run_benchmark

        request = BenchmarkRequest(
            tuple(args.task or ()),
            tuple(args.task_file or ()),
            args.limit,
            args.num_fewshot,
            args.chat_template,
            args.checkpoint,
        )
        result = run_benchmark(args.run_dir, request, progress)
        lines = [TABLE_HEADERS, *table_rows(result)]
        widths = [max(len(line[i]) for line in lines) for i in range(len(TABLE_HEADERS))]
        for line in lines:
            print("  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip())
        cached = [task["name"] for task in result["tasks"] if task["base_from_cache"]]
        if cached:
            print(f"base scores from the cache: {', '.join(cached)}")
        how = "the adapter on the base model, unmerged" if result["tuned_as"] == "adapter" else "the trained model"
        print(f"fine-tuned = {how} ({result['weights']}); saved to {result['path']}", flush=True)
        return {"path": result["path"], "summary": summary_text(result), "id": result["id"]}

    return run_job(args.job_dir, work, (ArtifactError, ConfigError, DataError))
