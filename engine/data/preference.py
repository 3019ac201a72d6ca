"""Preference rows (a chosen and a rejected answer to one prompt) and KTO rows (one answer, labelled desirable
or not): their checks, and their canonical form, which is TRL's conversational one.

Canonical rows, as TRL's DPOTrainer / ORPOTrainer and KTOTrainer take them (TRL applies the chat template):

- preference: ``{"prompt": [messages], "chosen": [assistant turns], "rejected": [assistant turns]}``
- kto: ``{"prompt": [messages], "completion": [assistant turns], "label": bool}``

Shapes taken (columns mappable through data.columns):

- ``prompt`` / ``chosen`` / ``rejected`` as strings (a user turn and assistant answers), or as turn lists
  (TRL's explicit-prompt form);
- ``chosen`` / ``rejected`` as whole conversations that share their first turns, or as whole texts that share their
  opening (TRL's implicit-prompt form, conversational and standard; the shared opening becomes a user turn);
- LLaMA-Factory's ShareGPT form: ``conversations`` (from / value) + ``chosen`` and ``rejected`` as one
  message each (``dpo_en_demo.json``);
- kto: ``prompt`` / ``completion`` / ``label``, or ``messages`` (or ``conversations``) whose last turn is the
  answer + a boolean ``label`` (LLaMA-Factory's ``kto_tag``).

An optional ``system`` column becomes the prompt's first turn, as for SFT.
"""

from __future__ import annotations

from typing import Any

from engine.config.data import ColumnMap
from engine.data.errors import kind_of
from engine.data.formats import column, normalise_turn
from engine.data.turns import string_problems, turn_role, turns_problems

Turns = list[dict[str, str]]


def preference_problems(row: dict[str, Any], columns: ColumnMap) -> list[str]:
    """What stops one preference row from training; empty when it trains."""
    sides = {side: row.get(column(columns, side)) for side in ("chosen", "rejected")}
    problems = [problem for side, value in sides.items() for problem in _answer_problems(value, column(columns, side))]
    problems += _prompt_problems(row, columns)
    if problems:
        return problems
    shaped = normalise_preference(row, columns)
    if not shaped["prompt"]:
        return ["chosen and rejected share no opening (the prompt) and there is no prompt column; add the prompt"]
    if not shaped["chosen"] or not shaped["rejected"]:
        return ["chosen and rejected are the same conversation; there is nothing to prefer"]
    if shaped["chosen"] == shaped["rejected"]:
        return ["chosen and rejected are the same answer; there is nothing to prefer"]
    return []


def kto_problems(row: dict[str, Any], columns: ColumnMap) -> list[str]:
    """What stops one KTO row from training; empty when it trains."""
    name = column(columns, "label", row)
    label = row.get(name)
    problems = [] if isinstance(label, bool) else [f"{name} is {_shown(label)}, not true or false"]
    messages = column(columns, "messages", row)
    if messages in row:
        problems += turns_problems(row[messages], messages, conversation=True)
        if not problems and len(row[messages]) < 2:
            problems.append(f"{messages} has only the answer; the turns before it are the prompt")
    else:
        prompt, completion = column(columns, "prompt"), column(columns, "completion")
        if prompt not in row or completion not in row:
            return [*problems, f"needs {messages}, or {prompt} and {completion}, beside {name}"]
        problems += _answer_problems(row[completion], completion)
        problems += _prompt_problems(row, columns)
    return problems + string_problems(row, column(columns, "system"), required=False)


def normalise_preference(row: dict[str, Any], columns: ColumnMap) -> dict[str, Turns]:
    """A checked preference row in TRL's conversational form (prompt / chosen / rejected turn lists)."""
    chosen_value, rejected_value = row[column(columns, "chosen")], row[column(columns, "rejected")]
    prompt = _explicit_prompt(row, columns)
    if prompt is None and isinstance(chosen_value, str) and isinstance(rejected_value, str):
        # implicit prompt in TRL's standard form: two whole texts whose shared opening is the prompt
        opening, chosen_value, rejected_value = split_shared_opening(chosen_value, rejected_value)
        prompt = [{"role": "user", "content": opening}] if opening.strip() else []
    chosen, rejected = _turns(chosen_value), _turns(rejected_value)
    if prompt is None:  # implicit prompt: the turns both conversations begin with
        shared = _shared_prefix(chosen, rejected)
        prompt, chosen, rejected = chosen[:shared], chosen[shared:], rejected[shared:]
    return {"prompt": _with_system(prompt, row, columns), "chosen": chosen, "rejected": rejected}


