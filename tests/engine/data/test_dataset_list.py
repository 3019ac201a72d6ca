"""Several datasets in data.path: each loaded by the one loader with its own format and columns, capped, weighted
and concatenated in order; the eval split, max_samples and the seed then act on the combined rows.

Real files: the LLaMA-Factory demo sets beside the repository and the bundled demo set.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engine.config import ConfigError, RunConfig, parse_config
from engine.config.data import DataSection
from engine.data import DataError, inspect_dataset, load_rows, prepare_datasets, preview_examples
from engine.data.mixture import weighted_indices
from engine.data.pipeline import select_rows, split_indices
from engine.training.method_data import inspect_run_data, require_format
from engine.training.methods import METHODS
from engine.training.methods.base import Method

DEMO_TRAIN = "assets/datasets/demo_sft_train.jsonl"


def data_of(path: Any, **rest: Any) -> DataSection:
    """A validated data section (through the whole config, as a YAML file gives it)."""
    return parse_config({"data": {"path": path, **rest}}).data


@pytest.fixture
def two_files(shared_datasets: Path) -> list[dict[str, Any]]:
    """The brief's list: 20 alpaca rows, then the first 10 rows of the bundled chat set twice."""
    return [
        {"path": str(shared_datasets / "alpaca_en_demo.json"), "max_samples": 20},
        {"path": DEMO_TRAIN, "max_samples": 10, "weight": 2},
    ]


def test_two_real_files_give_forty_rows_in_order(two_files: list[dict[str, Any]], shared_datasets: Path) -> None:
    loaded, train_idx, eval_loaded, eval_idx = select_rows(data_of(two_files), seed=42)
    alpaca = load_rows(DataSection(path=str(shared_datasets / "alpaca_en_demo.json"))).rows
    chats = load_rows(DataSection(path=DEMO_TRAIN)).rows
    assert len(loaded.rows) == 40 and train_idx == list(range(40)) and (eval_loaded, eval_idx) == (None, [])
    assert loaded.rows == alpaca[:20] + chats[:10] + chats[:10]
    # The first row is alpaca's first instruction turned into a conversation; row 21 is the chat set's first.
    first = json.loads((shared_datasets / "alpaca_en_demo.json").read_text())[0]
    assert loaded.rows[0]["messages"][0] == {"role": "user", "content": first["instruction"]}
    assert loaded.rows[0]["messages"][-1] == {"role": "assistant", "content": first["output"]}
    assert loaded.rows[20]["messages"][0]["content"] == "Read this date as month and day: 1970-02-25"
    assert loaded.rows[30] == loaded.rows[20]
    assert loaded.format == "alpaca+conversational"
    # Each row is named by its own file and row number.
    assert loaded.where(0) == (str(shared_datasets / "alpaca_en_demo.json"), 1)
    assert loaded.where(29)[1] == 10 and loaded.where(30)[1] == 1 and loaded.where(30)[0].endswith(DEMO_TRAIN)


def test_the_report_keeps_the_combined_fields_and_adds_one_entry_per_dataset(
    two_files: list[dict[str, Any]], shared_datasets: Path
) -> None:
    report = inspect_dataset(data_of(two_files))
    assert (report.num_rows, report.num_source_rows, report.num_eval_rows) == (40, 40, 0)
    assert report.format == "alpaca+conversational" and report.listed
    assert report.columns == ["instruction", "input", "output", "messages"]
    first, second = report.datasets
    alpaca_rows = len(json.loads((shared_datasets / "alpaca_en_demo.json").read_text()))
    assert (first.label, first.format, first.num_source_rows, first.num_rows) == (
        "data.path.0",
        "alpaca",
        alpaca_rows,
        20,
    )
    assert (second.label, second.format, second.num_source_rows, second.num_rows) == (
        "data.path.1",
        "conversational",
        2000,
        20,
    )
    assert second.summary().endswith("conversational, 20 rows used (the first 10 of 2,000, weight 2)")
    assert first.summary().endswith(f"alpaca, 20 rows used (the first 20 of {alpaca_rows:,})")


