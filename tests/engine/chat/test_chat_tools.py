"""Chat with tools: the Tools box's JSON is checked as a training row's tools are (engine.data.tools), and the
model reads them rendered by its own chat template, as a tool-calling run was trained: the worker's prompt is the
template's render with ``tools=`` to the token. The demo model's template renders tools and calls."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from transformers import AutoTokenizer

from engine.chat.client import ChatClient, ChatError, ModelSpec, SamplingParams, chat_tools
from engine.config.sections import DEMO_MODEL

WEATHER = {
    "name": "get_weather",
    "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
MESSAGES = [{"role": "user", "content": "What is the weather in Paris?"}]
GREEDY = SamplingParams(temperature=0, max_new_tokens=4)


def test_the_tools_box_is_checked_as_a_rows_tools_are() -> None:
    assert chat_tools("") is None and chat_tools("[]") is None and chat_tools(None) is None
    assert chat_tools(json.dumps([WEATHER])) == [{"type": "function", "function": WEATHER}]  # a bare schema wrapped
    wrapped = [{"type": "function", "function": WEATHER}]
    assert chat_tools(wrapped) == wrapped
    with pytest.raises(ChatError, match="tools is not JSON"):
        chat_tools("[{name: get_weather}")
    with pytest.raises(ChatError, match=r"tools\[0\] has no name"):
        chat_tools('[{"description": "nameless"}]')
    with pytest.raises(ChatError, match="not a list of tool schemas"):
        chat_tools('{"name": "get_weather"}')


@pytest.fixture(scope="module")
def client() -> Iterator[ChatClient]:
    chat = ChatClient()
    for _ in chat.load(ModelSpec(base=DEMO_MODEL)):
        pass
    yield chat
    chat.unload()


def prompt_tokens(client: ChatClient, tools: Any) -> int:
    "".join(client.generate(MESSAGES, GREEDY, tools=tools))
    return client.last_finish["prompt_tokens"]


def test_the_model_reads_its_tools_rendered_by_its_own_template(client: ChatClient) -> None:
    tokenizer = AutoTokenizer.from_pretrained(DEMO_MODEL)
    wrapped = [{"type": "function", "function": WEATHER}]
    expected = tokenizer.apply_chat_template(MESSAGES, tools=wrapped, add_generation_prompt=True, return_dict=True)
    without = tokenizer.apply_chat_template(MESSAGES, add_generation_prompt=True, return_dict=True)
    assert len(expected["input_ids"]) > len(without["input_ids"])  # the template renders the tools
    assert prompt_tokens(client, json.dumps([WEATHER])) == len(expected["input_ids"])
    assert prompt_tokens(client, "") == len(without["input_ids"])
    with pytest.raises(ChatError, match="tools is not JSON"):
        prompt_tokens(client, "not json")


def test_tools_the_context_could_not_hold_are_refused_by_their_rendered_length_before_any_tokenizing() -> None:
    """The worker's model, in this process, with its template's calls counted: tools whose rendered prompt holds
    more characters than the context could are refused from the text alone (tokenizing megabytes takes seconds)."""
    from engine.chat.spec import resolve_model
    from engine.chat.worker import Model

    model = Model(resolve_model(ModelSpec(base=DEMO_MODEL)), lambda *_: None)
    tokenized: list[bool] = []
    render = model.processor.apply_chat_template

    def counted(*args: Any, **kwargs: Any) -> Any:
        tokenized.append(kwargs.get("tokenize", True))
        return render(*args, **kwargs)

    model.processor.apply_chat_template = counted
    huge = [{"type": "function", "function": {**WEATHER, "description": "x" * model.max_chars}}]
    with pytest.raises(ChatError, match=f"too long for the model's context of {model.context_length} tokens"):
        model.prompt(MESSAGES, 4, huge)
    assert tokenized == [False]  # rendered as text once, never tokenized
    tokenized.clear()
    model.prompt(MESSAGES, 4, [{"type": "function", "function": WEATHER}])
    assert tokenized == [False, True]  # a prompt that fits is measured, then tokenized
