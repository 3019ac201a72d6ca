"""Benchmark a real trained demo run (60 steps) through the real ``python -m engine benchmark`` job: base and tuned
side by side on the held-out task and on a task file of one's own, the base's scores reused from the cache on a
second run, an unknown task refused before a job starts, cancel. (A run that has learnt the task:
test_benchmark_tuned_run.py.)"""

from __future__ import annotations

import calendar
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from engine import api
from engine.evaluate.benchmarks.heldout import ANSWER_TASK, LOGLIK_TASK, heldout_dir
from engine.runs import jobs
from engine.store.paths import PROJECT_ROOT
from tests.helpers.demo_run import trained_demo_run

pytestmark = pytest.mark.integration

DEMO_MODEL = PROJECT_ROOT / "assets" / "demo-model"
DEMO_EVAL = PROJECT_ROOT / "assets" / "datasets" / "demo_sft_eval.jsonl"
LIMIT = 12  # documents per task: enough for a stderr, quick on 2 cores
MONTHS = list(calendar.month_name)[1:]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("workspace")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory, workspace: Path) -> Path:
    return trained_demo_run(tmp_path_factory, workspace)


@pytest.fixture(scope="module")
def task_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A multiple-choice task of one's own: which month a date is in, its data beside it (a relative path)."""
    folder = tmp_path_factory.mktemp("my-tasks")
    rows = []
    for line in DEMO_EVAL.read_text().splitlines()[:LIMIT]:
        answer = json.loads(line)["messages"][-1]["content"].split()[0]
        wrong = MONTHS[(MONTHS.index(answer) + 6) % 12]
        date = json.loads(line)["messages"][0]["content"].split()[-1].rstrip("?")
        rows.append({"date": date, "choices": [answer, wrong], "label": 0})
    (folder / "months.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    config = {
        "task": "my_months",
        "dataset_path": "json",
        "dataset_kwargs": {"data_files": {"test": "months.jsonl"}},
        "test_split": "test",
        "output_type": "multiple_choice",
        "doc_to_text": "Which month is {{date}} in?\nAnswer:",
        "doc_to_choice": "choices",
        "doc_to_target": "label",
        "metric_list": [{"metric": "acc", "aggregation": "mean", "higher_is_better": True}],
        "metadata": {"version": 1},
    }
    (folder / "months.yaml").write_text(yaml.safe_dump(config))
    return folder / "months.yaml"


def benchmarked(run_dir: Path, workspace: Path, task_file: Path) -> tuple[dict, float]:
    began = time.monotonic()
    job_dir = api.benchmarks.start_benchmark(
        run_dir, api.benchmarks.BenchmarkRequest(("heldout",), (str(task_file),), limit=LIMIT), workspace
    )
    status = jobs.wait(job_dir, timeout=600)
    assert status.state == "completed", (status.error, status.log_tail)
    result = api.benchmarks.latest_benchmark(run_dir)
    assert result["path"] == status.result["path"] and status.result["summary"] == api.benchmarks.summary_text(result)
    return result, time.monotonic() - began


@pytest.fixture(scope="module")
def first(run_dir: Path, workspace: Path, task_file: Path) -> tuple[dict, float]:
    return benchmarked(run_dir, workspace, task_file)


def rows_of(result: dict) -> dict[str, dict]:
    return {row["task"]: row for task in result["tasks"] for row in task["rows"]}


def metric(row: dict, name: str) -> dict:
    return next(m for m in row["metrics"] if m["metric"] == name)


