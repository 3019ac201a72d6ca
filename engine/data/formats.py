"""Detect a dataset's format from its columns and normalise its rows to the two shapes the tokenizer takes.

Canonical rows:

- ``{"messages": [{"role": ..., "content": ...}, ...]}`` with roles system / user / assistant. A row made
  from a conversational prompt-completion pair may also carry ``"prompt_turns": k``: its first ``k``
  messages are the prompt and carry no loss, even where they are assistant turns.
- ``{"text": str}`` for plain language-modelling text.

A prompt-only row (format ``prompt``: a ``prompt`` string or list of turns, no answer) becomes the messages of
its prompt alone, with ``prompt_turns`` covering them all when the prompt holds assistant turns (few-shot
context), so no turn of it reads as an answer (is_prompt_row). Only a method that samples its own answers (grpo)
trains on it.

The columns a row's format does not read (a reference ``answer``, a ``solution``, an ``id``) are its extra
columns (extra_columns): they are kept beside the canonical rows (engine.data.rows.LoadedRows.extras) for the
reward functions of grpo, and leave the canonical row as it is.

Preference rows (a chosen and a rejected answer) and KTO rows (an answer and a boolean label) are detected
here and shaped by engine.data.preference; which method trains which format is the methods' business
(engine.training.method_data.require_format).

Tool-calling rows (ShareGPT function_call / observation turns, or messages with tool_calls and tool results,
beside a tools column) are their own format, ``tools``: ``{"messages": [...], "tools": [...]}`` in the
transformers convention (engine.data.tools), which the chat template renders with ``tools=``.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from engine.config.data import PREFERENCE_FORMAT, UNPAIRED_FORMAT, ColumnMap, DataSection
from engine.data.errors import DataError
from engine.data.tools import (
    FUNCTION_CALL,
    TOOL_RESULT_TAGS,
    TOOLS_COLUMN,
    calls_from_function_call,
    canonical_tool_calls,
    has_tools,
    parse_tools,
)
from engine.data.warnings import warning

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
    "label": "label",
    "images": "images",
}
# The formats whose rows pair a prompt with answers judged against each other (engine.data.preference).
PAIRED_FORMATS = (PREFERENCE_FORMAT, UNPAIRED_FORMAT)
REQUIRED = {
    "alpaca": ("instruction", "output"),
    "conversational": ("messages",),
    "prompt_completion": ("prompt", "completion"),
    "prompt": ("prompt",),
    "text": ("text",),
    PREFERENCE_FORMAT: ("chosen", "rejected"),
    UNPAIRED_FORMAT: ("label",),
    "tools": ("messages",),
    "vision": ("messages",),
}
# Every field (engine.config.data.ColumnMap) each format reads, and the fixed column names it reads besides
# (history: LLaMA-Factory's alpaca turns; tools: the tool schemas); a row's other columns are extra columns.
READ = {
    "alpaca": ("instruction", "input", "output", "system"),
    "conversational": ("messages", "system"),
    "prompt_completion": ("prompt", "completion", "system"),
    "prompt": ("prompt", "system"),
    "text": ("text",),
    PREFERENCE_FORMAT: ("prompt", "messages", "chosen", "rejected", "system"),
    UNPAIRED_FORMAT: ("prompt", "completion", "messages", "label", "system"),
    "tools": ("messages", "system"),
    "vision": ("messages", "system", "images"),
}
READ_AS_IS = {"alpaca": ("history",), "tools": (TOOLS_COLUMN,), "vision": ("image",)}
_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][\w-]*)\s*\}\}")


def column(columns: ColumnMap, field: str, row: dict[str, Any] | None = None) -> str:
    """The column that holds ``field``: the mapped name, else the usual one (messages, else conversations)."""
    mapped = getattr(columns, field)
    if mapped:
        return mapped
    if field == "messages":
        return "conversations" if row is not None and "messages" not in row and "conversations" in row else "messages"
    if field == "label":  # LLaMA-Factory's dataset_info calls KTO's label column kto_tag
        return "kto_tag" if row is not None and "label" not in row and "kto_tag" in row else "label"
    return DEFAULT_COLUMNS[field]


def row_format(row: dict[str, Any], columns: ColumnMap) -> str | None:
    """The format one row's keys fit (preference and kto first: their rows also have a prompt or conversation).

    A row is kto when its label is a boolean beside a conversation or a prompt and completion; another label
    (a class name, say) is just a column."""
    if all(column(columns, field, row) in row for field in REQUIRED[PREFERENCE_FORMAT]):
        return PREFERENCE_FORMAT
    answers = column(columns, "messages", row) in row or all(
        column(columns, field) in row for field in ("prompt", "completion")
    )
    if answers and isinstance(row.get(column(columns, "label", row)), bool):
        return UNPAIRED_FORMAT
    # A prompt alone comes after prompt_completion: the same row with a completion is a prompt-completion pair.
    for fmt in ("conversational", "prompt_completion", "prompt", "alpaca", "text"):
        if all(column(columns, field, row) in row for field in REQUIRED[fmt]):
            return fmt
    return None


def turn_keys(turn: dict[str, Any]) -> tuple[str, str]:
    """The (speaker, content) keys of one turn: role/content (OpenAI style) or from/value (ShareGPT)."""
    return ("from", "value") if "role" not in turn and "from" in turn else ("role", "content")


def detect_format(rows: list[dict[str, Any]], data: DataSection, source: str) -> str:
    """The format of the rows: the override in ``data.format``, else the shape most rows have.

    Raises DataError when no format fits, and for an override that would train a tool-calling or kto file
    as plain chat.
    """
    columns = sorted({key for row in rows for key in row})
    if _is_tool_dataset(rows, data, source):
        return "tools"
    if data.format not in ("auto", UNPAIRED_FORMAT) and any(
        row_format(row, data.columns) == UNPAIRED_FORMAT for row in rows
    ):
        raise DataError(
            f"{source} is a kto dataset (answers with a boolean label that marks each desirable or not); read as "
            f"{data.format}, the undesirable answers would be learnt too. Set data.format to auto or kto and "
            "method to kto"
        )
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
            "prompt/completion, a prompt alone (prompts for grpo), text, prompt/chosen/rejected (preference) "
            "or a boolean label (kto); "
            "set data.columns to map yours"
        )
    return counts.most_common(1)[0][0]


def _is_tool_dataset(rows: list[dict[str, Any]], data: DataSection, source: str) -> bool:
    """Whether auto-detection finds tool-calling rows (the ``tools`` format); an override to a format that has no
    tool calls is refused, since it would train the calls as text or drop them."""
    tool_rows = [row for row in rows if is_tool_row(row, data.columns)]
    if not tool_rows or data.format == "tools":
        return False  # an explicit tools override takes the usual path, which checks its columns
    paired = next((fmt for row in tool_rows if (fmt := row_format(row, data.columns)) in PAIRED_FORMATS), None)
    if paired is not None:
        raise DataError(
            f"{source} is {paired} data with tool calls or a tools column; tool calls train with method sft "
            "(data.format tools) only; drop the tools from the file or train it as tool-calling SFT"
        )
    if data.format == "auto":
        return True
    raise DataError(
        f"{source} is a tool-calling dataset (function_call / observation turns, or tool_calls and tool "
        f"results, with a tools column), but data.format is {data.format}, which has no tool calls; "
        "set data.format to tools (or auto)"
    )


def is_tool_row(row: dict[str, Any], columns: ColumnMap) -> bool:
    """Whether a conversation row holds a tool call, a tool result or a non-empty tools list.

    A tools column counts only beside a conversation (elsewhere "tools" may be an ordinary column), and only when
    it lists a tool: LLaMA-Factory files write "[]" in rows without tools."""
    turns = row.get(column(columns, "messages", row))
    if not isinstance(turns, list):
        return False
    has_tool_turn = any(
        isinstance(turn, dict) and (turn.get(turn_keys(turn)[0]) in TOOL_ROLES or turn.get("tool_calls"))
        for turn in turns
    )
    return has_tool_turn or has_tools(row.get(TOOLS_COLUMN))


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
    elif fmt in ("conversational", "tools"):
        convert = _tool_message if fmt == "tools" else _message
        turns = [convert(turn) for turn in row[column(columns, "messages", row)]]
        messages = turns if turns[0]["role"] == "system" else messages + turns
    else:  # prompt_completion, prompt
        messages = _with_prompt(messages, row[column(columns, "prompt")])
        # Assistant turns inside the prompt are context, not answers: remember where the answer starts.
        if any(message["role"] == "assistant" for message in messages):
            prompt_turns = len(messages)
        if fmt == "prompt_completion":
            completion = row[column(columns, "completion")]
            if isinstance(completion, list):
                messages += [_message(turn) for turn in completion]
            else:
                messages.append({"role": "assistant", "content": completion})
    result: dict[str, Any] = {"messages": messages}
    if prompt_turns is not None:
        result["prompt_turns"] = prompt_turns
    if fmt == "tools":
        result["tools"] = parse_tools(row.get(TOOLS_COLUMN))
    return result


def _with_prompt(system: list[dict[str, str]], prompt: str | list[dict[str, Any]]) -> list[dict[str, str]]:
    """The system column's turn (if any) and the prompt's turns; a prompt that starts with its own system turn
    keeps that one instead."""
    turns = [_message(turn) for turn in prompt] if isinstance(prompt, list) else [_user(prompt)]
    return turns if turns and turns[0]["role"] == "system" else system + turns


def is_prompt_row(row: dict[str, Any]) -> bool:
    """Whether a canonical row is a prompt alone: messages with no assistant answer after its prompt turns."""
    messages = row.get("messages")
    if not isinstance(messages, list):
        return False
    return not any(message["role"] == "assistant" for message in messages[row.get("prompt_turns", 0) :])


def extra_columns(row: dict[str, Any], fmt: str, columns: ColumnMap) -> dict[str, Any]:
    """The columns of one row (as in the file) that its format does not read: ``{"solution": "4", "id": 7}``."""
    read = {column(columns, field, row) for field in READ[fmt]} | set(READ_AS_IS.get(fmt, ()))
    return {key: value for key, value in row.items() if key not in read}


def _message(turn: dict[str, Any]) -> dict[str, str]:
    speaker, content = turn_keys(turn)
    role = turn[speaker]
    return {"role": SHAREGPT_ROLES.get(role, role) if speaker == "from" else role, "content": turn[content]}


def _tool_message(turn: dict[str, Any]) -> dict[str, Any]:
    """One validated turn of a tool-calling row in the transformers convention (engine.data.tools): a ShareGPT
    function_call or an assistant message with tool_calls becomes an assistant call, an observation a tool result.

    A call's content is "" rather than absent: every canonical message has a string content (placeholders are
    filled in it)."""
    speaker, content = turn_keys(turn)
    role = turn[speaker]
    if speaker == "from" and role == FUNCTION_CALL:
        return {"role": "assistant", "content": "", "tool_calls": calls_from_function_call(turn[content])}
    if role in TOOL_RESULT_TAGS:
        result = {"role": "tool", "content": turn[content]}
        # Templates that match results to calls read these; keep them where the file has them.
        result.update({key: turn[key] for key in ("tool_call_id", "name") if isinstance(turn.get(key), str)})
        return result
    if role == "assistant" and turn.get("tool_calls"):
        calls = canonical_tool_calls(turn["tool_calls"])
        return {"role": "assistant", "content": turn.get(content) or "", "tool_calls": calls}
    return _message(turn)


def normalise_turn(turn: dict[str, Any]) -> dict[str, Any]:
    """One checked turn (role/content or ShareGPT from/value) as a canonical message."""
    return _message(turn)


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
        for message in canonical_messages(row):
            message["content"] = _fill(message["content"], values, unfilled)
        rows_with_unfilled += unfilled.total() > before
    if not unfilled:
        return []
    names = ", ".join("{{" + name + "}}" for name in sorted(unfilled))
    example = ", ".join(f"{name}: ..." for name in sorted(unfilled))
    return [warning("placeholders", count=rows_with_unfilled, names=names, example=example)]


def canonical_messages(row: dict[str, Any]) -> list[dict[str, Any]]:
    """Every message of a canonical row: its conversation, or its prompt and answers (preference, kto)."""
    keys = ("messages", "prompt", "chosen", "rejected", "completion")
    return [message for key in keys if isinstance(row.get(key), list) for message in row[key]]


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
