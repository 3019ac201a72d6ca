"""Benchmark the demo run that has learnt its task (the whole preset): on the held-out task the tuned model answers
where the base does not, with the same exact match as Evaluate gives on the same rows; and the engine's way of
loading the tuned model (the adapter on the base, unmerged) scores as a merged copy and as lm-eval's own ``peft=``
loading do (the issue's peer report: lm-eval's accuracy dropped with base + ``peft=`` against the merged model)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine import api
from engine.evaluate import evaluations
from engine.evaluate.benchmarks.heldout import ANSWER_TASK, LOGLIK_TASK, heldout_dir
from engine.runs import jobs
from engine.store.paths import PROJECT_ROOT
from tests.helpers.demo_run import trained_demo_run

pytestmark = pytest.mark.integration

DEMO_MODEL = PROJECT_ROOT / "assets" / "demo-model"
ROWS = 40  # held-out rows: the first 40 of the eval split, for the benchmark and for Evaluate alike


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return trained_demo_run(tmp_path_factory, tmp_path_factory.mktemp("workspace"), tuned=True)


@pytest.fixture(scope="module")
def benchmark(run_dir: Path) -> dict:
    job_dir = api.benchmarks.start_benchmark(run_dir, api.benchmarks.BenchmarkRequest(limit=ROWS))
    status = jobs.wait(job_dir, timeout=600)
    assert status.state == "completed", (status.error, status.log_tail)
    return api.benchmarks.read_benchmark(Path(status.result["path"]))


def scores(result: dict) -> dict[tuple[str, str], dict]:
    return {(row["task"], m["metric"]): m for task in result["tasks"] for row in task["rows"] for m in row["metrics"]}


def test_the_held_out_task_goes_from_wrong_to_right_as_evaluate_says(benchmark, run_dir):
    exact = scores(benchmark)[ANSWER_TASK, "exact_match"]
    job_dir = evaluations.start_evaluation(run_dir, max_rows=ROWS)
    status = jobs.wait(job_dir, timeout=600)
    assert status.state == "completed", status.error
    evaluated = evaluations.read_evaluation(Path(status.result["path"]))
    print(f"\nheld-out exact match: benchmark {exact['base']:.0%} -> {exact['tuned']:.0%}, ", end="")
    print(f"Evaluate {evaluated['base']['exact_match']:.0%} -> {evaluated['tuned']['exact_match']:.0%}")
    assert exact["tuned"] > exact["base"]
    assert (exact["base"], exact["tuned"]) == (evaluated["base"]["exact_match"], evaluated["tuned"]["exact_match"])
    loglik = scores(benchmark)[LOGLIK_TASK, "perplexity"]
    assert loglik["tuned"] < loglik["base"]


def test_the_adapter_scores_as_a_merged_model_and_as_lm_evals_peft_loading(benchmark, run_dir, monkeypatch):
    import torch
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from engine.evaluate.benchmarks.rows import to_rows
    from engine.evaluate.benchmarks.runner import language_model

    monkeypatch.setenv("DISABLE_MULTIPROC", "1")  # as the job runs lm-eval's stderr bootstrap
    adapter = run_dir / "adapter"
    tokenizer = AutoTokenizer.from_pretrained(str(adapter))
    base = AutoModelForCausalLM.from_pretrained(str(DEMO_MODEL), dtype=torch.float32)
    merged = PeftModel.from_pretrained(base, str(adapter)).merge_and_unload().eval()
    manager = TaskManager(include_path=str(heldout_dir(run_dir)), include_defaults=False)
    ways = {
        "merged": language_model(merged, tokenizer, 16, True),
        "peft=": language_model(str(DEMO_MODEL), tokenizer, 16, True, peft=str(adapter), device="cpu"),
    }
    engine = scores(benchmark)
    for way, lm in ways.items():
        output = simple_evaluate(lm, tasks=[ANSWER_TASK, LOGLIK_TASK], task_manager=manager, limit=ROWS)
        for row in to_rows(output):
            for scored in row["metrics"]:
                tuned = engine[row["task"], scored["metric"]]["tuned"]
                print(f"\n{way} {row['task']} {scored['metric']}: {scored['value']:.6g} (engine: {tuned:.6g})")
                if scored["metric"] == "perplexity":
                    assert scored["value"] == pytest.approx(tuned, rel=1e-3)
                else:  # within 1 point
                    assert abs(scored["value"] - tuned) <= 0.01
