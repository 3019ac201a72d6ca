"""Every bad row is named by its 1-based number and what is wrong; long rows are a warning, not an error."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from data_helpers import chat

from engine.config import DataSection
from engine.data import DataError, inspect_dataset, load_rows


def problems(path: Path, **fields: Any) -> list[str]:
    """The listed problems of the DataError for ``path`` (the lines after the summary)."""
    with pytest.raises(DataError) as caught:
        load_rows(DataSection(path=str(path), **fields))
    return [line.strip() for line in str(caught.value).splitlines()[1:]]


def alpaca(output: Any = "ok", **extra: Any) -> dict[str, Any]:
    return {"instruction": "Do it", "input": "", "output": output, **extra}


def test_empty_output_is_named_by_row_number(write_jsonl: Callable[..., Path]):
    rows = [alpaca() for _ in range(20)]
    rows[16] = alpaca("  ")
    path = write_jsonl(rows)
    with pytest.raises(DataError) as caught:
        load_rows(DataSection(path=str(path)))
    assert str(caught.value) == f"{path}: 1 of 20 rows has problems (alpaca format):\n  row 17: output is empty"


def test_alpaca_missing_column_and_wrong_types(write_jsonl: Callable[..., Path]):
    rows = [
        alpaca(),
        {"instruction": "No answer", "input": ""},
        alpaca(42),
        alpaca(system=["not", "text"]),
        {"instruction": "", "input": "", "output": "x"},
        alpaca(history=[["only one"]]),
    ]
    assert problems(write_jsonl(rows)) == [
        "row 2: missing column 'output'",
        "row 3: output is a number, not a string",
        "row 4: system is a list, not a string",
        "row 5: instruction is empty",
        "row 6: history must be a list of [instruction, answer] pairs of strings",
    ]


def test_conversation_problems(write_jsonl: Callable[..., Path]):
    user = {"role": "user", "content": "hi"}
    rows = [
        chat("hi", "hello"),
        {"messages": [user, {"role": "assistant", "content": "a"}, {"role": "user", "content": "b"}]},
        {"messages": [user, {"role": "bot", "content": "hello"}]},
        {"messages": [user, {"role": "assistant", "content": None}]},
        {"messages": [user]},
        {"messages": []},
        {"messages": "hi"},
        {"messages": [user, {"role": "assistant", "content": ""}]},
        {"messages": [user, {"role": "system", "content": "late"}, {"role": "assistant", "content": "x"}]},
        {"messages": [user, {"content": "no role"}]},
    ]
    assert problems(write_jsonl(rows)) == [
        "row 2: messages ends with a user turn; it must end with the assistant's answer",
        "row 3: messages[1].role 'bot' is not one of system, user, assistant",
        "row 4: messages[1].content is null, not a string",
        "row 5: messages has no assistant turn; there is nothing to learn",
        "row 6: messages is empty",
        "row 7: messages is a string, not a list of turns",
        "row 8: messages[1] (assistant) is empty",
        "row 9: messages[1] is a system turn; only the first turn may be one",
        "row 10: messages[1] has no role",
    ]


def test_sharegpt_unknown_speaker(write_jsonl: Callable[..., Path]):
    rows = [{"conversations": [{"from": "human", "value": "hi"}, {"from": "bot", "value": "yo"}]}]
    assert problems(write_jsonl(rows)) == ["row 1: conversations[1].from 'bot' is not one of human, gpt, system"]


def test_prompt_completion_problems(write_jsonl: Callable[..., Path]):
    rows = [
        {"prompt": "p", "completion": "c"},
        {"prompt": "p", "completion": ""},
        {"prompt": 3, "completion": "c"},
        {"prompt": "p", "completion": [{"role": "user", "content": "not an answer"}]},
    ]
    assert problems(write_jsonl(rows)) == [
        "row 2: completion is empty",
        "row 3: prompt is a number, not a string",
        "row 4: completion has no assistant turn",
    ]


def test_prompt_only_problems_are_named_by_row(write_jsonl: Callable[..., Path]):
    user = {"role": "user", "content": "2+2?"}
    rows = [
        {"prompt": "What is 2+2?", "solution": "4"},
        {"prompt": "   ", "solution": "1"},
        {"prompt": None},
        {"prompt": 7},
        {"prompt": []},
        {"prompt": [{"role": "system", "content": "Be brief."}]},
        {"prompt": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": " "}]},
        {"prompt": [user, {"role": "bot", "content": "x"}]},
        {"prompt": [{"from": "human", "value": 3}]},
        {"prompt": "fine", "system": ["not", "text"]},
        {"prompt": [{"from": "gpt", "value": "an answer is not a prompt"}]},
    ]
    assert problems(write_jsonl(rows)) == [
        "row 2: prompt is empty",
        "row 3: prompt is null, not a string",
        "row 4: prompt is a number, not a string",
        "row 5: prompt is empty",
        "row 6: prompt has no user turn; there is nothing to answer",
        "row 7: prompt[1] (user) is empty",
        "row 8: prompt[1].role 'bot' is not one of system, user, assistant",
        "row 9: prompt[0].value is a number, not a string",
        "row 10: system is a list, not a string",
        "row 11: prompt has no user turn; there is nothing to answer",
    ]


def test_a_prompt_only_row_among_prompt_completion_rows_is_named(write_jsonl: Callable[..., Path]):
    rows = [{"prompt": "p", "completion": "c"}, {"prompt": "p", "completion": "c"}, {"prompt": "alone"}]
    assert problems(write_jsonl(rows)) == [
        "row 3: is a prompt row (prompt), but the dataset is prompt_completion; formats are mixed"
    ]


def test_text_problems(write_jsonl: Callable[..., Path]):
    rows = [{"text": "fine"}, {"text": ""}, {"text": None}]
    assert problems(write_jsonl(rows)) == ["row 2: text is empty", "row 3: text is null, not a string"]


def test_mixed_formats_are_named(write_jsonl: Callable[..., Path]):
    rows = [alpaca(), alpaca(), chat("q", "a"), {"something": "else"}]
    assert problems(write_jsonl(rows)) == [
        "row 3: is a conversational row (messages), but the dataset is alpaca; formats are mixed",
        "row 4: missing column 'instruction'",
        "row 4: missing column 'output'",
    ]


def test_at_most_ten_problems_are_listed(write_jsonl: Callable[..., Path]):
    path = write_jsonl([alpaca("") for _ in range(25)])
    with pytest.raises(DataError) as caught:
        load_rows(DataSection(path=str(path)))
    lines = str(caught.value).splitlines()
    assert lines[0] == f"{path}: 25 of 25 rows have problems (alpaca format):"
    assert lines[1:11] == [f"  row {number}: output is empty" for number in range(1, 11)]
    assert lines[11:] == ["  ... and 15 more"]


def test_csv_rows_are_numbered_as_records(tmp_path: Path):
    path = tmp_path / "data.csv"
    path.write_text('instruction,input,output\n"multi\nline",,fine\nsecond,,\n', encoding="utf-8")
    assert problems(path) == ["row 2: output is empty"]


def test_too_long_rows_are_a_warning_with_the_count(write_jsonl: Callable[..., Path], tokenizer: Any):
    rows = [chat("hi", "short") for _ in range(8)] + [chat("hi", "word " * 200) for _ in range(2)]
    report = inspect_dataset(DataSection(path=str(write_jsonl(rows))), tokenizer, max_length=64)
    assert report.num_too_long == 2
    assert report.warnings == ["2 of 10 rows are longer than max_length 64 tokens and will be truncated"]
    assert report.num_rows == 10


def test_inspect_without_a_tokenizer_counts_rows_only(write_jsonl: Callable[..., Path]):
    report = inspect_dataset(DataSection(path=str(write_jsonl([chat("q", "a")] * 10)), eval_size=0.2))
    assert (report.format, report.num_rows, report.num_eval_rows, report.columns) == (
        "conversational",
        8,
        2,
        ["messages"],
    )
    assert (report.num_tokens, report.num_loss_tokens, report.warnings) == (None, None, [])