def normalise_kto(row: dict[str, Any], columns: ColumnMap) -> dict[str, Any]:
    """A checked KTO row in TRL's conversational unpaired form (prompt / completion / label)."""
    label = row[column(columns, "label", row)]
    messages = column(columns, "messages", row)
    if messages in row:
        turns = _turns(row[messages])
        prompt, completion = turns[:-1], turns[-1:]
    else:
        prompt = _explicit_prompt(row, columns) or []
        completion = _turns(row[column(columns, "completion")])
    return {"prompt": _with_system(prompt, row, columns), "completion": completion, "label": label}


def as_conversations(row: dict[str, Any]) -> list[dict[str, Any]]:
    """A canonical preference or kto row as the conversations the model reads, one per answer, each with the
    prompt's turns marked (``prompt_turns``: no loss there), the shape engine.data.tokenize takes for counting
    and previewing. TRL tokenizes the same prompt + answer pairs for training."""
    prompt = row["prompt"]
    sides = ("chosen", "rejected") if "chosen" in row else ("completion",)
    return [{"messages": prompt + row[side], "prompt_turns": len(prompt)} for side in sides]


def answer_sides(row: dict[str, Any]) -> tuple[str, ...]:
    """What each conversation of ``as_conversations(row)`` is, in its order: chosen and rejected, or a kto
    answer's label (desirable, undesirable)."""
    if "chosen" in row:
        return ("chosen", "rejected")
    return ("desirable" if row["label"] else "undesirable",)


def _answer_problems(value: Any, name: str) -> list[str]:
    """An answer side: a non-empty string, one message object, or a list of turns ending with the assistant."""
    if value is None:
        return [f"{name} is missing"]
    if isinstance(value, str):
        return [] if value.strip() else [f"{name} is empty"]
    if isinstance(value, dict):
        return turns_problems([value], name, conversation=True)
    if isinstance(value, list):
        return turns_problems(value, name, conversation=True)
    return [f"{name} is {kind_of(value)}, not a string, a message or a list of turns"]


def _prompt_problems(row: dict[str, Any], columns: ColumnMap) -> list[str]:
    """The prompt side, where one is given: a string, a list of turns, or a ShareGPT / messages conversation."""
    name = column(columns, "prompt")
    if name in row:
        value = row[name]
        if isinstance(value, list):
            return turns_problems(value, name, conversation=False)
        return string_problems(row, name, required=True)
    messages = column(columns, "messages", row)
    if messages in row:
        problems = turns_problems(row[messages], messages, conversation=False)
        if not problems and turn_role(row[messages][-1]) == "assistant":
            problems.append(f"{messages} ends with an assistant turn; the answers are chosen and rejected")
        return problems
    return []


def _explicit_prompt(row: dict[str, Any], columns: ColumnMap) -> Turns | None:
    """The prompt turns from a prompt column or a conversation column; None when the prompt is implicit."""
    prompt = row.get(column(columns, "prompt"))
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    if isinstance(prompt, list):
        return _turns(prompt)
    conversation = row.get(column(columns, "messages", row))
    return _turns(conversation) if isinstance(conversation, list) else None


def _turns(value: Any) -> Turns:
    """An answer or a conversation as canonical turns: a string is one assistant answer."""
    if isinstance(value, str):
        return [{"role": "assistant", "content": value}]
    if isinstance(value, dict):
        return [normalise_turn(value)]
    return [normalise_turn(turn) for turn in value]


def split_shared_opening(chosen: str, rejected: str) -> tuple[str, str, str]:
    """The opening two texts share (the prompt) and what follows it in each, split as TRL's ``extract_prompt``
    splits a standard implicit-prompt row: at the first character that differs, with a space before it left to
    the answers. Written out because TRL's function takes a whole dataset row and importing TRL costs a dataset
    check seconds."""
    index = next((i for i, (one, other) in enumerate(zip(chosen, rejected, strict=False)) if one != other), None)
    if index is None:  # one text begins with the whole other: TRL leaves the shorter one its last character
        index = max(min(len(chosen), len(rejected)) - 1, 0)
    elif index > 0 and chosen[index - 1] == " ":
        index -= 1
    return chosen[:index], chosen[index:], rejected[index:]


def _shared_prefix(first: Turns, second: Turns) -> int:
    """How many leading turns two conversations have in common."""
    count = 0
    for one, other in zip(first, second, strict=False):
        if one != other:
            break
        count += 1
    return count


def _with_system(prompt: Turns, row: dict[str, Any], columns: ColumnMap) -> Turns:
    """The prompt with the system column's text as its first turn (unless it has a system turn already)."""
    system = row.get(column(columns, "system"))
    if isinstance(system, str) and system.strip() and not (prompt and prompt[0]["role"] == "system"):
        return [{"role": "system", "content": system}, *prompt]
    return prompt


def _shown(value: Any) -> str:
    """A wrong label as a person reads it: the value (cut short) and its kind."""
    if value is None or isinstance(value, (list, dict)):
        return kind_of(value)
    return f"{repr(value)[:40]} ({kind_of(value)})"
