"""Check every row before anything trains: a bad row is named by its number in the file and what is wrong.

Checks run on the rows as they are in the file (before normalisation), so messages use the user's column
names: "row 3: messages[1].role 'bot' is not one of system, user, assistant".
"""

from __future__ import annotations

from typing import Any

from engine.config.sections import ColumnMap
from engine.data.errors import DataError, kind_of
from engine.data.formats import REQUIRED, ROLES, SHAREGPT_ROLES, column, row_format, turn_keys

MAX_LISTED = 10
# The ShareGPT tags LLaMA-Factory documents; SHAREGPT_ROLES also takes user/assistant, messages name these.
_SHAREGPT_NAMES = ("human", "gpt", "system")


def validate_rows(rows: list[dict[str, Any]], fmt: str, columns: ColumnMap, source: str) -> None:
    """Raise one DataError listing up to ten problems (and how many more) if any row cannot be trained."""
    problems: list[str] = []
    bad_rows = 0
    for number, row in enumerate(rows, start=1):
        found = row_problems(row, fmt, columns)
        if found:
            bad_rows += 1
            problems += [f"row {number}: {problem}" for problem in found]
    if not problems:
        return
    listed = "\n".join(f"  {problem}" for problem in problems[:MAX_LISTED])
    more = f"\n  ... and {len(problems) - MAX_LISTED} more" if len(problems) > MAX_LISTED else ""
    verb = "has" if bad_rows == 1 else "have"
    raise DataError(f"{source}: {bad_rows} of {len(rows)} rows {verb} problems ({fmt} format):\n{listed}{more}")


def row_problems(row: dict[str, Any], fmt: str, columns: ColumnMap) -> list[str]:
    """What is wrong with one row for the given format; empty when it can be trained."""
    missing = [column(columns, field, row) for field in REQUIRED[fmt] if column(columns, field, row) not in row]
    if missing:
        shape = row_format(row, columns)
        if shape is not None and shape != fmt:
            return [f"is a {shape} row ({', '.join(sorted(row))}), but the dataset is {fmt}; formats are mixed"]
        return [f"missing column '{name}'" for name in missing]
    if fmt == "alpaca":
        return _alpaca_problems(row, columns)
    if fmt == "conversational":
        name = column(columns, "messages", row)
        return _turns_problems(row[name], name, conversation=True)
    if fmt == "prompt_completion":
        return _prompt_completion_problems(row, columns)
    return _string_problems(row, column(columns, "text"), required=True)


def _string_problems(row: dict[str, Any], name: str, required: bool) -> list[str]:
    """A column that must hold a string (non-empty when ``required``); an absent optional column is fine."""
    value = row.get(name)
    if value is None and not required:
        return []
    if not isinstance(value, str):
        return [f"{name} is {kind_of(value)}, not a string"]
    if required and not value.strip():
        return [f"{name} is empty"]
    return []


def _alpaca_problems(row: dict[str, Any], columns: ColumnMap) -> list[str]:
    instruction, extra = column(columns, "instruction"), column(columns, "input")
    problems = _string_problems(row, instruction, required=False) + _string_problems(row, extra, required=False)
    problems += _string_problems(row, column(columns, "output"), required=True)
    problems += _string_problems(row, column(columns, "system"), required=False)
    if not problems and not (row[instruction] or "").strip() and not (row.get(extra) or "").strip():
        problems.append(f"{instruction} is empty")
    history = row.get("history")
    if history is not None and not (
        isinstance(history, list)
        and all(
            isinstance(pair, list) and len(pair) == 2 and all(isinstance(text, str) for text in pair)
            for pair in history
        )
    ):
        problems.append("history must be a list of [instruction, answer] pairs of strings")
    return problems


def _prompt_completion_problems(row: dict[str, Any], columns: ColumnMap) -> list[str]:
    prompt_name, completion_name = column(columns, "prompt"), column(columns, "completion")
    prompt, completion = row[prompt_name], row[completion_name]
    if isinstance(prompt, list):
        problems = _turns_problems(prompt, prompt_name, conversation=False)
    else:
        problems = _string_problems(row, prompt_name, required=False)
    if isinstance(completion, list):
        problems += _turns_problems(completion, completion_name, conversation=False)
        roles = [turn_role(turn) for turn in completion if isinstance(turn, dict)]
        if completion and "assistant" not in roles:
            problems.append(f"{completion_name} has no assistant turn")
    else:
        problems += _string_problems(row, completion_name, required=True)
    return problems + _string_problems(row, column(columns, "system"), required=False)


def turn_role(turn: dict[str, Any]) -> str | None:
    """The canonical role of a turn (user / assistant / system); None when it has none or an unknown one."""
    speaker = turn_keys(turn)[0]
    value = turn.get(speaker)
    if not isinstance(value, str):
        return None
    if speaker == "from":
        return SHAREGPT_ROLES.get(value)
    return value if value in ROLES else None


def _turns_problems(turns: Any, name: str, conversation: bool) -> list[str]:
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
