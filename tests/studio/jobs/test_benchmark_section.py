"""The Evaluate tab's Benchmarks section: its request (demo mode: the held-out task only, capped), its table and
note in the page's language, and its handlers on a real trained demo run: refusals, a benchmark started, followed
and shown, and shown again when the run is picked."""

from __future__ import annotations

import time
from html import unescape
from pathlib import Path

import pytest

from studio.demo.caller import Caller
from studio.evaluate import benchmark_view as view
from studio.evaluate import benchmark_widgets as section
from studio.jobs.view import said_phase
from studio.jobs.widgets import cancel_job
from tests.helpers.demo_run import RUN_ID, trained_demo_run
from tests.helpers.visitors import ALICE, DEMO

RESULT = {
    "weights": "adapter",
    "tuned_as": "adapter",
    "lm_eval_version": "0.4.13",
    "tasks": [
        {
            "name": "heldout",
            "base_from_cache": True,
            "rows": [
                {
                    "task": "heldout_answer",
                    "parent": None,
                    "samples": {"base": 12, "tuned": 12},
                    "metrics": [
                        {
                            "metric": "exact_match",
                            "filter": "none",
                            "higher_is_better": True,
                            "base": 0.0,
                            "base_stderr": 0.0,
                            "tuned": 0.75,
                            "tuned_stderr": 0.13,
                        }
                    ],
                }
            ],
        }
    ],
}


def test_the_request_keeps_the_held_out_task_alone_and_capped_in_demo_mode():
    request = view.make_request(["heldout", " mmlu ", "mmlu", ""], " my/task.yaml ", 30, 60, demo=False)
    assert (request.tasks, request.task_files, request.limit, request.checkpoint) == (
        ("heldout", "mmlu"),
        ("my/task.yaml",),
        30,
        60,
    )
    demo = view.make_request(["heldout", "mmlu"], "/etc/task.yaml", 5000, None, demo=True)
    assert (demo.tasks, demo.task_files, demo.limit) == (("heldout",), (), view.DEMO_LIMIT)
    assert view.make_request(["mmlu"], "", None, None, demo=True) is None
    assert view.make_request([], None, 10, None, demo=False) is None
    assert view.offered_tasks(True) == ["heldout"] and "gsm8k" in view.offered_tasks(False)


def test_the_table_and_note_in_the_pages_language():
    frame = view.result_frame(RESULT, "zh-CN")
    assert list(frame.columns) == ["任务", "指标", "基础模型", "微调后", "变化", "样本数"]
    assert frame.values.tolist() == [["heldout_answer", "exact_match", "0 ± 0", "0.75 ± 0.13", "+0.75 ▲", "12"]]
    note = view.result_note(RESULT)
    assert "fine-tuned = the adapter on the base model, unmerged (adapter)" in note
    assert "base model scores reused from the cache: heldout" in note and "lm-eval 0.4.13" in note
    assert "No benchmark of this run yet" in view.result_note(None) and view.result_frame(None).empty
    # The job's phases in the page's language; an evaluation's "{model}: eval loss" keeps its own words.
    assert said_phase("base: heldout", "zh-CN") == "基础模型：heldout"
    assert said_phase("preparing the tasks", "ja") == "タスクを準備中"
    assert said_phase("tuned: eval loss", "zh-CN") == "微调后模型：评估损失"


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("workspace")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory, workspace: Path) -> Path:
    return trained_demo_run(tmp_path_factory, workspace)


def poll_until_done(caller: Caller, job: str, timeout: float = 300) -> list:
    deadline = time.monotonic() + timeout
    while True:
        outputs = section.benchmark_poll(caller, job, RUN_ID)
        if outputs[0] is None or time.monotonic() > deadline:
            return outputs
        time.sleep(0.3)


@pytest.mark.integration
def test_the_section_refuses_then_benchmarks_and_shows_the_table(workspace, run_dir):
    caller = Caller(workspace)
    assert "Pick a run first." in section.benchmark_clicked(caller, None, "", ["heldout"], "", 10)[2]
    assert "Pick a task or give a task file." in section.benchmark_clicked(caller, RUN_ID, "", [], " ", 10)[2]
    unknown = section.benchmark_clicked(caller, RUN_ID, "", ["heldout", "no_such_benchmark"], "", 10)
    assert unknown[0] is None and "unknown task 'no_such_benchmark'" in unescape(unknown[2])
    outside = section.benchmark_clicked(caller, RUN_ID, "", [], "/etc/passwd", 10)
    assert outside[0] is None and "task file:" in outside[2]

    job, timer, progress, start, cancel = section.benchmark_clicked(caller, RUN_ID, "", ["heldout"], "", 8)
    assert job and timer.active and "ts-job-progress" in progress and not start.interactive and cancel.interactive
    again = section.benchmark_clicked(caller, RUN_ID, "", ["heldout"], "", 8)
    assert "is already being benchmarked" in again[2]
    _, timer, progress, start, cancel, note, table = poll_until_done(caller, job)
    assert "Benchmark finished." in progress and not timer.active and start.interactive
    assert "unmerged (adapter)" in note
    assert [row[:2] for row in table.values.tolist()] == [
        ["heldout_answer", "exact_match"],
        ["heldout_answer_loglik", "perplexity"],
        ["heldout_answer_loglik", "acc"],
    ]
    assert {row[5] for row in table.values.tolist()} == {"8"}
    assert section.benchmark_run_changed(caller, RUN_ID)[0] == note  # shown again when the run is picked
    assert "No benchmark is running." in cancel_job(caller, None, "benchmark")


def test_a_visitor_sees_no_other_runs_benchmark(workspace, run_dir):
    visitor = Caller(workspace, DEMO, ALICE)
    note, table = section.benchmark_run_changed(visitor, RUN_ID)
    assert "No benchmark of this run yet" in note and table.empty
    assert section.benchmark_opened(visitor, None)[0] is None
