"""Tool-calling rows that cannot train are refused before launch, each problem named with its row number."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tool_rows_data import ANSWER, CALL, QUESTION, RESULT, WEATHER, openai_row, sharegpt_row

from engine.config import DataSection
from engine.data import DataError, load_rows

ARGUMENTS_NOT_JSON = {"name": "get_weather", "arguments": "{city: Paris}"}
NOT_JSON = "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"


def sharegpt_turns(*turns: tuple[str, str]) -> dict[str, Any]:
    return {"conversations": [{"from": tag, "value": value} for tag, value in turns], "tools": json.dumps([WEATHER])}


def openai_messages(*messages: dict[str, Any]) -> dict[str, Any]:
    return {"messages": list(messages), "tools": [{"type": "function", "function": WEATHER}]}


def call_message(arguments: Any) -> dict[str, Any]:
    call = {"type": "function", "function": {"name": "get_weather", "arguments": arguments}}
    return {"role": "assistant", "content": "", "tool_calls": [call]}


USER_TURN = {"role": "user", "content": QUESTION}
ANSWER_TURN = {"role": "assistant", "content": ANSWER}
TOOL_TURN = {"role": "tool", "content": RESULT}

BAD_ROWS = {
    "function_call arguments not JSON": (
        sharegpt_row(call=ARGUMENTS_NOT_JSON),
        f"conversations[1] (function_call) arguments is not JSON ({NOT_JSON}); it must be a JSON object",
    ),
    "function_call arguments not an object": (
        sharegpt_row(call={"name": "get_weather", "arguments": ["Paris"]}),
        "conversations[1] (function_call) arguments is a list, not an object",
    ),
    "tool_calls arguments not JSON": (
        openai_messages(USER_TURN, call_message("{city: Paris}"), TOOL_TURN, ANSWER_TURN),
        f"messages[1].tool_calls[0].function.arguments is not JSON ({NOT_JSON}); it must be a JSON object",
    ),
    "tool_calls arguments JSON but not an object": (
        openai_messages(USER_TURN, call_message('"Paris"'), TOOL_TURN, ANSWER_TURN),
        "messages[1].tool_calls[0].function.arguments is a string in JSON, not an object",
    ),
    "observation without a call": (
        sharegpt_turns(("human", QUESTION), ("observation", RESULT), ("gpt", ANSWER)),
        "conversations[1] (observation) is a tool result with no tool call before it; put a function_call turn first",
    ),
    "observation after an answer": (
        sharegpt_turns(("human", QUESTION), ("gpt", "Let me see."), ("observation", RESULT), ("gpt", ANSWER)),
        "conversations[2] (observation) is a tool result with no tool call before it; put a function_call turn first",
    ),
    "tool message without a call": (
        openai_messages(USER_TURN, TOOL_TURN, ANSWER_TURN),
        "messages[1] (tool) is a tool result with no tool call before it; "
        "put an assistant message with tool_calls first",
    ),
    "tools not JSON": (
        sharegpt_row(tools='[{"name": '),
        "tools is not JSON (Expecting value: line 1 column 11 (char 10)); it must be a JSON list of tool schemas",
    ),
    "tools an object": (sharegpt_row(tools=json.dumps(WEATHER)), "tools is an object, not a list of tool schemas"),
    "tools of strings": (
        sharegpt_row(tools='["get_weather"]'),
        "tools[0] is a string, not an object (a tool schema with a name)",
    ),
    "a tool without a name": (sharegpt_row(tools=[{"description": "nameless"}]), "tools[0] has no name"),
    "function_call not JSON": (
        sharegpt_row(call="get_weather(city='Paris')"),
        "conversations[1] (function_call) is not JSON (Expecting value: line 1 column 1 (char 0)); "
        'write it as {"name": ..., "arguments": {...}}',
    ),
    "function_call without a name": (
        sharegpt_row(call={"arguments": {"city": "Paris"}}),
        'conversations[1] (function_call) has no name; write it as {"name": ..., "arguments": {...}}',
    ),
    "ends with a tool result": (
        sharegpt_turns(("human", QUESTION), ("function_call", json.dumps(CALL)), ("observation", RESULT)),
        "conversations ends with a observation turn; it must end with the assistant's answer or call",
    ),
    "an unknown tag": (
        sharegpt_turns(("human", QUESTION), ("bot", ANSWER)),
        "conversations[1].from 'bot' is not one of human, gpt, function_call, observation, system",
    ),
}


@pytest.mark.parametrize("case", list(BAD_ROWS))
def test_each_problem_is_named_with_its_row(case: str, write_jsonl: Callable[..., Path]) -> None:
    bad, problem = BAD_ROWS[case]
    good = sharegpt_row() if "conversations" in bad else openai_row()
    path = write_jsonl([good, bad, good])
    with pytest.raises(DataError) as refused:
        load_rows(DataSection(path=str(path)))
    assert str(refused.value) == f"{path}: 1 of 3 rows has problems (tools format):\n  row 2: {problem}"


def test_problems_in_several_rows_are_each_numbered(write_jsonl: Callable[..., Path]) -> None:
    rows = [sharegpt_row(), sharegpt_row(call=ARGUMENTS_NOT_JSON), sharegpt_row(), sharegpt_row(tools="{")]
    with pytest.raises(DataError) as refused:
        load_rows(DataSection(path=str(write_jsonl(rows))))
    lines = str(refused.value).splitlines()
    assert lines[0].endswith("2 of 4 rows have problems (tools format):")
    assert lines[1].startswith("  row 2: conversations[1] (function_call) arguments is not JSON")
    assert lines[2].startswith("  row 4: tools is not JSON")


def test_an_assistant_message_with_null_tool_calls_is_a_plain_answer(write_jsonl: Callable[..., Path]) -> None:
    row = openai_row()
    row["messages"][-1]["tool_calls"] = None  # exports write null on plain answers
    loaded = load_rows(DataSection(path=str(write_jsonl([row]))))
    assert loaded.rows[0]["messages"][-1] == {"role": "assistant", "content": ANSWER}
