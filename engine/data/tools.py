"""Tool calling: the values a tool-calling row is made of (its tools list, an assistant's calls and their
arguments), checked and put in the convention transformers' chat templates read.

A canonical tool-calling row is ``{"messages": [...], "tools": [...]}``, rendered with
``apply_chat_template(messages, tools=tools)``:

- an assistant's call: ``{"role": "assistant", "content": "", "tool_calls": [{"type": "function",
  "function": {"name": str, "arguments": dict}}]}``;
- a tool's result: ``{"role": "tool", "content": str}``;
- the tools: ``[{"type": "function", "function": {"name": ..., "description": ..., "parameters": ...}}]``
  (a bare JSON schema, as LLaMA-Factory's files hold them, is wrapped so).

A leaf module (only json and engine.data.errors): formats, validation and tokenize all import it.
"""

from __future__ import annotations

import json
from typing import Any

from engine.data.errors import kind_of

TOOLS_COLUMN = "tools"
# ShareGPT (LLaMA-Factory) tags: an assistant's call, and a tool's result.
FUNCTION_CALL = "function_call"
TOOL_RESULT_TAGS = ("observation", "tool")
CALL_SHAPE = '{"name": ..., "arguments": {...}}'

# The conversation tokenize.require_tool_support renders to see whether a chat template shows tools and calls.
# The tool that is not called appears only if the template renders the tools list, and the city only if it
# renders the assistant's call.
TOOL_PROBE_TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "probe_lookup_weather",
            "description": "Probe tool: the weather in a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "probe_read_clock",
            "description": "Probe tool: the time.",
            "parameters": {"type": "object", "properties": {}},
        },
    },
]
TOOL_PROBE_CITY = "Probe City 7"
TOOL_PROBE_MESSAGES: list[dict[str, Any]] = [
    {"role": "user", "content": "Probe question"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"type": "function", "function": {"name": "probe_lookup_weather", "arguments": {"city": TOOL_PROBE_CITY}}}
        ],
    },
    {"role": "tool", "content": "Probe result 7"},
    {"role": "assistant", "content": "Probe answer 7"},
]


def uses_tools(messages: list[dict[str, Any]]) -> bool:
    """Whether canonical messages hold an assistant's tool call or a tool's result."""
    return any(message.get("tool_calls") or message.get("role") == "tool" for message in messages)


def calls_tools(row: dict[str, Any]) -> bool:
    """Whether a canonical row holds an assistant's tool call (what a tool-calling dataset exists to teach)."""
    messages = row.get("messages")
    return isinstance(messages, list) and any(isinstance(m, dict) and m.get("tool_calls") for m in messages)


def has_tools(value: Any) -> bool:
    """Whether a tools value lists at least one tool; an unreadable one counts, so validation names it."""
    parsed, error = _parse(value)
    return error is not None or bool(parsed)


def tools_problems(value: Any, name: str = TOOLS_COLUMN) -> list[str]:
    """What is wrong with a tools value: a JSON list (or a list) of tool schemas, each with a name.

    An absent, null or empty value is fine: the row simply offers no tools."""
    parsed, error = _parse(value)
    if error is not None:
        return [f"{name} is not JSON ({error}); it must be a JSON list of tool schemas"]
    if parsed is None:
        return []
    if not isinstance(parsed, list):
        return [f"{name} is {kind_of(parsed)}, not a list of tool schemas"]
    problems = []
    for index, tool in enumerate(parsed):
        where = f"{name}[{index}]"
        if not isinstance(tool, dict):
            problems.append(f"{where} is {kind_of(tool)}, not an object (a tool schema with a name)")
        elif not isinstance(_schema(tool).get("name"), str) or not _schema(tool)["name"].strip():
            problems.append(f"{where} has no name")
    return problems


def parse_tools(value: Any) -> list[dict[str, Any]]:
    """A validated tools value as a list of ``{"type": "function", "function": schema}``."""
    parsed, _ = _parse(value)
    return [tool if "function" in tool else {"type": "function", "function": tool} for tool in parsed or []]