def test_base_and_tuned_side_by_side_with_stderr_and_samples(first, run_dir):
    result, seconds = first
    assert Path(result["path"]).parent == run_dir / "benchmarks"
    assert (result["tuned_as"], result["weights"], result["baseline"]) == ("adapter", "adapter", "base")
    assert [(t["name"], t["kind"], t["base_from_cache"]) for t in result["tasks"]] == [
        ("heldout", "heldout", False),
        ("my_months", "file", False),
    ]
    rows = rows_of(result)
    assert set(rows) == {ANSWER_TASK, LOGLIK_TASK, "my_months"}
    for row in rows.values():
        assert row["samples"] == {"base": LIMIT, "tuned": LIMIT}
        for scored in row["metrics"]:
            assert None not in (scored["base"], scored["tuned"], scored["base_stderr"], scored["tuned_stderr"])
    exact, loglik = metric(rows[ANSWER_TASK], "exact_match"), metric(rows[LOGLIK_TASK], "perplexity")
    months = metric(rows["my_months"], "acc")
    print(
        f"\nheldout exact match {exact['base']:.0%} -> {exact['tuned']:.0%}; answer perplexity {loglik['base']:.4g} -> "
        f"{loglik['tuned']:.4g}; my_months acc {months['base']:.0%} -> {months['tuned']:.0%} ({seconds:.0f} s)"
    )
    # 60 steps have not taught the answers yet (the whole preset does: 0% -> 100%), but the answers' likelihood grew.
    assert exact["tuned"] >= exact["base"] and loglik["tuned"] < loglik["base"]
    assert 0 <= months["base"] <= 1 and 0 <= months["tuned"] <= 1
    assert (heldout_dir(run_dir) / f"{ANSWER_TASK}.yaml").is_file()
    table = api.benchmarks.table_rows(result)
    assert [line[:2] for line in table] == [
        [ANSWER_TASK, "exact_match"],
        [LOGLIK_TASK, "perplexity"],
        [LOGLIK_TASK, "acc"],
        ["my_months", "acc"],
    ]


def test_a_second_benchmark_takes_the_base_scores_from_the_cache(first, run_dir, workspace, task_file):
    result, seconds = first
    caches = {task["name"]: Path(task["base_cache"]) for task in result["tasks"]}
    assert all(path.parent == workspace / "benchmarks" / "base" for path in caches.values())
    written = {name: path.stat().st_mtime_ns for name, path in caches.items()}
    again, again_seconds = benchmarked(run_dir, workspace, task_file)
    print(f"\nfirst benchmark {seconds:.0f} s, again with the base cached {again_seconds:.0f} s")
    assert [task["base_from_cache"] for task in again["tasks"]] == [True, True]
    assert {name: path.stat().st_mtime_ns for name, path in caches.items()} == written  # not scored, not rewritten
    for name, row in rows_of(again).items():
        before = rows_of(result)[name]
        assert [(m["base"], m["tuned"]) for m in row["metrics"]] == [(m["base"], m["tuned"]) for m in before["metrics"]]
    assert api.benchmarks.list_benchmarks(run_dir)[0] == Path(again["path"])


def test_an_unknown_task_is_refused_before_a_job_starts(run_dir, workspace):
    before = jobs.list_jobs(workspace, api.benchmarks.JOB_KIND)
    with pytest.raises(api.benchmarks.BenchmarkError, match="unknown task 'no_such_benchmark'"):
        api.benchmarks.start_benchmark(run_dir, api.benchmarks.BenchmarkRequest(("heldout", "no_such_benchmark")))
    assert jobs.list_jobs(workspace, api.benchmarks.JOB_KIND) == before
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_HOME=str(workspace / "no-hf-cache"))
    command = [sys.executable, "-m", "engine", "benchmark", str(run_dir), "--task", "hellaswag"]
    done = subprocess.run(command, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 2 and "'hellaswag' reads Rowan/hellaswag from the Hugging Face hub" in done.stderr


def test_cancel_ends_the_job_without_a_result(first, run_dir, workspace):
    saved = api.benchmarks.list_benchmarks(run_dir)
    job_dir = api.benchmarks.start_benchmark(run_dir, api.benchmarks.BenchmarkRequest(num_fewshot=0), workspace)
    deadline = time.monotonic() + 300
    while "base: heldout" not in (jobs.status(job_dir).phase or "") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert jobs.cancel(job_dir)
    status = jobs.wait(job_dir, timeout=120)
    assert (status.state, status.error) == ("cancelled", "cancelled by the user")
    assert api.benchmarks.list_benchmarks(run_dir) == saved
