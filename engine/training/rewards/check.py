"""Before launch: every reward function loads, takes TRL's arguments, finds its columns in the data and scores
the first rows with finite numbers. The dry call runs the user's code in this process: the worker and the check
CLI call this; the studio only outside demo mode, where custom files are refused."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from engine.config import ConfigError, Problem
from engine.config.grpo import RewardSpec
from engine.data.prompts import ROW_COLUMN
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


def check_rewards(specs: list[RewardSpec], rows: list[dict[str, Any]], tokenizer: Any) -> None:
    """Raise ConfigError, one Problem per reward at fault (``grpo.rewards.<i>``), unless every reward loads, takes
    TRL's arguments, finds its columns in ``rows`` and scores up to two of them with finite numbers.

    ``rows`` are prompt rows: ``prompt`` (a string or a message list) and the data's other columns. The dry
    call's completions are each row's reference (the spec's column) or "dry run", shaped like the prompts.
    """
    keys = list(dict.fromkeys(key for row in rows for key in row))
    columns = [key for key in keys if key not in _NOT_COLUMNS]
    modules: dict[Path, ModuleType] = {}
    problems = []
    for index, (spec, name) in enumerate(zip(specs, reward_names(specs), strict=True)):
        missing = [column for column in reward_columns(spec) if column not in columns]
        if rows and missing:
            shown = ", ".join(key for key in keys if key != ROW_COLUMN)
            message: str | None = f"{name} needs the column {missing[0]!r}, which the data lacks (columns: {shown})"
        else:
            message = _reward_problem(spec, name, rows[:DRY_ROWS], columns, tokenizer, modules)
        if message:
            problems.append(Problem(f"grpo.rewards.{index}", message))
    if problems:
        raise ConfigError(problems)


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
