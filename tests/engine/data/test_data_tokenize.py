"""Loss masks: exactly the assistant answers and the token that ends each of them, for any chat template."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from data_helpers import DEMO_MODEL, chat, make_config

from engine.data import DEFAULT_CHAT_TEMPLATE, DataError, prepare_datasets, resolve_chat_template
from engine.data.tokenize import TokenizedRow, tokenize_row

CONVERSATION = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "What is the capital of France?"},
    {"role": "assistant", "content": "Paris."},
    {"role": "user", "content": "And of Italy? 你好"},
    {"role": "assistant", "content": "Rome, of course!"},
]


def tokenized(tokenizer: Any, row: dict[str, Any], max_length: int = 1024, **kwargs: Any) -> TokenizedRow:
    template = resolve_chat_template(tokenizer, kwargs.pop("chat_template", None))
    return tokenize_row(tokenizer, row, template, max_length, **kwargs)


def decoded(tokenizer: Any, row: TokenizedRow, loss: bool) -> str:
    """The text of the tokens that carry loss (or those that do not)."""
    ids = [token for token, bit in zip(row.input_ids, row.completion_mask, strict=True) if bit == loss]
    return tokenizer.decode(ids, skip_special_tokens=False)


def test_only_assistant_answers_and_their_eos_carry_loss(tokenizer: Any):
    row = tokenized(tokenizer, {"messages": CONVERSATION})
    assert decoded(tokenizer, row, loss=True) == "Paris.<|im_end|>Rome, of course!<|im_end|>"
    assert decoded(tokenizer, row, loss=False) == (
        "<|im_start|>system\nYou are terse.<|im_end|>\n"
        "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n"
        "<|im_start|>assistant\n\n<|im_start|>user\nAnd of Italy? 你好<|im_end|>\n<|im_start|>assistant\n\n"
    )
    assert tokenizer.decode(row.input_ids) == tokenizer.apply_chat_template(CONVERSATION, tokenize=False)
    assert row.completion_mask[-1] == 0  # the newline after the last <|im_end|> is the template's, not the answer's
    assert row.input_ids[-2] == tokenizer.eos_token_id and row.completion_mask[-2] == 1


def test_completion_only_loss_off_marks_every_token(tokenizer: Any):
    row = tokenized(tokenizer, {"messages": CONVERSATION}, completion_only_loss=False)
    assert row.completion_mask == [1] * len(row.input_ids)


def test_default_template_when_the_tokenizer_has_none(plain_tokenizer: Any):
    assert resolve_chat_template(plain_tokenizer, None) == DEFAULT_CHAT_TEMPLATE
    row = tokenized(plain_tokenizer, chat("Hello there", "General Kenobi"))
    assert plain_tokenizer.decode(row.input_ids) == "<s><|user|>\nHello there\n<|assistant|>\nGeneral Kenobi</s>\n"
    assert decoded(plain_tokenizer, row, loss=True) == "General Kenobi</s>"


def test_chat_template_override(tokenizer: Any):
    template = (
        "{% for m in messages %}{{ m['role'] | upper + ': ' + m['content'] }}"
        "{% if m['role'] == 'assistant' %}{{ eos_token }}{% endif %}{{ '\\n' }}{% endfor %}"
        "{% if add_generation_prompt %}{{ 'ASSISTANT: ' }}{% endif %}"
    )
    row = tokenized(tokenizer, chat("hi", "hello"), chat_template=template)
    assert tokenizer.decode(row.input_ids) == "USER: hi\nASSISTANT: hello<|im_end|>\n"
    # Byte-level BPE glues the space to the word: the token " hello" straddles the prompt/answer boundary,
    # and a token that holds any of the answer's characters carries loss.
    assert decoded(tokenizer, row, loss=True) == " hello<|im_end|>"


def test_template_that_renders_earlier_turns_differently_falls_back_to_search(tokenizer: Any):
    # The last message gets a marker, so render(messages[:3]) is not a prefix of the full text.
    template = (
        "{% for m in messages %}{{ m['role'] + ':\\n' + m['content'] }}"
        "{% if m['role'] == 'assistant' %}{{ eos_token }}{% endif %}{% if loop.last %} [last]{% endif %}"
        "{{ '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ 'assistant:\\n' }}{% endif %}"
    )
    row = tokenized(tokenizer, {"messages": CONVERSATION[1:]}, chat_template=template)
    assert decoded(tokenizer, row, loss=True) == "Paris.<|im_end|>Rome, of course!<|im_end|>"


def test_assistant_turns_in_a_prompt_carry_no_loss(tokenizer: Any):
    row = tokenized(tokenizer, {"messages": CONVERSATION, "prompt_turns": 4})
    assert decoded(tokenizer, row, loss=True) == "Rome, of course!<|im_end|>"


def test_text_rows_train_on_everything_and_end_with_eos(tokenizer: Any):
    row = tokenized(tokenizer, {"text": "The quick brown fox."})
    assert row.completion_mask == [1] * len(row.input_ids)
    assert tokenizer.decode(row.input_ids) == "The quick brown fox.<|im_end|>"


def test_truncation_keeps_the_start(tokenizer: Any):
    full = tokenized(tokenizer, {"messages": CONVERSATION})
    cut = tokenized(tokenizer, {"messages": CONVERSATION}, max_length=40)
    assert cut.input_ids == full.input_ids[:40] and cut.completion_mask == full.completion_mask[:40]
    assert (cut.truncated, cut.length, full.truncated) == (True, len(full.input_ids), False)


def test_slow_tokenizer_without_offsets_gets_the_same_mask(tokenizer: Any):
    class Slow:
        """Wraps the fast tokenizer but hides the offsets, as a slow (Python) tokenizer would."""

        is_fast = False
        eos_token = tokenizer.eos_token

        def __call__(self, text: str, **kwargs: Any) -> dict[str, list[int]]:
            return {"input_ids": tokenizer(text, add_special_tokens=False)["input_ids"]}

        def apply_chat_template(self, *args: Any, **kwargs: Any) -> str:
            return tokenizer.apply_chat_template(*args, **kwargs)

    row = tokenized(Slow(), {"messages": CONVERSATION}, chat_template=tokenizer.chat_template)
    assert decoded(tokenizer, row, loss=True) == "Paris.<|im_end|>Rome, of course!<|im_end|>"


def test_rows_left_without_loss_are_dropped_with_a_warning(tokenizer: Any, write_jsonl: Callable[..., Path]):
    rows = [chat("hi", "hello")] * 3 + [chat("long " * 100, "lost")] * 2
    prepared = prepare_datasets(make_config(write_jsonl(rows), max_length=32), tokenizer)
    assert prepared.report.num_rows == 3 and prepared.report.num_dropped == 2
    assert prepared.report.warnings == [
        "2 of 5 rows are longer than max_length 32 tokens and will be truncated",
        "2 of 5 rows have no tokens to learn from after truncation to max_length 32 (the prompt fills it) "
        "and are dropped",
    ]
    only_long = write_jsonl([chat("long " * 100, "lost")], name="long.jsonl")
    with pytest.raises(DataError, match="no training row has a token to learn from within max_length 32"):
        prepare_datasets(make_config(only_long, max_length=32), tokenizer)


def test_a_template_error_names_the_row(tokenizer: Any, write_jsonl: Callable[..., Path]):
    template = "{% for m in messages %}{% if m['content'] == 'boom' %}{{ raise_exception('no boom') }}{% endif %}"
    template += "{{ m['content'] }}{% endfor %}"
    path = write_jsonl([chat("fine", "ok"), chat("boom", "ok")])
    with pytest.raises(DataError) as caught:
        prepare_datasets(make_config(path, chat_template=template), tokenizer)
    assert str(caught.value) == f"{path} row 2: cannot render it with the chat template: no boom"


@pytest.mark.skipif(not (DEMO_MODEL / "tokenizer.json").exists(), reason="demo model not built")
def test_demo_model_tokenizer_agrees_with_its_generation_markers():
    from transformers import AutoTokenizer

    demo = AutoTokenizer.from_pretrained(DEMO_MODEL)
    row = tokenized(demo, {"messages": CONVERSATION})
    assert decoded(demo, row, loss=True) == "Paris.</s>Rome, of course!</s>"
    # The template's {% generation %} markers give transformers' own assistant mask: ours must match it.
    reference = demo.apply_chat_template(CONVERSATION, return_assistant_tokens_mask=True, return_dict=True)
    assert row.input_ids == list(reference["input_ids"])
    assert row.completion_mask == list(reference["assistant_masks"])


@pytest.mark.skipif(not (DEMO_MODEL / "tokenizer.json").exists(), reason="demo model not built")
def test_default_config_prepares_the_bundled_demo_data():
    from transformers import AutoTokenizer

    from engine.config import parse_config

    demo = AutoTokenizer.from_pretrained(DEMO_MODEL)
    config = parse_config({"data": {"eval_path": "assets/datasets/demo_sft_eval.jsonl", "max_samples": 50}})
    prepared = prepare_datasets(config, demo)
    assert (prepared.report.format, len(prepared.train), len(prepared.eval)) == ("conversational", 50, 200)
    ids, labels = prepared.train[0]["input_ids"], prepared.train[0]["labels"]
    answer = demo.decode([token for token in labels if token != -100])
    assert answer.endswith("</s>") and answer[:-4] in demo.decode(ids)


def test_a_template_that_never_closes_the_answer_is_warned_about(tokenizer: Any, write_jsonl: Callable[..., Path]):
    template = "{% for m in messages %}{{ m['role'] + ':\\n' + m['content'] + '\\n' }}{% endfor %}"
    template += "{% if add_generation_prompt %}{{ 'assistant:\\n' }}{% endif %}"
    prepared = prepare_datasets(make_config(write_jsonl([chat("hi", "hello")]), chat_template=template), tokenizer)
    assert prepared.report.warnings == [
        "the chat template adds nothing after an assistant's answer (no end-of-turn or eos token), "
        "so the model cannot learn where to stop; set data.chat_template to one that closes each turn"
    ]
    assert prepare_datasets(make_config(write_jsonl([chat("hi", "hello")])), tokenizer).report.warnings == []


def test_a_row_past_the_model_s_length_is_cut_without_the_tokenizer_s_warning():
    """The rows are counted and cut against max_length here (the check reports them): transformers' warning about
    the tokenizer's model_max_length ("Token indices sequence length is longer than ...") would only mislead, and
    ``python -m engine check`` printed it after its verdict. Read from transformers' own logger, whose records do not
    propagate to pytest's."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(DEMO_MODEL)
    words = " ".join(["word"] * tokenizer.model_max_length)
    cap = tokenizer.model_max_length * 4  # a run's max_length may pass the length the tokenizer's config states
    records: list[logging.LogRecord] = []
    heard = logging.Handler()
    heard.emit = records.append  # type: ignore[method-assign]
    library = logging.getLogger("transformers")
    library.addHandler(heard)
    try:
        row = tokenized(tokenizer, chat(words, words), max_length=cap)
    finally:
        library.removeHandler(heard)
    assert tokenizer.model_max_length < row.length < cap
    assert [record.getMessage() for record in records if "Token indices" in record.getMessage()] == []
