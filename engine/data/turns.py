"""Checks on the parts rows are made of: a string column, a list of turns, a turn's role. Shared by the row
checks of every format (engine.data.validation, engine.data.preference)."""

from __future__ import annotations

from typing import Any

from engine.data.errors import kind_of
from engine.data.formats import ROLES, SHAREGPT_ROLES, turn_keys

# The ShareGPT tags LLaMA-Factory documents; SHAREGPT_ROLES also takes user/assistant, messages name these.
_SHAREGPT_NAMES = ("human", "gpt", "system")


def string_problems(row: dict[str, Any], name: str, required: bool) -> list[str]:
    """A column that must hold a string (non-empty when ``required``); an absent optional column is fine."""
    value = row.get(name)
    if value is None and not required:
        return []
    if not isinstance(value, str):
        return [f"{name} is {kind_of(value)}, not a string"]
    if required and not value.strip():
        return [f"{name} is empty"]
    return []


def turn_role(turn: dict[str, Any]) -> str | None:
    """The canonical role of a turn (user / assistant / system); None when it has none or an unknown one."""
    speaker = turn_keys(turn)[0]
    value = turn.get(speaker)
    if not isinstance(value, str):
        return None
    if speaker == "from":
        return SHAREGPT_ROLES.get(value)
    return value if value in ROLES else None


def turns_problems(turns: Any, name: str, conversation: bool) -> list[str]:
    """Checks on a list of turns; a full ``conversation`` must also contain and end with an assistant turn."""
    if not isinstance(turns, list):
        return [f"{name} is {kind_of(turns)}, not a list of turns"]
    if not turns:
        return [f"{name} is empty"]
    problems = []
    for index, turn in enumerate(turns):
        where = f"{name}[{index}]"
        if not isinstance(turn, dict):
            problems.append(f"{where} is {kind_of(turn)}, not an object with role and content")
            continue
        speaker, content = turn_keys(turn)
        if speaker not in turn:
            problems.append(f"{where} has no {speaker}")
        elif turn_role(turn) is None:
            allowed = _SHAREGPT_NAMES if speaker == "from" else ROLES
            problems.append(f"{where}.{speaker} {turn[speaker]!r} is not one of {', '.join(allowed)}")
        if content not in turn:
            problems.append(f"{where} has no {content}")
        elif not isinstance(turn[content], str):
            problems.append(f"{where}.{content} is {kind_of(turn[content])}, not a string")
        elif turn_role(turn) == "assistant" and not turn[content].strip():
            problems.append(f"{where} (assistant) is empty")
        if turn_role(turn) == "system" and index > 0:
            problems.append(f"{where} is a system turn; only the first turn may be one")
    if problems or not conversation:
        return problems
    roles = [turn_role(turn) for turn in turns]
    if "assistant" not in roles:
        return [f"{name} has no assistant turn; there is nothing to learn"]
    if roles[-1] != "assistant":
        return [f"{name} ends with a {roles[-1]} turn; it must end with the assistant's answer"]
    return []
