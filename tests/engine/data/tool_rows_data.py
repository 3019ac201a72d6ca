"""Tool-calling rows shared by the tool-calling data tests: a weather tool, a clock tool, one call, its result and
the answer, as ShareGPT and as OpenAI-style rows."""

from __future__ import annotations

import json
from typing import Any

WEATHER = {
    "name": "get_weather",
    "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
CLOCK = {"name": "read_clock", "description": "The time.", "parameters": {"type": "object", "properties": {}}}
CALL = {"name": "get_weather", "arguments": {"city": "Paris"}}
RESULT = '{"rain": true}'
ANSWER = "Yes, it is raining in Paris."
QUESTION = "Is it raining in Paris?"


def sharegpt_row(call: Any = CALL, tools: Any = None, result: str = RESULT) -> dict[str, Any]:
    """A LLaMA-Factory row: human asks, function_call, observation, gpt answers; tools as a JSON string."""
    return {
        "conversations": [
            {"from": "human", "value": QUESTION},
            {"from": "function_call", "value": call if isinstance(call, str) else json.dumps(call)},
            {"from": "observation", "value": result},
            {"from": "gpt", "value": ANSWER},
        ],
        "tools": json.dumps([WEATHER, CLOCK]) if tools is None else tools,
    }


def openai_row(arguments: Any = '{"city": "Paris"}', tools: Any = None) -> dict[str, Any]:
    """An OpenAI / transformers row: arguments as a JSON string, a call id, tools as a list of wrapped schemas."""
    call = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": arguments}}
    return {
        "messages": [
            {"role": "user", "content": QUESTION},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_1", "content": RESULT},
            {"role": "assistant", "content": ANSWER},
        ],
        "tools": [{"type": "function", "function": WEATHER}] if tools is None else tools,
    }