def test_a_weight_of_a_half_draws_half_the_rows_the_same_for_the_same_seed() -> None:
    data = data_of([{"path": DEMO_TRAIN, "max_samples": 100, "weight": 0.5}])
    chats = load_rows(DataSection(path=DEMO_TRAIN)).rows
    first, _, _, _ = select_rows(data, seed=42)
    again, _, _, _ = select_rows(data, seed=42)
    other, _, _, _ = select_rows(data, seed=7)
    assert len(first.rows) == 50 and first.rows == again.rows and other.rows != first.rows
    numbers = [first.where(index)[1] for index in range(50)]
    assert numbers == sorted(set(numbers)) and max(numbers) <= 100  # distinct rows of the capped 100, file order
    assert first.rows == [chats[number - 1] for number in numbers]


def test_a_weight_with_a_fraction_repeats_the_whole_part_and_draws_the_rest() -> None:
    entry = data_of([{"path": DEMO_TRAIN, "weight": 2.5, "max_samples": 10}]).path[0]
    picked = weighted_indices(2000, entry, seed=42, number=0)
    assert len(picked) == 25 and picked[:20] == list(range(10)) * 2 and set(picked[20:]) <= set(range(10))
    tiny = data_of([{"path": DEMO_TRAIN, "weight": 0.01, "max_samples": 10}]).path[0]
    assert len(weighted_indices(2000, tiny, seed=42, number=0)) == 1  # a small weight still trains on a row


def test_eval_split_and_max_samples_act_on_the_combined_rows(two_files: list[dict[str, Any]]) -> None:
    loaded, train_idx, eval_loaded, eval_idx = select_rows(data_of(two_files, eval_size=5), seed=42)
    assert eval_loaded is loaded and len(eval_idx) == 5
    # The copies of a row that a weight repeats stay on one side: nothing evaluated is also trained on.
    held = {loaded.origins[index] for index in eval_idx}
    assert not held & {loaded.origins[index] for index in train_idx}
    assert len(train_idx) + sum(loaded.origins.count(origin) for origin in held) == 40
    _, capped, _, _ = select_rows(data_of(two_files, max_samples=25), seed=42)
    assert capped == list(range(25))


def test_without_repeated_rows_the_split_is_the_plain_split_of_the_combined_rows(shared_datasets: Path) -> None:
    files = [{"path": str(shared_datasets / "alpaca_en_demo.json"), "max_samples": 30}, {"path": DEMO_TRAIN}]
    loaded, train_idx, _, eval_idx = select_rows(data_of(files, eval_size=0.1), seed=3)
    assert (train_idx, eval_idx) == split_indices(len(loaded.rows), 0.1, 3)


def test_each_dataset_has_its_own_format_and_columns(tmp_path: Path) -> None:
    renamed = tmp_path / "renamed.jsonl"
    renamed.write_text(json.dumps({"question": "2+2?", "answer": "4"}) + "\n", encoding="utf-8")
    plain = tmp_path / "notes.jsonl"
    plain.write_text(json.dumps({"text": "plain text to learn"}) + "\n", encoding="utf-8")
    files = [
        {"path": str(renamed), "format": "alpaca", "columns": {"instruction": "question", "output": "answer"}},
        {"path": str(plain)},
        {"path": DEMO_TRAIN, "max_samples": 1},
    ]
    loaded, _, _, _ = select_rows(data_of(files), seed=42)
    assert loaded.rows[0] == {"messages": [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]}
    assert loaded.rows[1] == {"text": "plain text to learn"}
    assert loaded.format == "alpaca+text+conversational"
    # An entry without a format of its own takes data.format: here alpaca, which the text file is not.
    with pytest.raises(DataError, match=r"^data\.path\.1: .*notes\.jsonl: data\.format is alpaca"):
        select_rows(data_of([files[0], {"path": str(plain)}], format="alpaca"), seed=42)