def function_call_problems(value: Any, where: str) -> list[str]:
    """What is wrong with a ShareGPT function_call turn's value: JSON of one call or a list of calls."""
    parsed, error = _parse(value)
    if error is not None:
        return [f"{where} is not JSON ({error}); write it as {CALL_SHAPE}"]
    if parsed is None:
        return [f"{where} is empty; write it as {CALL_SHAPE}"]
    if not isinstance(parsed, (dict, list)):
        return [f"{where} is {kind_of(parsed)}, not a call; write it as {CALL_SHAPE}"]
    calls = parsed if isinstance(parsed, list) else [parsed]
    if not calls:
        return [f"{where} is an empty list of calls; write it as {CALL_SHAPE}"]
    problems = []
    for index, call in enumerate(calls):
        at = f"{where}[{index}]" if isinstance(parsed, list) else where
        if not isinstance(call, dict):
            problems.append(f"{at} is {kind_of(call)}, not a call; write it as {CALL_SHAPE}")
            continue
        if not _is_name(call.get("name")):
            problems.append(f"{at} has no name; write it as {CALL_SHAPE}")
        problems += arguments_problems(call.get("arguments"), f"{at} arguments")
    return problems


def tool_calls_problems(value: Any, where: str) -> list[str]:
    """What is wrong with an assistant message's ``tool_calls``: a list of ``{"type": "function", "function":
    {"name", "arguments"}}``."""
    if not isinstance(value, list):
        return [f"{where} is {kind_of(value)}, not a list of calls"]
    if not value:
        return [f"{where} is empty; an assistant message with tool_calls needs at least one call"]
    problems = []
    for index, call in enumerate(value):
        at = f"{where}[{index}]"
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            problems.append(
                f'{at} has no function object; write it as {{"type": "function", "function": {CALL_SHAPE}}}'
            )
            continue
        if call.get("type", "function") != "function":
            problems.append(f"{at}.type {call['type']!r} is not 'function'")
        if not _is_name(function.get("name")):
            problems.append(f"{at}.function has no name")
        problems += arguments_problems(function.get("arguments"), f"{at}.function.arguments")
    return problems


def arguments_problems(arguments: Any, where: str) -> list[str]:
    """A call's arguments: an object, or a string of JSON holding one; absent means no arguments."""
    if arguments is None or isinstance(arguments, dict):
        return []
    if not isinstance(arguments, str):
        return [f"{where} is {kind_of(arguments)}, not an object"]
    parsed, error = _parse(arguments)
    if error is not None:
        return [f"{where} is not JSON ({error}); it must be a JSON object"]
    return [] if isinstance(parsed, dict) else [f"{where} is {kind_of(parsed)} in JSON, not an object"]


def calls_from_function_call(value: Any) -> list[dict[str, Any]]:
    """The canonical calls of a validated ShareGPT function_call value: JSON (or an object, or a list) of one call
    or of several."""
    parsed, _ = _parse(value)
    calls = parsed if isinstance(parsed, list) else [parsed]
    return [tool_call(call["name"], call.get("arguments")) for call in calls]


def canonical_tool_calls(tool_calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Validated OpenAI-style ``tool_calls`` with their arguments as objects (an id, when given, is kept)."""
    calls = []
    for call in tool_calls:
        function = call["function"]
        canonical = tool_call(function["name"], function.get("arguments"))
        if isinstance(call.get("id"), str):
            canonical["id"] = call["id"]
        calls.append(canonical)
    return calls


def tool_call(name: str, arguments: Any) -> dict[str, Any]:
    """One call in the transformers convention; arguments given as a JSON string are parsed to an object."""
    if isinstance(arguments, str):
        arguments = json.loads(arguments)
    return {"type": "function", "function": {"name": name, "arguments": arguments or {}}}


def _parse(value: Any) -> tuple[Any, str | None]:
    """(value, None) with a JSON string decoded; (None, why) when it is a string that is not JSON.

    An empty string reads as no value, as LLaMA-Factory's rows without tools hold one."""
    if not isinstance(value, str):
        return value, None
    if not value.strip():
        return None, None
    try:
        return json.loads(value), None
    except ValueError as exc:
        return None, str(exc)


def _schema(tool: dict[str, Any]) -> dict[str, Any]:
    """The function schema of a tool, wrapped (``{"type": "function", "function": ...}``) or bare."""
    function = tool.get("function")
    return function if isinstance(function, dict) else tool


def _is_name(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())
