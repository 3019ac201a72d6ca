"""Checks on one tool-calling row (the ``tools`` format) before anything trains, in the user's own column and
speaker names: "conversations[3] (function_call) is not JSON (...)", "messages[2] (tool) is a tool result with
no tool call before it". engine.data.validation numbers the rows.

Turns are ShareGPT (``from``: human / gpt / function_call / observation / system) or OpenAI-style messages
(``role``: system / user / assistant, with ``tool_calls``, / tool); engine.data.tools checks the values.
"""

from __future__ import annotations

from typing import Any

from engine.config.data import ColumnMap
from engine.data.errors import kind_of
from engine.data.formats import SHAREGPT_ROLES, column, turn_keys
from engine.data.tools import (
    FUNCTION_CALL,
    TOOL_RESULT_TAGS,
    TOOLS_COLUMN,
    function_call_problems,
    tool_calls_problems,
    tools_problems,
)
from engine.data.turns import string_problems

# What a turn is, whatever the file calls it.
USER, ASSISTANT, SYSTEM, CALL, RESULT = "user", "assistant", "system", "call", "result"
_SHAREGPT_NAMES = ("human", "gpt", FUNCTION_CALL, "observation", "system")
_ROLE_NAMES = ("system", "user", "assistant", "tool")


def tool_row_problems(row: dict[str, Any], columns: ColumnMap) -> list[str]:
    """What is wrong with one tool-calling row: its tools value, its turns and their order, its system column."""
    name = column(columns, "messages", row)
    problems = tools_problems(row.get(TOOLS_COLUMN), TOOLS_COLUMN)
    problems += tool_turns_problems(row[name], name)
    return problems + string_problems(row, column(columns, "system"), required=False)


def tool_turns_problems(turns: Any, name: str) -> list[str]:
    """Checks on a tool-calling conversation: each turn, then that every result follows a call and that the
    conversation ends with the assistant's answer or call."""
    if not isinstance(turns, list):
        return [f"{name} is {kind_of(turns)}, not a list of turns"]
    if not turns:
        return [f"{name} is empty"]
    problems: list[str] = []
    kinds: list[str | None] = []
    for index, turn in enumerate(turns):
        kind, found = _turn(turn, f"{name}[{index}]")
        kinds.append(kind)
        problems += found
    problems += _order_problems(turns, kinds, name)
    if problems:
        return problems
    if not any(kind in (ASSISTANT, CALL) for kind in kinds):
        return [f"{name} has no assistant turn or tool call; there is nothing to learn"]
    if kinds[-1] not in (ASSISTANT, CALL):
        last = _label(turns[-1])
        return [f"{name} ends with a {last} turn; it must end with the assistant's answer or call"]
    return []


def _turn(turn: Any, where: str) -> tuple[str | None, list[str]]:
    """What one turn is (None when unknown) and what is wrong with it."""
    if not isinstance(turn, dict):
        return None, [f"{where} is {kind_of(turn)}, not an object with role and content"]
    speaker, content = turn_keys(turn)
    if speaker not in turn:
        return None, [f"{where} has no {speaker}"]
    kind = _kind(turn)
    if kind is None:
        allowed = _SHAREGPT_NAMES if speaker == "from" else _ROLE_NAMES
        return None, [f"{where}.{speaker} {turn[speaker]!r} is not one of {', '.join(allowed)}"]
    at = f"{where} ({turn[speaker]})"
    if kind == CALL and speaker == "from":
        return kind, function_call_problems(turn.get(content), at)
    if kind == CALL:
        problems = tool_calls_problems(turn["tool_calls"], f"{where}.tool_calls")
        text = turn.get(content)
        return kind, problems + ([] if text is None or isinstance(text, str) else [_not_string(where, content, text)])
    if content not in turn:
        return kind, [f"{where} has no {content}"]
    if not isinstance(turn[content], str):
        return kind, [_not_string(where, content, turn[content])]
    if kind == ASSISTANT and not turn[content].strip():
        return kind, [f"{at} is empty"]
    return kind, []


def _order_problems(turns: list[Any], kinds: list[str | None], name: str) -> list[str]:
    """A result must follow a call (or another result of the same calls); a system turn may only come first."""
    problems = []
    previous = None  # the kind of the last turn that was not a result
    for index, kind in enumerate(kinds):
        where = f"{name}[{index}]"
        if kind == RESULT and previous != CALL:
            call = (
                "a function_call turn"
                if turn_keys(turns[index])[0] == "from"
                else "an assistant message with tool_calls"
            )
            problems.append(
                f"{where} ({_label(turns[index])}) is a tool result with no tool call before it; put {call} first"
            )
        if kind == SYSTEM and index > 0:
            problems.append(f"{where} is a system turn; only the first turn may be one")
        if kind != RESULT:
            previous = kind
    return problems


def _kind(turn: dict[str, Any]) -> str | None:
    """user / assistant / system / call / result, from the turn's ShareGPT tag or role; None when unknown."""
    speaker = turn_keys(turn)[0]
    value = turn.get(speaker)
    if not isinstance(value, str):
        return None
    if speaker == "from":
        if value == FUNCTION_CALL:
            return CALL
        if value in TOOL_RESULT_TAGS:
            return RESULT
        return SHAREGPT_ROLES.get(value)
    if value == "tool":
        return RESULT
    if value == "assistant" and turn.get("tool_calls"):  # exports write null or [] on plain answers
        return CALL
    return value if value in (USER, ASSISTANT, SYSTEM) else None


def _label(turn: Any) -> str:
    """How the file names a turn's speaker."""
    return str(turn.get(turn_keys(turn)[0])) if isinstance(turn, dict) else kind_of(turn)


def _not_string(where: str, content: str, value: Any) -> str:
    return f"{where}.{content} is {kind_of(value)}, not a string"
