"""The demo VLM's chat template, which assets/build_demo_vlm.py derives from the text demo's: with string contents
it writes exactly what the text demo's writes, an image part becomes ``<image>`` where it stands, the generation
markers still mark the answer and its eos, and the saved processor keeps the derived template."""

from __future__ import annotations

import importlib
import json
import sys
from typing import Any

import pytest
from transformers import AutoProcessor, AutoTokenizer, PreTrainedTokenizerBase

from engine.store.paths import PROJECT_ROOT

ASSETS = PROJECT_ROOT / "assets"
TEXT_MODEL = ASSETS / "demo-model"
VLM_MODEL = ASSETS / "demo-vlm"

WEATHER = {
    "name": "get_weather",
    "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
CLOCK = {"name": "get_time", "description": "The time in a city.", "parameters": {"type": "object"}}
WRAPPED_TOOLS = [{"type": "function", "function": WEATHER}, {"type": "function", "function": CLOCK}]

SYSTEM = {"role": "system", "content": "Be brief."}
QUESTION = {"role": "user", "content": "Is it raining in Paris?"}
CALL = {
    "role": "assistant",
    "content": "",
    "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}],
}
TWO_CALLS = {  # text before the calls; arguments as a JSON string; a call without its "function" wrapper
    "role": "assistant",
    "content": "Let me check.",
    "tool_calls": [
        {"type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}},
        {"name": "get_time", "arguments": {"city": "Paris"}},
    ],
}
RESULT = {"role": "tool", "content": '{"rain": true}'}
RESULT_AS_DICT = {"role": "tool", "content": {"time": "10:00"}}  # not a string: written as JSON
ANSWER = {"role": "assistant", "content": "Yes, it is raining in Paris."}

CONVERSATIONS = [
    [{"role": "user", "content": "Which month and day is 2024-03-15?"}, {"role": "assistant", "content": "March 15"}],
    [SYSTEM, QUESTION, ANSWER, {"role": "user", "content": "And tomorrow?"}, {"role": "assistant", "content": "No."}],
    [QUESTION, CALL, RESULT, ANSWER],
    [SYSTEM, QUESTION, TWO_CALLS, RESULT, RESULT_AS_DICT, ANSWER],
]


def text(*parts: str | None) -> list[dict[str, str]]:
    """A content as a list of parts: None is the image, a string a text part."""
    return [{"type": "image"} if part is None else {"type": "text", "text": part} for part in parts]


@pytest.fixture(scope="module")
def vlm_template() -> str:
    """build_demo_vlm.py's CHAT_TEMPLATE. The script imports its sibling modules by name, as it does when it runs."""
    sys.path.insert(0, str(ASSETS))
    try:
        return importlib.import_module("build_demo_vlm").CHAT_TEMPLATE
    finally:
        sys.path.remove(str(ASSETS))


@pytest.fixture(scope="module")
def text_tokenizer() -> PreTrainedTokenizerBase:
    return AutoTokenizer.from_pretrained(TEXT_MODEL)


@pytest.fixture(scope="module")
def vlm_tokenizer() -> PreTrainedTokenizerBase:
    return AutoTokenizer.from_pretrained(VLM_MODEL)


def test_the_saved_processor_keeps_the_derived_template(vlm_template: str, vlm_tokenizer: Any) -> None:
    on_disk = (VLM_MODEL / "chat_template.jinja").read_text(encoding="utf-8")
    assert on_disk == vlm_template == vlm_tokenizer.chat_template
    assert AutoProcessor.from_pretrained(VLM_MODEL).chat_template == vlm_template
    for name in ("tokenizer_config.json", "processor_config.json"):  # no second copy to drift apart
        assert "chat_template" not in json.loads((VLM_MODEL / name).read_text(encoding="utf-8"))


@pytest.mark.parametrize("tools", [None, [], WRAPPED_TOOLS, [WEATHER, CLOCK]], ids=["none", "empty", "wrapped", "bare"])
def test_string_contents_render_as_the_text_demo_does(vlm_template: str, text_tokenizer: Any, tools: Any) -> None:
    for messages in CONVERSATIONS:
        for end, prompt in [(len(messages), False), (len(messages) - 1, True)]:
            texts = [
                text_tokenizer.apply_chat_template(
                    messages[:end], tools=tools, tokenize=False, add_generation_prompt=prompt, chat_template=template
                )
                for template in (vlm_template, text_tokenizer.chat_template)
            ]
            assert texts[0] == texts[1]
            assert texts[0].encode("utf-8") == texts[1].encode("utf-8")


def test_an_image_part_becomes_the_image_token_where_it_stands(vlm_tokenizer: Any) -> None:
    messages = [
        {"role": "system", "content": text("Be brief.")},
        {"role": "user", "content": text("Look: ", None, " What colour is the shape?")},
        {"role": "assistant", "content": text("red")},
        {"role": "user", "content": text(None, "What shape is this?")},
    ]
    rendered = vlm_tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert rendered == (
        "<|system|>\nBe brief.</s>\n<|user|>\nLook: <image> What colour is the shape?</s>\n<|assistant|>\nred</s>\n"
        "<|user|>\n<image>What shape is this?</s>\n<|assistant|>\n"
    )
    # A dataset row's string content, with the placeholder in the text, renders the same as its parts.
    as_string = [{"role": "user", "content": "<image>What shape is this?"}]
    assert vlm_tokenizer.apply_chat_template(as_string, tokenize=False) == vlm_tokenizer.apply_chat_template(
        messages[-1:], tokenize=False
    )
    # With tools, a system message in parts still opens the tools' turn.
    with_tools = vlm_tokenizer.apply_chat_template(messages[:2], tools=[WEATHER], tokenize=False)
    assert with_tools.startswith("<|system|>\nBe brief.\n\nYou can call these tools.")
    assert with_tools.endswith("<|user|>\nLook: <image> What colour is the shape?</s>\n")


@pytest.mark.parametrize("answer", ["red", text("red")], ids=["string", "parts"])
def test_the_generation_markers_mark_the_answer_and_its_eos(vlm_tokenizer: Any, answer: Any) -> None:
    messages = [
        {"role": "user", "content": text(None, "What colour is the shape?")},
        {"role": "assistant", "content": answer},
        {"role": "user", "content": "<image>How many squares are there?"},
        {"role": "assistant", "content": "3"},
    ]
    encoded = vlm_tokenizer.apply_chat_template(
        messages, tokenize=True, return_dict=True, return_assistant_tokens_mask=True
    )
    ids, mask = encoded["input_ids"], encoded["assistant_masks"]
    assert len(ids) == len(mask)
    assert ids.count(vlm_tokenizer.convert_tokens_to_ids("<image>")) == 2  # the processor expands each, not this
    runs, current = [], []
    for token, marked in zip(ids, mask, strict=True):
        if marked:
            current.append(token)
        elif current:
            runs.append(current)
            current = []
    runs += [current] if current else []
    assert [vlm_tokenizer.decode(run) for run in runs] == ["red</s>", "3</s>"]
    assert all(run[-1] == vlm_tokenizer.eos_token_id for run in runs)