def test_a_bad_row_in_the_second_file_is_named_with_its_file_and_row(tmp_path: Path, shared_datasets: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    rows = [{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}] * 2
    rows.append({"messages": [{"role": "bot", "content": "hi"}]})
    bad.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    files = [{"path": str(shared_datasets / "alpaca_en_demo.json"), "max_samples": 5}, {"path": str(bad)}]
    with pytest.raises(DataError) as caught:
        inspect_dataset(data_of(files))
    message = str(caught.value)
    assert message.startswith(f"data.path.1: {bad}: 1 of 3 rows has problems")
    assert "row 3: messages[0].role 'bot'" in message
    with pytest.raises(DataError, match=r"^data\.path\.1: data file not found: missing\.jsonl"):
        inspect_dataset(data_of([{"path": DEMO_TRAIN}, {"path": "missing.jsonl"}]))


def test_an_entry_the_method_does_not_train_is_refused_by_name(shared_datasets: Path) -> None:
    kto = str(shared_datasets / "kto_en_demo.json")
    config = parse_config({"data": {"path": [{"path": DEMO_TRAIN}, {"path": kto}]}})
    with pytest.raises(ConfigError) as caught:
        inspect_run_data(config)
    assert caught.value.by_field() == {
        "data.path.1": f"{kto} is kto data (answers labelled desirable or not), and sft trains on "
        "alpaca, conversational, prompt_completion, text, tools, vision data; remove it from data.path, or set method "
        "to kto"
    }
    dpo = parse_config(
        {"method": "dpo", "data": {"path": [{"path": str(shared_datasets / "dpo_en_demo.json")}, {"path": DEMO_TRAIN}]}}
    )
    with pytest.raises(ConfigError) as caught:
        inspect_run_data(dpo)
    assert list(caught.value.by_field()) == ["data.path.1"] and "set method to sft" in str(caught.value)
    # Preference lists of one kind train; the pipeline alone refuses to mix kinds, naming both datasets.
    pairs = parse_config({"method": "dpo", "data": {"path": [{"path": str(shared_datasets / "dpo_en_demo.json")}] * 2}})
    assert inspect_run_data(pairs).format == "preference"
    with pytest.raises(DataError, match=r"data\.path\.1 \(.*kto_en_demo\.json\) is kto data, but data\.path\.0"):
        select_rows(data_of([{"path": str(shared_datasets / "dpo_en_demo.json")}, {"path": kto}]), seed=42)


def test_require_format_checks_each_part_of_a_mixed_format() -> None:
    sft: Method = METHODS["sft"]
    require_format(sft, "alpaca+conversational+text", "a + b")  # every part trains with sft
    with pytest.raises(ConfigError, match=r"^method: a \+ b is kto data"):
        require_format(sft, "alpaca+kto", "a + b")


def test_a_plain_string_path_behaves_as_before(shared_datasets: Path) -> None:
    data = data_of(DEMO_TRAIN, eval_size=0.1, max_samples=100)
    loaded, train_idx, eval_loaded, eval_idx = select_rows(data, seed=42)
    alone = load_rows(data)
    assert loaded.rows == alone.rows and loaded.source == alone.source and loaded.format == "conversational"
    assert loaded.origins is None and loaded.where(4) == (alone.source, 5)
    expected_train, expected_eval = split_indices(2000, 0.1, 42)
    assert (train_idx, eval_idx, eval_loaded) == (expected_train[:100], expected_eval, loaded)
    report = inspect_dataset(data)
    assert (report.format, report.source, report.num_rows, report.num_eval_rows, report.num_source_rows) == (
        "conversational",
        alone.source,
        100,
        200,
        2000,
    )
    assert not report.listed and [dataset.label for dataset in report.datasets] == ["data.path"]
    with pytest.raises(ConfigError) as caught:  # a plain path of the wrong kind: said at the method, as before
        inspect_run_data(parse_config({"method": "kto", "data": {"path": DEMO_TRAIN}}))
    assert list(caught.value.by_field()) == ["method"]


def test_prepare_and_preview_train_on_the_combined_rows(two_files: list[dict[str, Any]], tokenizer: Any) -> None:
    config = RunConfig(data=data_of(two_files), train={"max_length": 256})
    prepared = prepare_datasets(config, tokenizer)
    assert len(prepared.train) == prepared.report.num_rows and prepared.report.num_rows > 30
    assert [dataset.num_rows for dataset in prepared.report.datasets] == [20, 20]
    examples = preview_examples(config.model_copy(update={"data": data_of(two_files[::-1])}), tokenizer, n=2)
    # The first rows of the reversed list are the chat set's: named by their own file and row.
    assert [(Path(example.source).name, example.row) for example in examples] == [
        ("demo_sft_train.jsonl", 1),
        ("demo_sft_train.jsonl", 2),
    ]
