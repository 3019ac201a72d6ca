"""The ``heldout`` task: the run's own eval split as two lm-eval tasks, written into the run directory.

``RUN_DIR/benchmarks/tasks/heldout/``::

    heldout.jsonl                {"prompt", "answer"} a row: the prompt rendered through the run's chat template
                                 (as Evaluate and Chat render it), the reference answer
    heldout_answer.yaml          generate_until: exact match of the greedy answer (both stripped, as Evaluate does)
    heldout_answer_loglik.yaml   loglikelihood of the reference answer: perplexity, and acc (every answer token is
                                 the model's top choice)

Prompts are rendered here rather than by lm-eval's ``apply_chat_template`` so that a multi-turn row, a system turn
and the run's own template (data.chat_template) are kept exactly. Written by the benchmark job (it needs the
tokenizer); each file atomically.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from engine.evaluate.benchmarks.cache import file_digest
from engine.evaluate.benchmarks.tasks import HELDOUT, BenchmarkError
from engine.evaluate.evaluations import DATA_EVAL
from engine.evaluate.models import pick_rows
from engine.runs.artifacts import FinishedRun
from engine.store.rundir import write_text_atomic

TASKS_DIR = "benchmarks/tasks"
ANSWER_TASK, LOGLIK_TASK = f"{HELDOUT}_answer", f"{HELDOUT}_answer_loglik"
ANSWER_SLACK_TOKENS = 8  # room beyond the longest reference, so a slightly longer answer is seen (and wrong)
FORMAT_VERSION = 3  # bumped when the task or its scoring changes, so base scores cached before are not reused
STRIP = [r"^\s+", r"\s+$"]  # exact match after stripping both sides, as Evaluate compares


def heldout_dir(run_dir: Path) -> Path:
    """Where a run's held-out task files go."""
    return Path(run_dir) / TASKS_DIR / HELDOUT


def _rows(run: FinishedRun, tokenizer: Any) -> list[dict[str, str]]:
    """The eval split's conversational rows as (rendered prompt, reference answer)."""
    loaded, indices, _ = pick_rows(run, DATA_EVAL, None)
    rows = []
    for index in indices:
        messages = loaded.rows[index].get("messages")
        if not messages or messages[-1].get("role") != "assistant":
            continue
        prompt = tokenizer.apply_chat_template(messages[:-1], add_generation_prompt=True, tokenize=False)
        rows.append({"prompt": prompt, "answer": messages[-1]["content"]})
    if not rows:
        raise BenchmarkError(
            f"{run.name}'s eval split ({loaded.source}) has no rows that end with an assistant answer, "
            f"so it makes no {HELDOUT!r} task"
        )
    return rows


def _task(name: str, data: Path, output_type: str, metrics: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {
        "task": name,
        "dataset_path": "json",
        "dataset_kwargs": {"data_files": {"test": str(data)}},
        "test_split": "test",
        "output_type": output_type,
        "doc_to_text": "{{prompt}}",
        "doc_to_target": "{{answer}}",
        "target_delimiter": "",  # the prompt ends where the answer starts (the template's generation prompt)
        "num_fewshot": 0,  # a rendered chat prompt takes no examples (lm-eval keeps a task's 0 over --num-fewshot)
        "metric_list": metrics,
        "metadata": {"version": FORMAT_VERSION},
        **extra,
    }


def write_heldout_task(run: FinishedRun, tokenizer: Any) -> tuple[list[str], dict[str, Any]]:
    """Write the task files; returns the lm-eval task names to run and the task's identity for the base cache."""
    rows = _rows(run, tokenizer)
    folder = heldout_dir(run.run_dir)
    data = folder / f"{HELDOUT}.jsonl"
    write_text_atomic(data, "".join(json.dumps(row) + "\n" for row in rows))
    longest = max(len(tokenizer(row["answer"], add_special_tokens=False)["input_ids"]) for row in rows)
    budget = longest + ANSWER_SLACK_TOKENS
    exact = {"metric": "exact_match", "aggregation": "mean", "higher_is_better": True, "regexes_to_ignore": STRIP}
    answer = _task(
        ANSWER_TASK,
        data,
        "generate_until",
        [exact],
        generation_kwargs={"until": [tokenizer.eos_token], "do_sample": False, "max_gen_toks": budget},
    )
    loglik = _task(
        LOGLIK_TASK,
        data,
        "loglikelihood",
        [
            {"metric": "perplexity", "aggregation": "perplexity", "higher_is_better": False},
            {"metric": "acc", "aggregation": "mean", "higher_is_better": True},
        ],
    )
    for task in (answer, loglik):
        write_text_atomic(folder / f"{task['task']}.yaml", yaml.safe_dump(task, sort_keys=False))
    identity = {"name": HELDOUT, "data": file_digest(data), "max_gen_toks": budget, "format": FORMAT_VERSION}
    return [ANSWER_TASK, LOGLIK_TASK], identity
