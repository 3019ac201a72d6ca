"""Prompt-only data (format ``prompt``) and the extra columns GRPO's reward functions read: detection, canonical
rows, extras kept beside them (through a list of datasets too), the dataset check and preview of rows without an
answer, and the prompt rows and dataset GRPO trains on (engine.data.prompts)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from data_helpers import CHATML_TEMPLATE, chat, make_config

from engine.config import ConfigError, DataSection, parse_config
from engine.data import DataError, inspect_dataset, load_rows
from engine.data import pipeline as pipeline_module
from engine.data.formats import is_prompt_row
from engine.data.preview import check_tokens, preview_examples, to_text
from engine.data.prompts import first_prompt_rows, prepare_prompt_datasets, prompt_row, uniform_columns
from engine.data.tokenize import render_plan
from engine.store.paths import PROJECT_ROOT
from engine.training.method_data import inspect_run_data

DEMO_TRAIN = PROJECT_ROOT / "assets" / "datasets" / "demo_sft_train.jsonl"
USER = {"role": "user", "content": "What is 3+3?"}


def section(path: Path, **fields: Any) -> DataSection:
    return DataSection(path=str(path), **fields)


def grpo(path: Path | list[dict[str, Any]], **data: Any) -> Any:
    """A grpo run on ``path`` with an exact_match reward on ``solution``."""
    return parse_config(
        {
            "method": "grpo",
            "data": {"path": path if isinstance(path, list) else str(path), **data},
            "grpo": {"rewards": [{"kind": "exact_match", "column": "solution"}]},
        }
    )


# --- the format ---


def test_prompt_only_rows_become_their_prompt_turns_and_keep_their_other_columns(write_jsonl: Callable[..., Path]):
    few_shot = [
        {"role": "system", "content": "Own system"},
        {"role": "user", "content": "1+1?"},
        {"role": "assistant", "content": "2"},
        USER,
    ]
    rows = [
        {"prompt": "What is 2+2?", "solution": "4", "system": "Be brief."},
        {"prompt": [{"from": "human", "value": "Say hi"}], "difficulty": 2},
        {"prompt": few_shot, "system": "ignored: the prompt has its own"},
    ]
    loaded = load_rows(section(write_jsonl(rows)))
    assert loaded.format == "prompt"
    assert loaded.rows == [
        {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2+2?"}]},
        {"messages": [{"role": "user", "content": "Say hi"}]},
        # The assistant turn is few-shot context: prompt_turns covers the whole prompt, so nothing reads as an answer.
        {"messages": few_shot, "prompt_turns": 4},
    ]
    assert all(is_prompt_row(row) for row in loaded.rows)
    assert loaded.extras == [{"solution": "4"}, {"difficulty": 2}, {}]


def test_a_completion_makes_a_pair_and_the_override_and_mapping_apply(write_jsonl: Callable[..., Path]):
    pairs = write_jsonl([{"prompt": "The sky is", "completion": " blue."}], "pairs.jsonl")
    assert load_rows(section(pairs)).format == "prompt_completion"
    # Forced to prompt, the completion is one more column for the rewards.
    forced = load_rows(section(pairs, format="prompt"))
    assert (forced.rows, forced.extras) == (
        [{"messages": [{"role": "user", "content": "The sky is"}]}],
        [{"completion": " blue."}],
    )
    questions = write_jsonl([{"question": "2+2?", "answer": "4"}], "questions.jsonl")
    mapped = load_rows(section(questions, columns={"prompt": "question"}))
    assert (mapped.format, mapped.rows, mapped.extras) == (
        "prompt",
        [{"messages": [{"role": "user", "content": "2+2?"}]}],
        [{"answer": "4"}],
    )
    with pytest.raises(DataError, match="data.format is prompt, but no row has the column.s. prompt"):
        load_rows(section(questions, format="prompt"))


@pytest.mark.parametrize(
    "name",
    [
        "alpaca_en_demo.json",
        "identity.json",
        "dpo_en_demo.json",
        "kto_en_demo.json",
        "glaive_toolcall_en_demo.json",
        "c4_demo.jsonl",
    ],
)
def test_every_column_of_the_real_files_is_read_by_their_format(shared_datasets: Path, name: str):
    assert load_rows(section(shared_datasets / name)).extras is None


def test_sft_refuses_prompts_only_and_names_grpo(write_jsonl: Callable[..., Path]):
    path = write_jsonl([{"prompt": "2+2?"}])
    with pytest.raises(ConfigError) as refused:
        inspect_run_data(parse_config({"method": "sft", "data": {"path": str(path)}}))
    assert str(refused.value) == (
        f"method: {path} is prompts only (no answers to learn from), and sft trains on "
        "alpaca, conversational, prompt_completion, text, tools, vision data; set method to grpo or rloo or distill"
    )
    assert inspect_run_data(grpo(path)).format == "prompt"


# --- the check and the preview of rows without an answer ---


def test_the_check_and_preview_show_the_prompt_the_model_answers(write_jsonl: Callable[..., Path], tokenizer: Any):
    rows = [{"prompt": f"question {n}"} for n in range(3)] + [{"prompt": "long " * 200}]
    config = make_config(write_jsonl(rows), max_length=32, eval_size=0)
    checked = check_tokens(config, tokenizer, 2)
    assert [to_text(example) for example in checked.examples] == [
        f"<|im_start|>user\nquestion {n}<|im_end|>\n<|im_start|>assistant\n" for n in range(2)
    ]
    assert all(example.num_loss_tokens == 0 for example in checked.examples)
    report = checked.report
    # The long prompt is dropped, as GRPO drops it; the others count their tokens and no loss.
    assert (report.num_rows, report.num_dropped, report.num_too_long, report.num_loss_tokens) == (3, 1, 0, 0)
    assert report.num_tokens == sum(checked.lengths) and len(checked.lengths) == 3
    assert report.warnings == ["1 of 4 prompts are longer than max_length 32 tokens and are dropped"]
    assert [example.row for example in preview_examples(config, tokenizer, 3)] == [1, 2, 3]


def test_a_configured_template_is_probed_with_the_generation_prompt(
    write_jsonl: Callable[..., Path], tokenizer: Any, monkeypatch: pytest.MonkeyPatch
):
    """The template guard renders in a child what is rendered here: for a prompt, the render with the generation
    prompt (engine.data.template_guard); its plan must hold that render."""
    probed: list[Any] = []
    monkeypatch.setattr(
        pipeline_module, "probe_template", lambda template, conversations, *rest: probed.extend(conversations)
    )
    few_shot = [USER, {"role": "assistant", "content": "6"}, USER]
    config = make_config(write_jsonl([{"prompt": "2+2?"}, {"prompt": few_shot}]), chat_template=CHATML_TEMPLATE)
    inspect_dataset(config.data, tokenizer)
    assert [(len(c.messages), c.prompt_turns) for c in probed] == [(2, 0), (4, 3)]  # each prompt + an empty answer
    assert (1, True) in render_plan(probed[0].messages, probed[0].prompt_turns)
    assert (3, True) in render_plan(probed[1].messages, probed[1].prompt_turns)


# --- prompt rows for GRPO ---


def test_the_data_s_own_answer_wins_over_the_final_turn_and_extras_never_replace_the_prompt():
    worked = {"messages": [USER, {"role": "assistant", "content": "3 plus 3 makes 6"}]}
    assert prompt_row(worked, 4, {"answer": "6", "prompt": "other", "ts_row": 99, "level": 2}) == {
        "prompt": [USER],
        "ts_row": 4,
        "answer": "6",
        "level": 2,
    }
    # Where the row's own answer is missing (None), the final turn stays the reference.
    assert prompt_row(worked, 4, {"answer": None})["answer"] == "3 plus 3 makes 6"
    # A prompt alone has no reference unless the data gives one.
    assert prompt_row({"messages": [USER]}, 1) == {"prompt": [USER], "ts_row": 1}
    few_shot = {"messages": [USER, {"role": "assistant", "content": "6"}, USER], "prompt_turns": 3}
    assert prompt_row(few_shot, 2, {"solution": 6}) == {"prompt": few_shot["messages"], "ts_row": 2, "solution": 6}


def test_grpo_datasets_carry_every_column_with_none_where_a_row_lacks_it(
    write_jsonl: Callable[..., Path], tokenizer: Any
):
    rows = [
        {"prompt": "What is 2+2?", "solution": "4", "level": 1},
        {"prompt": [{"from": "human", "value": "What is 3+3?"}], "solution": 6, "level": 2},
        {"prompt": "Say hi", "level": 3},
    ]
    prepared = prepare_prompt_datasets(grpo(write_jsonl(rows)), tokenizer)
    path = prepared.report.source
    assert prepared.train.to_list() == [
        {"prompt": [{"role": "user", "content": "What is 2+2?"}], "ts_row": 1, "solution": "4", "level": 1},
        {"prompt": [{"role": "user", "content": "What is 3+3?"}], "ts_row": 2, "solution": "6", "level": 2},
        {"prompt": [{"role": "user", "content": "Say hi"}], "ts_row": 3, "solution": None, "level": 3},
    ]
    assert prepared.report.columns == ["prompt", "ts_row", "solution", "level"]
    assert prepared.report.warnings == [
        f"the column 'solution' mixes strings and numbers (row 1 of {path}: '4', row 2 of {path}: 6); the reward "
        "functions get them all as strings",
        f"1 of 3 prompts have no 'solution' (the first: row 3 of {path}); reward functions get None for it there, "
        "which the built-in rewards read as not applicable",
    ]


def test_a_column_mixing_lists_and_text_or_named_as_trl_s_arguments_is_refused(
    write_jsonl: Callable[..., Path], tokenizer: Any
):
    mixed = write_jsonl([{"prompt": "a", "tags": ["x"]}, {"prompt": "b", "tags": "x"}], "mixed.jsonl")
    with pytest.raises(DataError) as refused:
        prepare_prompt_datasets(grpo(mixed), tokenizer)
    assert str(refused.value) == (
        f"the column 'tags' mixes lists and strings (row 1 of {mixed}: ['x'], row 2 of {mixed}: 'x'); "
        "give it values of one type"
    )
    with pytest.raises(DataError, match="differ in shape from row to row"):  # within lists: found by the dataset
        prepare_prompt_datasets(grpo(write_jsonl([{"prompt": "a", "t": [1]}, {"prompt": "b", "t": ["x"]}])), tokenizer)
    named = write_jsonl([{"prompt": "a", "completions": 3}], "named.jsonl")
    with pytest.raises(DataError) as refused:
        first_prompt_rows(grpo(named))
    assert str(refused.value) == (
        f"{named}: the column 'completions' cannot reach the reward functions: TRL uses that name itself (it passes "
        "an argument of that name to the reward functions); rename the column"
    )


def test_uniform_columns_keeps_one_type_columns_as_they_are():
    rows = [{"prompt": [USER], "n": 1, "xs": [1]}, {"prompt": [USER], "n": 2.5, "xs": None}, {"prompt": [USER]}]
    assert uniform_columns(rows, [("f", 1), ("f", 2), ("f", 3)]) == []
    assert rows[1] == {"prompt": [USER], "n": 2.5, "xs": None}


def test_first_prompt_rows_add_the_first_row_with_and_without_each_column(write_jsonl: Callable[..., Path]):
    rows = [{"prompt": f"q{n}"} for n in range(1, 8)]
    rows[4]["solution"] = "5"
    rows[5]["solution"] = "6"
    picked = first_prompt_rows(grpo(write_jsonl(rows)))
    assert [(row["ts_row"], row.get("solution")) for row in picked] == [(1, None), (2, None), (5, "5")]


def test_a_list_of_datasets_carries_each_row_s_columns(write_jsonl: Callable[..., Path], tokenizer: Any):
    prompts = write_jsonl([{"prompt": "What is 2+2?", "solution": "4"}, {"prompt": "What is 3+3?", "solution": "6"}])
    config = grpo([{"path": str(prompts)}, {"path": str(DEMO_TRAIN), "max_samples": 2}])
    loaded = inspect_run_data(config)
    assert loaded.format == "prompt+conversational"
    train = prepare_prompt_datasets(config, tokenizer).train.to_list()
    assert [(row["ts_row"], row["solution"], row["answer"]) for row in train] == [
        (1, "4", None),
        (2, "6", None),
        (1, None, "February 25"),
        (2, None, "December 13"),
    ]
    assert train[2]["prompt"] == chat("Read this date as month and day: 1970-02-25", "")["messages"][:1]
