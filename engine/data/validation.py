"""Check every row before anything trains: a bad row is named by its number in the file and what is wrong.

Checks run on the rows as they are in the file (before normalisation), so messages use the user's column
names: "row 3: messages[1].role 'bot' is not one of system, user, assistant".
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine.config.data import PREFERENCE_FORMAT, UNPAIRED_FORMAT, ColumnMap
from engine.data.errors import DataError
from engine.data.formats import REQUIRED, column, row_format, turn_keys
from engine.data.preference import kto_problems, preference_problems
from engine.data.tool_rows import tool_row_problems
from engine.data.turns import string_problems, turn_role, turns_problems
from engine.data.vision_rows import VISION_FORMAT, image_problems, vision_row_problems

MAX_LISTED = 10


def validate_rows(rows: list[dict[str, Any]], fmt: str, columns: ColumnMap, source: str) -> None:
    """Raise one DataError listing up to ten problems (and how many more) if any row cannot be trained."""
    _raise_row_problems(rows, lambda row: row_problems(row, fmt, columns), source, f"{fmt} format")


def validate_images(rows: list[dict[str, Any]], columns: ColumnMap, source: str, base: Path | None) -> None:
    """Open and decode every image of the (shape-checked) vision rows; raise one DataError naming each row whose
    image is missing, a URL, unreadable, corrupt or too large, as validate_rows does."""
    _raise_row_problems(rows, lambda row: image_problems(row, columns, base), source, "their images")


def _raise_row_problems(
    rows: list[dict[str, Any]], find: Callable[[dict[str, Any]], list[str]], source: str, what: str
) -> None:
    problems: list[str] = []
    bad_rows = 0
    for number, row in enumerate(rows, start=1):
        found = find(row)
        if found:
            bad_rows += 1
            problems += [f"row {number}: {problem}" for problem in found]
    if not problems:
        return
    listed = "\n".join(f"  {problem}" for problem in problems[:MAX_LISTED])
    more = f"\n  ... and {len(problems) - MAX_LISTED} more" if len(problems) > MAX_LISTED else ""
    verb = "has" if bad_rows == 1 else "have"
    raise DataError(f"{source}: {bad_rows} of {len(rows)} rows {verb} problems ({what}):\n{listed}{more}")


def row_problems(row: dict[str, Any], fmt: str, columns: ColumnMap) -> list[str]:
    """What is wrong with one row for the given format; empty when it can be trained."""
    missing = [column(columns, field, row) for field in REQUIRED[fmt] if column(columns, field, row) not in row]
    if missing:
        shape = row_format(row, columns)
        if shape is not None and shape != fmt:
            return [f"is a {shape} row ({', '.join(sorted(row))}), but the dataset is {fmt}; formats are mixed"]
        return [f"missing column '{name}'" for name in missing]
    if fmt == PREFERENCE_FORMAT:
        return preference_problems(row, columns)
    if fmt == UNPAIRED_FORMAT:
        return kto_problems(row, columns)
    if fmt == "alpaca":
        return _alpaca_problems(row, columns)
    if fmt == "tools":
        return tool_row_problems(row, columns)
    if fmt == VISION_FORMAT:
        return vision_row_problems(row, columns)
    if fmt == "conversational":
        name = column(columns, "messages", row)
        return turns_problems(row[name], name, conversation=True)
    if fmt == "prompt_completion":
        return _prompt_completion_problems(row, columns)
    if fmt == "prompt":
        return _prompt_problems(row, columns) + string_problems(row, column(columns, "system"), required=False)
    return string_problems(row, column(columns, "text"), required=True)


def _alpaca_problems(row: dict[str, Any], columns: ColumnMap) -> list[str]:
    instruction, extra = column(columns, "instruction"), column(columns, "input")
    problems = string_problems(row, instruction, required=False) + string_problems(row, extra, required=False)
    problems += string_problems(row, column(columns, "output"), required=True)
    problems += string_problems(row, column(columns, "system"), required=False)
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


def _prompt_problems(row: dict[str, Any], columns: ColumnMap) -> list[str]:
    """A prompt alone: a non-empty string, or turns (role/content or from/value) with a user turn to answer."""
    name = column(columns, "prompt")
    prompt = row[name]
    if not isinstance(prompt, list):
        return string_problems(row, name, required=True)
    problems = turns_problems(prompt, name, conversation=False)
    if problems:
        return problems
    users = [index for index, turn in enumerate(prompt) if turn_role(turn) == "user"]
    if not users:
        return [f"{name} has no user turn; there is nothing to answer"]
    last = prompt[users[-1]]
    if not last[turn_keys(last)[1]].strip():  # the question the model answers
        return [f"{name}[{users[-1]}] (user) is empty"]
    return []


def _prompt_completion_problems(row: dict[str, Any], columns: ColumnMap) -> list[str]:
    prompt_name, completion_name = column(columns, "prompt"), column(columns, "completion")
    prompt, completion = row[prompt_name], row[completion_name]
    if isinstance(prompt, list):
        problems = turns_problems(prompt, prompt_name, conversation=False)
    else:
        problems = string_problems(row, prompt_name, required=False)
    if isinstance(completion, list):
        problems += turns_problems(completion, completion_name, conversation=False)
        roles = [turn_role(turn) for turn in completion if isinstance(turn, dict)]
        if completion and "assistant" not in roles:
            problems.append(f"{completion_name} has no assistant turn")
    else:
        problems += string_problems(row, completion_name, required=True)
    return problems + string_problems(row, column(columns, "system"), required=False)
