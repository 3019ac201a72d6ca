"""Trainer-ready datasets: the eval split, max_samples, the real demo files end to end, and the preview."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from data_helpers import chat, make_config

from engine.config import DataSection
from engine.data import (
    DataError,
    PreviewExample,
    inspect_dataset,
    prepare_datasets,
    preview_examples,
    split_indices,
    to_text,
)


def numbered(count: int) -> list[dict[str, Any]]:
    """Rows whose answer is their 1-based row number, so a split can be read back from the data."""
    return [chat(f"Question {number}", f"answer {number}") for number in range(1, count + 1)]


def answers(tokenizer: Any, dataset: Any) -> list[str]:
    """The loss-bearing text of every row of a prepared dataset."""
    return [tokenizer.decode([token for token in labels if token != -100]) for labels in dataset["labels"]]


def test_prepared_columns_and_report(tokenizer: Any, write_jsonl: Callable[..., Path]):
    prepared = prepare_datasets(make_config(write_jsonl(numbered(10))), tokenizer)
    assert prepared.train.column_names == ["input_ids", "labels"]
    assert prepared.eval is None
    assert answers(tokenizer, prepared.train)[:2] == ["answer 1<|im_end|>", "answer 2<|im_end|>"]
    report = prepared.report
    assert (report.format, report.num_rows, report.num_eval_rows, report.num_source_rows) == (
        "conversational",
        10,
        0,
        10,
    )
    assert report.num_tokens == sum(len(ids) for ids in prepared.train["input_ids"])
    assert report.num_loss_tokens == sum(sum(t != -100 for t in labels) for labels in prepared.train["labels"])
    # Labels are the input ids where the loss is, so the trainer can take them as they are.
    for ids, labels in zip(prepared.train["input_ids"], prepared.train["labels"], strict=True):
        assert all(label in (-100, token) for token, label in zip(ids, labels, strict=True))
    assert 0 < report.num_loss_tokens < report.num_tokens


def test_split_fraction_and_count():
    train, held_out = split_indices(50, 0.1, seed=1)
    assert (len(train), len(held_out)) == (45, 5)
    assert sorted(train + held_out) == list(range(50))
    assert len(split_indices(50, 7, seed=1)[1]) == 7
    assert split_indices(3, 0.01, seed=1)[1] != []  # a fraction holds out at least one row
    assert split_indices(5, 0, seed=1) == ([0, 1, 2, 3, 4], [])


def test_split_is_deterministic_per_seed():
    assert split_indices(100, 0.2, seed=42) == split_indices(100, 0.2, seed=42)
    assert split_indices(100, 0.2, seed=42)[1] != split_indices(100, 0.2, seed=43)[1]


def test_eval_size_that_leaves_no_training_rows(tokenizer: Any, write_jsonl: Callable[..., Path]):
    with pytest.raises(DataError, match=r"data.eval_size 5 holds out 5 of 5 rows and leaves none to train on"):
        prepare_datasets(make_config(write_jsonl(numbered(5)), eval_size=5), tokenizer)


def test_held_out_rows_are_disjoint_and_reproducible(tokenizer: Any, write_jsonl: Callable[..., Path]):
    config = make_config(write_jsonl(numbered(20)), eval_size=0.25, seed=7)
    first, second = prepare_datasets(config, tokenizer), prepare_datasets(config, tokenizer)
    train, held_out = answers(tokenizer, first.train), answers(tokenizer, first.eval)
    assert (len(train), len(held_out)) == (15, 5)
    assert not set(train) & set(held_out)
    assert (train, held_out) == (answers(tokenizer, second.train), answers(tokenizer, second.eval))
    assert first.report.num_eval_rows == 5


def test_eval_file_wins_over_eval_size(tokenizer: Any, write_jsonl: Callable[..., Path]):
    train_path = write_jsonl(numbered(6))
    eval_path = write_jsonl([{"instruction": "Eval?", "input": "", "output": "yes"}], name="eval.jsonl")
    prepared = prepare_datasets(make_config(train_path, eval_path=str(eval_path), eval_size=0.5), tokenizer)
    assert len(prepared.train) == 6
    assert answers(tokenizer, prepared.eval) == ["yes<|im_end|>"]
    assert (prepared.report.num_eval_rows, prepared.report.eval_source) == (1, str(eval_path))


def test_max_samples_caps_training_rows_after_the_split(tokenizer: Any, write_jsonl: Callable[..., Path]):
    config = make_config(write_jsonl(numbered(20)), eval_size=4, max_samples=5, seed=3)
    prepared = prepare_datasets(config, tokenizer)
    assert (len(prepared.train), len(prepared.eval)) == (5, 4)
    assert not set(answers(tokenizer, prepared.train)) & set(answers(tokenizer, prepared.eval))
    report = inspect_dataset(config.data, tokenizer, seed=3)
    assert (report.num_rows, report.num_eval_rows) == (5, 4)


@pytest.mark.parametrize(
    ("name", "fmt", "rows"),
    [
        ("alpaca_en_demo.json", "alpaca", 999),
        ("alpaca_zh_demo.json", "alpaca", 1000),
        ("c4_demo.jsonl", "text", 300),
    ],
)
def test_real_files_tokenize(shared_datasets: Path, tokenizer: Any, name: str, fmt: str, rows: int):
    prepared = prepare_datasets(make_config(shared_datasets / name, max_length=256), tokenizer)
    report = prepared.report
    assert (report.format, report.num_source_rows) == (fmt, rows)
    assert report.num_rows + report.num_dropped == rows == len(prepared.train) + report.num_dropped
    assert max(len(ids) for ids in prepared.train["input_ids"]) == 256
    assert (
        report.warnings[0]
        == f"{report.num_too_long} of {rows} rows are longer than max_length 256 tokens and will be truncated"
    )
    if fmt == "text":
        assert report.num_loss_tokens == report.num_tokens


def test_identity_file_with_placeholders_tokenizes(shared_datasets: Path, tokenizer: Any):
    config = make_config(shared_datasets / "identity.json", placeholders={"name": "Ada", "author": "Lab X"})
    prepared = prepare_datasets(config, tokenizer)
    assert (len(prepared.train), prepared.report.warnings) == (91, [])
    assert answers(tokenizer, prepared.train)[0] == (
        "Hello! I am Ada, an AI assistant developed by Lab X. How can I assist you today?<|im_end|>"
    )


def test_preview_segments(tokenizer: Any, write_jsonl: Callable[..., Path]):
    examples = preview_examples(make_config(write_jsonl(numbered(5))), tokenizer, n=2)
    assert [example.row for example in examples] == [1, 2]
    first = examples[0]
    assert first.segments == [
        ("<|im_start|>user\nQuestion 1<|im_end|>\n<|im_start|>assistant\n", False),
        ("answer 1<|im_end|>", True),
        ("\n", False),
    ]
    assert to_text(first) == "<|im_start|>user\nQuestion 1<|im_end|>\n<|im_start|>assistant\n[[answer 1<|im_end|>]]\n"
    assert to_text(first, marker="<b>", end="</b>").count("<b>answer 1<|im_end|></b>") == 1
    ids = tokenizer(to_text(first, marker="", end=""), add_special_tokens=False)["input_ids"]
    assert first.num_tokens == len(ids) and not first.truncated
    assert first.num_loss_tokens == len(tokenizer("answer 1<|im_end|>", add_special_tokens=False)["input_ids"])


def test_preview_follows_the_split_and_skips_rows_without_loss(tokenizer: Any, write_jsonl: Callable[..., Path]):
    rows = [chat("long " * 100, "lost"), *numbered(6)]
    config = make_config(write_jsonl(rows), max_length=24, eval_size=2, seed=5)
    examples = preview_examples(config, tokenizer, n=3)
    held_out = {index + 1 for index in split_indices(7, 2, seed=5)[1]}
    assert len(examples) == 3
    assert all(example.row != 1 and example.row not in held_out for example in examples)
    assert examples == sorted(examples, key=lambda example: example.row)


def test_preview_marks_truncation(tokenizer: Any, write_jsonl: Callable[..., Path]):
    [example] = preview_examples(make_config(write_jsonl([chat("hi", "word " * 50)]), max_length=20), tokenizer, n=1)
    assert isinstance(example, PreviewExample)
    assert (example.truncated, example.num_tokens) == (True, 20)
    assert example.segments[-1][1] is True


def test_inspect_reports_the_source_and_columns(tokenizer: Any, write_jsonl: Callable[..., Path]):
    path = write_jsonl([{"instruction": "i", "input": "", "output": "o", "extra": 1}])
    report = inspect_dataset(DataSection(path=str(path)), tokenizer)
    assert (report.source, report.columns) == (str(path), ["instruction", "input", "output", "extra"])
    assert report.num_loss_tokens == len(tokenizer("o<|im_end|>", add_special_tokens=False)["input_ids"])
