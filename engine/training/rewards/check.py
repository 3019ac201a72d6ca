"""Before launch: every reward function loads, takes TRL's arguments, finds its columns in the data and scores
the first rows with finite numbers. The dry call runs the user's code in this process: the worker and the check
CLI call this; the studio only outside demo mode, where custom files are refused.

Rows that lack a column other rows have (absent or None: TRL passes None there) are allowed: a built-in reward
scores them None, "not applicable", and TRL leaves it out of the row's reward. What is refused, naming the row:
a row that no reward can score (every reward compares with a column it lacks: it would train nothing), and a
custom reward that fails on such a row (it is called on the first row that lacks each column).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from engine.config import ConfigError, Problem
from engine.data.prompts import ROW_COLUMN
from engine.training.methods.reward_spec import RewardSpec
from engine.training.rewards.functions import (
    RewardError,
    builtin_reward,
    custom_reward,
    load_custom_function,
    reward_names,
)
from engine.training.rewards.scoring import reward_columns

DRY_ROWS = 2
# Row keys that TRL hands to a reward function as arguments of their own, not as columns.
_NOT_COLUMNS = ("prompt", "completion", "completion_ids")
# What TRL passes besides the columns, by name.
_TRL_ARGUMENTS = ("prompts", "completions", "completion_ids", "trainer_state", "log_extra", "log_metric")


def check_rewards(specs: list[RewardSpec], rows: list[dict[str, Any]], tokenizer: Any, field: str) -> None:
    """Raise ConfigError, one Problem per reward at fault (``<field>.<i>``, where the config lists the rewards),
    unless every reward loads, takes TRL's arguments, finds its columns in ``rows`` and scores up to two of them
    with finite numbers, and then, one at a time, the first row after those that lacks each column; and unless
    every row of ``rows`` has a reward that can score it (the module's docstring).

    ``rows`` are prompt rows: ``prompt`` (a string or a message list) and the data's other columns
    (engine.data.prompts.first_prompt_rows). The dry call's completions are each row's reference (the spec's
    column) or "dry run", shaped like the prompts.
    """
    keys = list(dict.fromkeys(key for row in rows for key in row))
    columns = [key for key in keys if key not in _NOT_COLUMNS]
    valued = {key for row in rows for key, value in row.items() if value is not None}
    lacking = _rows_lacking(rows, columns)
    unscored = _unscored_row(specs, rows, valued)
    modules: dict[Path, ModuleType] = {}
    problems = []
    for index, (spec, name) in enumerate(zip(specs, reward_names(specs), strict=True)):
        missing = [column for column in reward_columns(spec) if column not in valued]
        if rows and missing:
            message: str | None = _missing_problem(name, missing[0], keys)
        elif unscored is not None and index == 0:
            message = _unscored_problem(spec, name, unscored, len(specs))
        else:
            message = _reward_problem(spec, name, rows[:DRY_ROWS], columns, tokenizer, modules)
            message = message or _lacking_problem(spec, name, lacking, columns, tokenizer, modules)
        if message:
            problems.append(Problem(f"{field}.{index}", message))
    if problems:
        raise ConfigError(problems)


def _rows_lacking(rows: list[dict[str, Any]], columns: list[str]) -> list[dict[str, Any]]:
    """Beyond the first DRY_ROWS, the first row that lacks each column (absent or None), in order."""
    firsts = {}
    for column in columns:
        first = next((i for i, row in enumerate(rows) if row.get(column) is None), None)
        if first is not None and first >= DRY_ROWS:
            firsts[first] = rows[first]
    return [firsts[i] for i in sorted(firsts)]


def _missing_problem(name: str, column: str, keys: list[str]) -> str:
    """A reward's column that no row has a value for."""
    if column in keys:
        return f"{name} needs the column {column!r}, which is empty (None) in every row"
    shown = ", ".join(key for key in keys if key != ROW_COLUMN)
    return f"{name} needs the column {column!r}, which the data lacks (columns: {shown})"


def _unscored_row(specs: list[RewardSpec], rows: list[dict[str, Any]], valued: set[str]) -> dict[str, Any] | None:
    """The first row that lacks the column of every reward (each compares with a reference it lacks), or None.

    A reward that reads no column (regex, length, contains) scores every row, and a custom one may: then None.
    Only ``rows`` are looked at (first_prompt_rows: the first row without each column), so with rewards on two
    different columns a later row that lacks both at once goes unnamed; it scores nothing, as TRL warns."""
    needed = [reward_columns(spec) for spec in specs]
    if not specs or any(spec.kind == "custom" or not columns for spec, columns in zip(specs, needed, strict=True)):
        return None
    if any(column not in valued for columns in needed for column in columns):
        return None  # a column no row has is said as such, per reward
    return next((row for row in rows if all(_lacks(row, columns) for columns in needed)), None)


def _lacks(row: dict[str, Any], columns: tuple[str, ...]) -> bool:
    """Whether the row has no value (absent or None) for one of ``columns``."""
    return any(row.get(column) is None for column in columns)


def _unscored_problem(spec: RewardSpec, name: str, row: dict[str, Any], num_rewards: int) -> str:
    """The refusal of a row no reward scores, said at the first reward."""
    column = next(column for column in reward_columns(spec) if row.get(column) is None)
    others = "as it lacks every other reward's column" if num_rewards > 1 else "and no other reward scores that row"
    return (
        f"{name} needs the column {column!r}, which row {_number(row)} lacks, {others}: it would train nothing; "
        f"give every row a {column!r}, or add a reward that reads no column (regex, length, contains or custom)"
    )


def _lacking_problem(
    spec: RewardSpec,
    name: str,
    rows: list[dict[str, Any]],
    columns: list[str],
    tokenizer: Any,
    modules: dict[Path, ModuleType],
) -> str | None:
    """What goes wrong when a reward scores, one at a time, rows that lack some columns (TRL passes None)."""
    for row in rows:
        message = _reward_problem(spec, name, [row], columns, tokenizer, modules)
        if message:
            absent = ", ".join(repr(column) for column in columns if row.get(column) is None)
            return (
                f"{message} (row {_number(row)} has no {absent}: TRL passes None where a row lacks a column; "
                "return None, not applicable, or a score for it)"
            )
    return None


def _number(row: dict[str, Any]) -> Any:
    """The row's number in its file, as the prompt rows carry it."""
    return row.get(ROW_COLUMN, "?")


def _reward_problem(
    spec: RewardSpec,
    name: str,
    rows: list[dict[str, Any]],
    columns: list[str],
    tokenizer: Any,
    modules: dict[Path, ModuleType],
) -> str | None:
    """What is wrong with one reward, or None."""
    try:
        if spec.kind == "custom":
            function = load_custom_function(spec, name, modules)
            problem = _signature_problem(function, name, columns)
            if problem:
                return problem
            reward = custom_reward(function, name)
        else:
            reward = builtin_reward(spec, name, tokenizer)
        if rows:
            _dry_call(reward, spec, rows, columns, tokenizer)
    except RewardError as exc:
        return str(exc)
    return None


def _signature_problem(function: Callable[..., Any], name: str, columns: list[str]) -> str | None:
    """Why TRL could not call ``function`` (it passes everything by name), or None."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):  # no signature to read: the dry call decides
        return None
    shown = f"{name}{signature}"
    if not any(parameter.kind is parameter.VAR_KEYWORD for parameter in signature.parameters.values()):
        return f"reward {shown} must accept **kwargs: TRL passes the data's columns and more by name"
    try:
        signature.bind(**dict.fromkeys([*_TRL_ARGUMENTS, *columns]))
    except TypeError as exc:
        return f"reward {shown} cannot take TRL's arguments (prompts=, completions=, ... by name): {exc}"
    return None


def _dry_call(
    reward: Callable[..., Any], spec: RewardSpec, rows: list[dict[str, Any]], columns: list[str], tokenizer: Any
) -> None:
    """Score ``rows`` once as TRL would (their reference as the answer); a failure is a RewardError."""
    from transformers import TrainerState  # a real state, so a reward may read trainer_state.global_step

    prompts = [row.get("prompt") for row in rows]
    texts = [_dry_answer(row, spec) for row in rows]
    completions = [
        [{"role": "assistant", "content": text}] if isinstance(prompt, list) else text
        for prompt, text in zip(prompts, texts, strict=True)
    ]
    ids = [tokenizer(text, add_special_tokens=False).input_ids for text in texts] if tokenizer is not None else None
    reward(
        prompts=prompts,
        completions=completions,
        completion_ids=ids,
        trainer_state=TrainerState(),
        log_extra=_ignore,
        log_metric=_ignore,
        **{column: [row.get(column) for row in rows] for column in columns},
    )


def _dry_answer(row: dict[str, Any], spec: RewardSpec) -> str:
    """The row's reference (the spec's column) as the dry call's answer, else "dry run"."""
    reference = row.get(spec.column)
    return str(reference) if isinstance(reference, (str, int, float)) and not isinstance(reference, bool) else "dry run"


def _ignore(*args: Any, **kwargs: Any) -> None:
    """Stands in for TRL's log_extra and log_metric during the dry call."""
