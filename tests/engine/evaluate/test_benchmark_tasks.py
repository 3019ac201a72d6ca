"""Benchmarks without a model: which tasks a request names and why one is refused, a task file's checks, lm-eval's
output as result rows, the table, and what the base cache's key follows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from engine.config import parse_config
from engine.evaluate.benchmarks import cache, tasks
from engine.evaluate.benchmarks.results import summary_text, table_rows
from engine.evaluate.benchmarks.rows import merge_arms, to_rows
from engine.evaluate.benchmarks.tasks import HELDOUT, BenchmarkError, resolve_tasks, task_file
from engine.runs.artifacts import FinishedRun
from engine.store.paths import PROJECT_ROOT

DEMO_PRESET = PROJECT_ROOT / "assets" / "presets" / "demo.yaml"
INDEX = {"hellaswag": ["Rowan/hellaswag"], "mmlu": ["cais/mmlu"], "local_only": []}


def demo_run(tmp_path: Path, **data: object) -> FinishedRun:
    config = yaml.safe_load(DEMO_PRESET.read_text())
    config["data"].update(data)
    if not config["data"].get("eval_path"):
        config["train"]["eval_strategy"] = "no"
    return FinishedRun(tmp_path / "run", parse_config(config), None)  # type: ignore[arg-type]


@pytest.fixture
def index(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[str]]:
    monkeypatch.setattr(tasks, "known_tasks", lambda: INDEX)
    return INDEX


def write_task(folder: Path, data_path: str = "rows.jsonl", data: bool = True) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    if data:
        (folder / "rows.jsonl").write_text(json.dumps({"q": "2024-03-15", "a": "March 15"}) + "\n")
    config = {
        "task": "my_dates",
        "dataset_path": "json",
        "dataset_kwargs": {"data_files": {"test": data_path}},
        "test_split": "test",
        "output_type": "generate_until",
        "doc_to_text": "{{q}}",
        "doc_to_target": "{{a}}",
        "process_results": "!function utils.process",  # as lm-eval writes a Python hook; read as text here
    }
    path = folder / "task.yaml"
    path.write_text(yaml.safe_dump(config).replace("'!function utils.process'", "!function utils.process"))
    return path


def test_heldout_alone_when_nothing_is_named_and_refused_without_an_eval_split(tmp_path, index):
    assert [(s.name, s.kind) for s in resolve_tasks(demo_run(tmp_path), None, None)] == [(HELDOUT, "heldout")]
    with pytest.raises(BenchmarkError, match="has no eval split"):
        resolve_tasks(demo_run(tmp_path, eval_path=None, eval_size=0), [HELDOUT], None)


def test_an_unknown_task_is_refused_naming_it_and_a_close_name(tmp_path, index):
    with pytest.raises(BenchmarkError, match=r"unknown task 'helaswag'.*did you mean hellaswag"):
        resolve_tasks(demo_run(tmp_path), [HELDOUT, "helaswag"], None)
    with pytest.raises(BenchmarkError, match="asked for twice"):
        resolve_tasks(demo_run(tmp_path), ["local_only", "local_only"], None)


def test_a_hub_task_offline_without_a_local_copy_is_refused(tmp_path, index, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HF_DATASETS_CACHE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(BenchmarkError, match="'hellaswag' reads Rowan/hellaswag from the Hugging Face hub"):
        resolve_tasks(demo_run(tmp_path), ["hellaswag"], None)
    (tmp_path / "hf" / "hub" / "datasets--Rowan--hellaswag").mkdir(parents=True)  # a copy in the hub cache
    assert [s.datasets for s in resolve_tasks(demo_run(tmp_path), ["hellaswag"], None)] == [("Rowan/hellaswag",)]
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "0")
    assert [s.name for s in resolve_tasks(demo_run(tmp_path), ["mmlu", "local_only"], None)] == ["mmlu", "local_only"]


def test_a_task_file_is_checked_and_its_relative_data_read_from_its_folder(tmp_path, index):
    path = write_task(tmp_path / "tasks")
    spec = task_file(path)
    assert (spec.name, spec.kind, spec.path) == ("my_dates", "file", str(path.resolve()))
    assert tasks.task_file_data(path) == [tmp_path / "tasks" / "rows.jsonl"]
    specs = resolve_tasks(demo_run(tmp_path), [HELDOUT], [str(path)])
    assert [s.name for s in specs] == [HELDOUT, "my_dates"]
    assert [s.name for s in resolve_tasks(demo_run(tmp_path), None, [str(path)])] == ["my_dates"]  # no heldout
    with pytest.raises(BenchmarkError, match=r"data file .*missing.jsonl not found"):
        task_file(write_task(tmp_path / "other", "missing.jsonl"))
    with pytest.raises(BenchmarkError, match="task file not found"):
        task_file(tmp_path / "nope.yaml")
    (tmp_path / "bad.yaml").write_text("dataset_path: json\n")
    with pytest.raises(BenchmarkError, match="has no 'task: NAME' line"):
        task_file(tmp_path / "bad.yaml")


LM_EVAL_OUTPUT = {  # the parts of simple_evaluate's answer the rows read: a group of two tasks and one task
    "results": {
        "dates": {"alias": "dates", "acc,none": 0.5, "acc_stderr,none": 0.1},
        "dates_a": {"alias": " - dates_a", "acc,none": 0.25, "acc_stderr,none": 0.2},
        "dates_b": {"alias": " - dates_b", "acc,none": 0.75, "acc_stderr,none": "N/A"},
        "solo": {"alias": "solo", "perplexity,none": 3.5, "perplexity_stderr,none": 0.5, "sample_len": 4},
    },
    "group_subtasks": {"dates": ["dates_a", "dates_b"], "solo": []},
    "n-samples": {"dates_a": {"original": 9, "effective": 4}, "dates_b": {"original": 9, "effective": 4}, "solo": {}},
    "higher_is_better": {"dates": {"acc": True}, "solo": {"perplexity": False}},
}


def test_lm_eval_output_becomes_rows_and_the_two_arms_a_table():
    base = to_rows(LM_EVAL_OUTPUT)
    assert [(r["task"], r["parent"], r["samples"]) for r in base] == [
        ("dates", None, 8),
        ("dates_a", "dates", 4),
        ("dates_b", "dates", 4),
        ("solo", None, None),
    ]
    assert base[2]["metrics"] == [
        {"metric": "acc", "filter": "none", "higher_is_better": True, "value": 0.75, "stderr": None}
    ]
    tuned_output = json.loads(json.dumps(LM_EVAL_OUTPUT))
    tuned_output["results"]["solo"]["perplexity,none"] = 1.5
    merged = merge_arms(base, to_rows(tuned_output))
    solo = merged[3]
    assert solo["metrics"][0] | {} == {
        "metric": "perplexity",
        "filter": "none",
        "higher_is_better": False,
        "base": 3.5,
        "base_stderr": 0.5,
        "tuned": 1.5,
        "tuned_stderr": 0.5,
    }
    result = {"tasks": [{"name": "x", "rows": merged}]}
    table = table_rows(result)
    assert table[0] == ["dates", "acc", "0.5 ± 0.1", "0.5 ± 0.1", "+0", "8"]
    assert table[1][0] == "  dates_a"  # a group's subtask indented
    assert table[3] == ["solo", "perplexity", "3.5 ± 0.5", "1.5 ± 0.5", "-2 ▲", "—"]  # lower is better: a gain
    assert summary_text(result) == "dates acc 0.5 → 0.5; solo perplexity 3.5 → 1.5"


def test_the_cache_key_follows_the_base_models_files_and_the_task(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    (model / "model.safetensors").write_bytes(b"1234")
    run = demo_run(tmp_path)
    run.config.model.name_or_path = str(model)
    key = cache.cache_key(cache.model_identity(run, None), {"name": "t"}, {"limit": 3}, "0.4.13")
    assert cache.read_cached(tmp_path / "ws", key) is None
    path = cache.write_cached(tmp_path / "ws", key, [{"task": "t"}])
    assert path.parent == tmp_path / "ws" / "benchmarks" / "base"
    assert cache.read_cached(tmp_path / "ws", key) == ([{"task": "t"}], path)
    other_settings = cache.cache_key(cache.model_identity(run, None), {"name": "t"}, {"limit": 4}, "0.4.13")
    assert cache.read_cached(tmp_path / "ws", other_settings) is None
    (model / "model.safetensors").write_bytes(b"123456")  # new weights: the base is scored afresh
    changed = cache.cache_key(cache.model_identity(run, None), {"name": "t"}, {"limit": 3}, "0.4.13")
    assert cache.read_cached(tmp_path / "ws", changed) is None
