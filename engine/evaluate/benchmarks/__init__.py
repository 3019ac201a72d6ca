"""Benchmarks of a run with lm-evaluation-harness: its base model and its tuned model side by side on lm-eval's
tasks, on the run's own held-out data, or on a task file of one's own.

``results`` keeps and reads the results and starts a benchmark job; ``tasks`` checks what is asked for;
``cache`` keeps the base model's scores per task and settings; ``heldout`` writes the held-out task; ``rows`` shapes
lm-eval's output; ``runner`` (the job's body, the only module here that loads lm-eval and the models) runs them.
What the studio and the CLI use is handed on here; none of it imports an ML library.
"""

from engine.evaluate.benchmarks.results import (
    JOB_KIND,
    TABLE_HEADERS,
    BenchmarkRequest,
    benchmarks_dir,
    latest_benchmark,
    list_benchmarks,
    read_benchmark,
    start_benchmark,
    summary_text,
    table_rows,
)
from engine.evaluate.benchmarks.tasks import HELDOUT, BenchmarkError, TaskSpec, resolve_tasks

__all__ = [
    "HELDOUT",
    "JOB_KIND",
    "TABLE_HEADERS",
    "BenchmarkError",
    "BenchmarkRequest",
    "TaskSpec",
    "benchmarks_dir",
    "latest_benchmark",
    "list_benchmarks",
    "read_benchmark",
    "resolve_tasks",
    "start_benchmark",
    "summary_text",
    "table_rows",
]
