"""Detect a dataset's format from its columns and normalise its rows to the two shapes the tokenizer takes.

Canonical rows:

- ``{"messages": [{"role": ..., "content": ...}, ...]}`` with roles system / user / assistant. A row made
  from a conversational prompt-completion pair may also carry ``"prompt_turns": k``: its first ``k``
  messages are the prompt and carry no loss, even where they are assistant turns.
- ``{"text": str}`` for plain language-modelling text.

Formats SFT cannot train yet (preference, tool calling, KTO) are recognised and refused with a message
that says what the file is, so a user learns it before launch and not from a crash.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from engine.config.sections import ColumnMap, DataSection
from engine.data.errors import DataError

ROLES = ("system", "user", "assistant")
# ShareGPT (LLaMA-Factory) speaker tags; "user"/"assistant" are accepted there too since mixed files exist.
SHAREGPT_ROLES = {
    "human": "user",
    "gpt": "assistant",
    "system": "system",
    "user": "user",
    "assistant": "assistant",
}
TOOL_ROLES = {"function_call", "observation", "tool", "function", "ipython"}
DEFAULT_COLUMNS = {
    "instruction": "instruction",
    "input": "input",
    "output": "output",
    "system": "system",
    "prompt": "prompt",
    "completion": "completion",
    "text": "text",
    "chosen": "chosen",
    "rejected": "rejected",
}
REQUIRED = {
    "alpaca": ("instruction", "output"),
    "conversational": ("messages",),
    "prompt_completion": ("prompt", "completion"),
    "text": ("text",),
    "preference": ("chosen", "rejected"),
}
_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][\w-]*)\s*\}\}")


def column(columns: ColumnMap, field: str, row: dict[str, Any] | None = None) -> str:
    """The column that holds ``field``: the mapped name, else the usual one (messages, else conversations)."""
    mapped = getattr(columns, field)
    if mapped:
        return mapped
    if field == "messages":
        return "conversations" if row is not None and "messages" not in row and "conversations" in row else "messages"
    return DEFAULT_COLUMNS[field]


def row_format(row: dict[str, Any], columns: ColumnMap) -> str | None:
    """The format one row's keys fit (preference first: its rows also have a prompt or conversation)."""
    for fmt in ("preference", "conversational", "prompt_completion", "alpaca", "text"):
        if all(column(columns, field, row) in row for field in REQUIRED[fmt]):
            return fmt
    return None


def turn_keys(turn: dict[str, Any]) -> tuple[str, str]:
    """The (speaker, content) keys of one turn: role/content (OpenAI style) or from/value (ShareGPT)."""
    return ("from", "value") if "role" not in turn and "from" in turn else ("role", "content")


def detect_format(rows: list[dict[str, Any]], data: DataSection, source: str) -> str:
    """The SFT format of the rows: the override in ``data.format``, else the shape most rows have.

    Raises DataError for data SFT cannot train (preference, tool calling, KTO) and when no format fits.
    """
    columns = sorted({key for row in rows for key in row})
    _refuse_unsupported(rows, data.columns, source)
    if data.format == "preference":
        raise DataError(_preference_message(source, rows[0], data.columns))
    if data.format != "auto":
        present = {key for row in rows for key in row}
        needed = [column(data.columns, field, rows[0]) for field in REQUIRED[data.format]]
        missing = [name for name in needed if name not in present]
        if missing:
            raise DataError(
                f"{source}: data.format is {data.format}, but no row has the column(s) "
                f"{', '.join(missing)} (the columns are {', '.join(columns)}); "
                "set data.columns to map them, or data.format to auto"
            )
        return data.format
    counts = Counter(fmt for fmt in (row_format(row, data.columns) for row in rows) if fmt)
    if not counts:
        raise DataError(
            f"{source}: cannot tell the format from the columns {', '.join(columns)}; "
            "expected instruction/output (alpaca), messages or conversations (conversational), "
            "prompt/completion, or text; "
            "set data.columns to map yours"
        )
    fmt = counts.most_common(1)[0][0]
    if fmt == "preference":
        example = next(row for row in rows if row_format(row, data.columns) == "preference")
        raise DataError(_preference_message(source, example, data.columns))
    return fmt


def _refuse_unsupported(rows: list[dict[str, Any]], columns: ColumnMap, source: str) -> None:
    """Tool-calling and KTO data look conversational; training them as plain SFT would be silently wrong."""
    for row in rows:
        turns = row.get(column(columns, "messages", row))
        has_tool_turn = isinstance(turns, list) and any(
            isinstance(turn, dict) and (turn.get(turn_keys(turn)[0]) in TOOL_ROLES or turn.get("tool_calls"))
            for turn in turns
        )
        # A tools column counts only beside a conversation: elsewhere "tools" may just be an ordinary column.
        if has_tool_turn or (isinstance(turns, list) and row.get("tools")):
            raise DataError(
                f"{source} is a tool-calling dataset (ShareGPT turns with function_call / observation "
                "and a tools column); SFT here trains on system / user / assistant turns only, "
                "and tool-calling training is not supported yet"
            )
    first = rows[0]
    if column(columns, "messages", first) in first and isinstance(first.get("label"), bool):
        raise DataError(
            f"{source} is a KTO dataset (messages with a boolean label that marks each answer "
            "desirable or not); SFT would also learn the undesirable answers, "
            "and KTO training is not supported yet"
        )


