"""Format detection, overrides, column mapping, normalisation to messages / text, refusals, placeholders."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from data_helpers import make_config

from engine.config import DataSection
from engine.data import DataError, inspect_dataset, load_rows


def section(path: Path, **fields) -> DataSection:
    return DataSection(path=str(path), **fields)


def refusal(path: Path, **fields) -> str:
    with pytest.raises(DataError) as caught:
        load_rows(section(path, **fields))
    return str(caught.value)


@pytest.mark.parametrize(
    ("name", "fmt", "rows"),
    [
        ("alpaca_en_demo.json", "alpaca", 999),
        ("alpaca_zh_demo.json", "alpaca", 1000),
        ("identity.json", "alpaca", 91),
    ],
)
def test_real_alpaca_files(shared_datasets: Path, name: str, fmt: str, rows: int):
    loaded = load_rows(section(shared_datasets / name))
    assert (loaded.format, len(loaded.rows), loaded.columns) == (
        fmt,
        rows,
        ["instruction", "input", "output"],
    )
    first = loaded.rows[0]["messages"]
    assert [message["role"] for message in first] == ["user", "assistant"]


def test_real_text_file(shared_datasets: Path):
    loaded = load_rows(section(shared_datasets / "c4_demo.jsonl"))
    assert (loaded.format, len(loaded.rows)) == ("text", 300)
    assert loaded.rows[0]["text"].startswith("Don\u2019t think you need all the bells and whistles?")


def test_real_preference_file_becomes_trl_conversational_pairs(shared_datasets: Path):
    loaded = load_rows(section(shared_datasets / "dpo_en_demo.json"))
    assert (loaded.format, len(loaded.rows), loaded.columns) == (
        "preference",
        300,
        ["conversations", "chosen", "rejected"],
    )
    first = loaded.rows[0]
    assert sorted(first) == ["chosen", "prompt", "rejected"]
    assert [turn["role"] for turn in first["prompt"]] == ["user"]
    assert [turn["role"] for turn in first["chosen"]] == [turn["role"] for turn in first["rejected"]] == ["assistant"]
    assert first["chosen"] != first["rejected"]


def test_real_tool_calling_file_is_its_own_format_and_an_override_cannot_hide_it(shared_datasets: Path):
    loaded = load_rows(section(shared_datasets / "glaive_toolcall_en_demo.json"))
    assert (loaded.format, len(loaded.rows)) == ("tools", 300)
    assert loaded.rows[0]["messages"][3]["tool_calls"][0]["function"]["name"] == "search_recipes"
    # Read as plain chat, the calls would be trained as text and the tools dropped.
    message = refusal(shared_datasets / "glaive_toolcall_en_demo.json", format="conversational")
    assert "glaive_toolcall_en_demo.json is a tool-calling dataset" in message
    assert "data.format is conversational" in message and "set data.format to tools (or auto)" in message


def test_real_kto_file_becomes_unpaired_rows_and_an_override_cannot_hide_it(shared_datasets: Path):
    loaded = load_rows(section(shared_datasets / "kto_en_demo.json"))
    assert (loaded.format, len(loaded.rows)) == ("kto", 300)
    labels = {row["label"] for row in loaded.rows}
    assert labels == {True, False}
    assert all(row["completion"][-1]["role"] == "assistant" and row["prompt"] for row in loaded.rows)
    # Read as plain chat, the undesirable answers would be learnt.
    message = refusal(shared_datasets / "kto_en_demo.json", format="conversational")
    assert "kto_en_demo.json is a kto dataset" in message and "the undesirable answers would be learnt" in message


def test_trl_style_preference_rows_and_the_override(write_jsonl: Callable[..., Path]):
    prompt = [{"role": "user", "content": "q"}]
    path = write_jsonl([{"prompt": prompt, "chosen": [{"role": "assistant", "content": "a"}], "rejected": []}])
    assert "row 1: rejected is empty" in refusal(path)
    text_file = write_jsonl([{"text": "hello"}], name="text.jsonl")
    assert "data.format is preference, but no row has the column(s) chosen, rejected" in refusal(
        text_file, format="preference"
    )


def test_alpaca_normalisation(write_jsonl: Callable[..., Path]):
    path = write_jsonl(
        [
            {"instruction": "Add the numbers.", "input": "1 + 1", "output": "2", "system": "Be brief."},
            {"instruction": "Say hi", "input": "", "output": "Hi!", "history": [["Who are you?", "A bot."]]},
        ]
    )
    loaded = load_rows(section(path))
    assert loaded.format == "alpaca"
    assert loaded.rows[0] == {
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Add the numbers.\n\n1 + 1"},
            {"role": "assistant", "content": "2"},
        ]
    }
    assert [m["content"] for m in loaded.rows[1]["messages"]] == ["Who are you?", "A bot.", "Say hi", "Hi!"]


def test_messages_and_sharegpt_conversations(write_jsonl: Callable[..., Path]):
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    assert load_rows(section(write_jsonl([{"messages": messages}]))).rows == [{"messages": messages}]
    sharegpt = [
        {"from": "system", "value": "sys"},
        {"from": "human", "value": "hi"},
        {"from": "gpt", "value": "hello"},
    ]
    loaded = load_rows(section(write_jsonl([{"conversations": sharegpt}], name="sharegpt.jsonl")))
    assert loaded.format == "conversational"
    assert loaded.rows[0]["messages"] == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
    ]


def test_system_column_is_prepended_to_conversations(write_jsonl: Callable[..., Path]):
    turns = [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello"}]
    loaded = load_rows(section(write_jsonl([{"conversations": turns, "system": "Be kind."}])))
    assert loaded.rows[0]["messages"][0] == {"role": "system", "content": "Be kind."}


def test_prompt_completion_strings_and_message_lists(write_jsonl: Callable[..., Path]):
    rows = [
        {"prompt": "The sky is", "completion": " blue."},
        {
            "prompt": [
                {"role": "user", "content": "a"},
                {"role": "assistant", "content": "b"},
                {"role": "user", "content": "c"},
            ],
            "completion": [{"role": "assistant", "content": "d"}],
        },
    ]
    loaded = load_rows(section(write_jsonl(rows)))
    assert loaded.format == "prompt_completion"
    assert loaded.rows[0] == {
        "messages": [{"role": "user", "content": "The sky is"}, {"role": "assistant", "content": " blue."}]
    }
    # The assistant turn inside the prompt is context: prompt_turns marks where the answer starts.
    assert loaded.rows[1]["prompt_turns"] == 3
    assert [m["content"] for m in loaded.rows[1]["messages"]] == ["a", "b", "c", "d"]


def test_txt_file_is_text(tmp_path: Path):
    path = tmp_path / "corpus.txt"
    path.write_text("one\ntwo\n", encoding="utf-8")
    loaded = load_rows(section(path))
    assert (loaded.format, loaded.rows) == ("text", [{"text": "one"}, {"text": "two"}])


def test_column_mapping(write_jsonl: Callable[..., Path]):
    path = write_jsonl([{"question": "2+2?", "answer": "4", "context": ""}])
    loaded = load_rows(section(path, columns={"instruction": "question", "output": "answer", "input": "context"}))
    assert loaded.format == "alpaca"
    assert loaded.rows[0]["messages"][1] == {"role": "assistant", "content": "4"}
    chats = write_jsonl(
        [{"dialog": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]}], "c.jsonl"
    )
    assert load_rows(section(chats, columns={"messages": "dialog"})).format == "conversational"
    body = write_jsonl([{"body": "some text"}], name="body.jsonl")
    assert load_rows(section(body, columns={"text": "body"})).rows == [{"text": "some text"}]


def test_format_override_wins_over_detection(write_jsonl: Callable[..., Path]):
    path = write_jsonl([{"text": "plain", "instruction": "i", "output": "o"}])
    assert load_rows(section(path)).format == "alpaca"
    assert load_rows(section(path, format="text")).rows == [{"text": "plain"}]


def test_override_with_missing_columns_says_which(write_jsonl: Callable[..., Path]):
    path = write_jsonl([{"text": "plain"}])
    message = refusal(path, format="alpaca")
    assert message == (
        f"{path}: data.format is alpaca, but no row has the column(s) instruction, output "
        "(the columns are text); set data.columns to map them, or data.format to auto"
    )


def test_undetectable_columns(write_jsonl: Callable[..., Path]):
    path = write_jsonl([{"question": "q", "reply": "r"}])
    message = refusal(path)
    assert message.startswith(f"{path}: cannot tell the format from the columns question, reply; expected")
    assert "set data.columns to map yours" in message


def test_placeholders_are_filled(shared_datasets: Path):
    loaded = load_rows(section(shared_datasets / "identity.json", placeholders={"name": "Ada", "author": "Lab X"}))
    assert loaded.warnings == []
    assert loaded.rows[0]["messages"][1]["content"] == (
        "Hello! I am Ada, an AI assistant developed by Lab X. How can I assist you today?"
    )
    assert not any("{{" in m["content"] for row in loaded.rows for m in row["messages"])


def test_unfilled_placeholders_warn_and_stay(shared_datasets: Path):
    loaded = load_rows(section(shared_datasets / "identity.json", placeholders={"name": "Ada"}))
    assert loaded.warnings == [
        "60 rows contain placeholders with no value ({{author}}); they are trained as written. "
        "Set data.placeholders (author: ...) to fill them in"
    ]
    assert "developed by {{author}}" in loaded.rows[0]["messages"][1]["content"]
    report = inspect_dataset(section(shared_datasets / "identity.json"))
    assert report.warnings[0].startswith("85 rows contain placeholders with no value ({{author}}, {{name}})")


def test_the_preview_of_paired_rows_names_each_answer(write_jsonl: Callable[..., Path], tokenizer: Any):
    """A preference row previews as its chosen and rejected sequences, a kto row as its labelled answer; n counts
    rows, not sequences."""
    from engine.data.preview import check_tokens, preview_examples

    pairs = [{"prompt": f"question {i}", "chosen": f"good {i}", "rejected": f"bad {i}"} for i in range(5)]
    config = make_config(write_jsonl(pairs, "pairs.jsonl"), eval_size=0)
    examples = check_tokens(config, tokenizer, 2).examples
    assert [(example.row, example.side) for example in examples] == [
        (1, "chosen"),
        (1, "rejected"),
        (2, "chosen"),
        (2, "rejected"),
    ]
    chosen, rejected = ("".join(text for text, loss in example.segments if loss) for example in examples[:2])
    assert "good 0" in chosen and "bad 0" in rejected and "question 0" not in chosen  # the prompt carries no loss
    assert [(e.row, e.side) for e in preview_examples(config, tokenizer, 1)] == [(1, "chosen"), (1, "rejected")]

    labelled = [{"prompt": f"q {i}", "completion": f"a {i}", "label": i % 2 == 0} for i in range(4)]
    kto = make_config(write_jsonl(labelled, "kto.jsonl"), eval_size=0)
    sides = [(example.row, example.side) for example in check_tokens(kto, tokenizer, 3).examples]
    assert sides == [(1, "desirable"), (2, "undesirable"), (3, "desirable")]