def _preference_message(source: str, row: dict[str, Any], columns: ColumnMap) -> str:
    shape = (
        "ShareGPT conversations + chosen/rejected"
        if "conversations" in row
        else f"{column(columns, 'prompt')}/{column(columns, 'chosen')}/{column(columns, 'rejected')}"
    )
    return (
        f"{source} is a preference dataset ({shape}) for DPO-style training: "
        "a preferred and a rejected answer per prompt. SFT needs one answer per prompt; "
        "preference training is not supported yet"
    )


def normalise_row(row: dict[str, Any], fmt: str, columns: ColumnMap) -> dict[str, Any]:
    """One validated row in canonical form: ``{"messages": [...]}`` or ``{"text": ...}``."""
    if fmt == "text":
        return {"text": row[column(columns, "text")]}
    system = row.get(column(columns, "system"))
    messages = [{"role": "system", "content": system}] if isinstance(system, str) and system.strip() else []
    prompt_turns = None
    if fmt == "alpaca":
        for pair in row.get("history") or []:  # LLaMA-Factory alpaca: [[instruction, answer], ...] before this one
            messages += [{"role": "user", "content": pair[0]}, {"role": "assistant", "content": pair[1]}]
        user = row[column(columns, "instruction")]
        extra = row.get(column(columns, "input"))
        if isinstance(extra, str) and extra.strip():
            user = f"{user}\n\n{extra}"
        answer = row[column(columns, "output")]
        messages += [{"role": "user", "content": user}, {"role": "assistant", "content": answer}]
    elif fmt == "conversational":
        turns = [_message(turn) for turn in row[column(columns, "messages", row)]]
        messages = turns if turns[0]["role"] == "system" else messages + turns
    else:
        prompt, completion = row[column(columns, "prompt")], row[column(columns, "completion")]
        prompt_messages = [_message(t) for t in prompt] if isinstance(prompt, list) else [_user(prompt)]
        if prompt_messages and prompt_messages[0]["role"] == "system":
            messages = []
        messages += prompt_messages
        # Assistant turns inside the prompt are context, not answers: remember where the answer starts.
        if any(message["role"] == "assistant" for message in messages):
            prompt_turns = len(messages)
        if isinstance(completion, list):
            messages += [_message(turn) for turn in completion]
        else:
            messages.append({"role": "assistant", "content": completion})
    result: dict[str, Any] = {"messages": messages}
    if prompt_turns is not None:
        result["prompt_turns"] = prompt_turns
    return result


def _message(turn: dict[str, Any]) -> dict[str, str]:
    speaker, content = turn_keys(turn)
    role = turn[speaker]
    return {"role": SHAREGPT_ROLES.get(role, role) if speaker == "from" else role, "content": turn[content]}


def _user(content: str) -> dict[str, str]:
    return {"role": "user", "content": content}


def fill_placeholders(rows: list[dict[str, Any]], values: dict[str, str]) -> list[str]:
    """Replace ``{{name}}`` with ``values[name]`` in every text of the canonical rows, in place.

    Returns warnings for placeholders left without a value (they stay in the text; training still works).
    """
    unfilled: Counter[str] = Counter()
    rows_with_unfilled = 0
    for row in rows:
        before = unfilled.total()
        if "text" in row:
            row["text"] = _fill(row["text"], values, unfilled)
        else:
            for message in row["messages"]:
                message["content"] = _fill(message["content"], values, unfilled)
        rows_with_unfilled += unfilled.total() > before
    if not unfilled:
        return []
    names = ", ".join("{{" + name + "}}" for name in sorted(unfilled))
    example = ", ".join(f"{name}: ..." for name in sorted(unfilled))
    return [
        f"{rows_with_unfilled} rows contain placeholders with no value ({names}); "
        f"they are trained as written. Set data.placeholders ({example}) to fill them in"
    ]


def _fill(text: str, values: dict[str, str], unfilled: Counter[str]) -> str:
    """``text`` with known placeholders replaced; unknown ones are counted in ``unfilled`` and kept."""
    if "{{" not in text:  # the common case, and far cheaper than the regex
        return text

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in values:
            return values[name]
        unfilled[name] += 1
        return match.group(0)

    return _PLACEHOLDER.sub(replace, text)
