"""The reward functions GRPOTrainer calls: one per RewardSpec, named for TRL's metrics, and wrapped so that a
failure names the reward and the row it failed on.

TRL 1.16 calls each as ``f(prompts=, completions=, completion_ids=, trainer_state=, log_extra=, log_metric=,
**columns)``, every column a list with one value per completion, and wants one float (or None: not applicable)
per completion.
"""

from __future__ import annotations

import asyncio
import importlib.util
import inspect
import itertools
import math
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from types import ModuleType
from typing import Any

from engine.data.prompts import ROW_COLUMN
from engine.training.methods.reward_spec import RewardSpec
from engine.training.rewards.scoring import builtin_scorer, completion_text, reward_columns

RewardFunction = Callable[..., list[float | None]]
_module_numbers = itertools.count(1)


class RewardError(RuntimeError):
    """A reward function that could not load, failed, or returned other than one number per completion; the
    message names the reward and the row."""


def reward_functions(specs: list[RewardSpec], tokenizer: Any) -> list[RewardFunction]:
    """One function per spec in TRL's reward signature, each with a distinct ``__name__`` (TRL logs
    ``rewards/<name>/mean``). Raises RewardError when a custom function cannot be loaded."""
    modules: dict[Path, ModuleType] = {}
    functions = []
    for spec, name in zip(specs, reward_names(specs), strict=True):
        if spec.kind == "custom":
            functions.append(custom_reward(load_custom_function(spec, name, modules), name))
        else:
            functions.append(builtin_reward(spec, name, tokenizer))
    return functions


def reward_names(specs: list[RewardSpec]) -> list[str]:
    """Each spec's label; a label already taken gets _2, _3, ..."""
    names: list[str] = []
    for spec in specs:
        name, number = spec.label, 1
        while name in names:
            number += 1
            name = f"{spec.label}_{number}"
        names.append(name)
    return names


def builtin_reward(spec: RewardSpec, name: str, tokenizer: Any) -> RewardFunction:
    """A built-in reward (any kind but custom) as a TRL reward function named ``name``."""
    score, columns = builtin_scorer(spec, tokenizer), reward_columns(spec)

    def reward(
        prompts: list[Any], completions: list[Any], completion_ids: list[list[int]] | None = None, **kwargs: Any
    ) -> list[float | None]:
        missing = [column for column in columns if column not in kwargs]
        if missing:
            raise RewardError(f"reward {name} needs the column {missing[0]!r}, which the data lacks")
        scores = []
        for index, completion in enumerate(completions):
            row = {column: kwargs[column][index] for column in columns}
            ids = completion_ids[index] if completion_ids is not None else None
            try:
                scores.append(score(completion_text(completion), row, ids))
            except Exception as exc:
                raise RewardError(_failure(name, [index], kwargs, exc)) from exc
        return scores

    return _named(reward, name)


def custom_reward(function: Callable[..., Any], name: str) -> RewardFunction:
    """The user's function as a TRL reward function named ``name``: called as is, its values checked. When a
    batch fails, its completions are scored again one at a time to name the row that fails."""

    def reward(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float | None]:
        try:
            result = _call(function, prompts, completions, kwargs)
        except Exception as exc:
            raise RewardError(_failure(name, _failing(function, prompts, completions, kwargs), kwargs, exc)) from exc
        return checked_scores(name, result, len(completions), kwargs)

    return _named(reward, name)


def load_custom_function(
    spec: RewardSpec, name: str, modules: dict[Path, ModuleType] | None = None
) -> Callable[..., Any]:
    """The function ``spec.function`` of the Python file ``spec.file`` (relative to the current directory),
    imported under a private module name; ``modules`` shares one import among the functions of a file."""
    path = Path(spec.file or "").expanduser()
    if not path.is_file():
        what = "is not a file" if path.exists() else "does not exist"
        where = "" if path.is_absolute() else f" (relative to {Path.cwd()})"
        raise RewardError(f"reward {name}: the file {spec.file} {what}{where}")
    key = path.resolve()
    module = (modules or {}).get(key) or _import_file(path, spec.file or "", name)
    if modules is not None:
        modules[key] = module
    function = getattr(module, spec.function or "", None)
    if function is None:
        defined = [
            attribute
            for attribute, value in vars(module).items()
            if inspect.isfunction(value) and value.__module__ == module.__name__ and not attribute.startswith("_")
        ]
        listed = f" (it defines {', '.join(defined)})" if defined else ""
        raise RewardError(f"reward {name}: {spec.file} defines no function {spec.function}{listed}")
    if not callable(function):
        kind = type(function).__name__
        raise RewardError(f"reward {name}: {spec.function} in {spec.file} is a {kind}, not a function")
    return function


def _import_file(path: Path, shown: str, name: str) -> ModuleType:
    """Execute a Python file as a fresh module; an exception while importing is a RewardError.

    The source is compiled as it is now, not through the import system's loader: that one writes ``__pycache__/``
    beside the file (into the workspace's rewards/, which the studio lists) and trusts its cached bytecode while the
    file keeps its size and its modification second, so a file edited within a second could run its old code."""
    module_name = f"_studio_reward_{next(_module_numbers)}"
    import_spec = importlib.util.spec_from_file_location(module_name, path)
    if import_spec is None or import_spec.loader is None:
        raise RewardError(f"reward {name}: cannot import {shown}: not a Python file")
    module = importlib.util.module_from_spec(import_spec)
    sys.modules[module_name] = module  # dataclasses and pickle look a class's module up by name
    try:
        exec(compile(path.read_bytes(), str(path), "exec", dont_inherit=True), vars(module))
    except (Exception, SystemExit) as exc:
        del sys.modules[module_name]
        raise RewardError(f"reward {name}: importing {shown} raised {_describe(exc)}") from exc
    return module


def checked_scores(name: str, result: Any, count: int, kwargs: dict[str, Any]) -> list[float | None]:
    """A reward function's result as one float (or None) per completion; anything else is a RewardError."""
    if isinstance(result, (str, bytes, dict)) or not isinstance(result, Iterable):
        raise RewardError(f"reward {name} returned {_show(result)}, not a list of one number per completion")
    values = list(result)
    if len(values) != count:
        got, wanted = _count(len(values), "value"), _count(count, "completion")
        raise RewardError(f"reward {name} returned {got} for {wanted}: {_show(values)}")
    scores: list[float | None] = []
    for index, value in enumerate(values):
        number = None if value is None else _as_float(value)
        where = f"for row {row_number(kwargs, index)}"
        if value is not None and number is None:
            raise RewardError(f"reward {name} returned {_show(value)} {where}, not a number")
        if number is not None and not math.isfinite(number):
            raise RewardError(f"reward {name} returned {_show(value)} {where}, not a finite number")
        scores.append(number)
    return scores


def row_number(kwargs: dict[str, Any], index: int) -> int:
    """The 1-based data row of completion ``index``: its ts_row value, else its place in the batch."""
    rows = kwargs.get(ROW_COLUMN)
    if isinstance(rows, (list, tuple)) and index < len(rows):
        try:
            return int(rows[index])
        except (TypeError, ValueError):
            pass
    return index + 1


def _call(function: Callable[..., Any], prompts: list[Any], completions: list[Any], kwargs: dict[str, Any]) -> Any:
    """Call a reward function as TRL does; an async one is run to its result."""
    result = function(prompts=prompts, completions=completions, **kwargs)
    return asyncio.run(result) if inspect.iscoroutine(result) else result


def _failing(
    function: Callable[..., Any], prompts: list[Any], completions: list[Any], kwargs: dict[str, Any]
) -> list[int]:
    """Which completions a failed batch call failed on: the first that fails alone, else all of them."""
    count = len(completions)
    for index in range(count if count > 1 else 0):
        alone = {
            key: value[index : index + 1] if isinstance(value, list) and len(value) == count else value
            for key, value in kwargs.items()
        }
        try:
            _call(function, prompts[index : index + 1], completions[index : index + 1], alone)
        except Exception:
            return [index]
    return list(range(count))


def _failure(name: str, indices: list[int], kwargs: dict[str, Any], exc: BaseException) -> str:
    """'reward NAME failed on row 7: ZeroDivisionError: division by zero'."""
    numbers = list(dict.fromkeys(row_number(kwargs, index) for index in indices))  # a prompt's group shares a row
    rows = f"row {numbers[0]}" if len(numbers) == 1 else "rows " + ", ".join(map(str, numbers))
    return f"reward {name} failed on {rows}: {_describe(exc)}"


def _describe(exc: BaseException) -> str:
    """An exception's type and message."""
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _as_float(value: Any) -> float | None:
    """A number (int, float, bool, numpy or 0-d tensor scalar) as a float; None for anything else."""
    if isinstance(value, (str, bytes)):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _count(number: int, noun: str) -> str:
    """'1 value', '3 values'."""
    return f"{number} {noun}" + ("" if number == 1 else "s")


def _show(value: Any, limit: int = 80) -> str:
    """A short repr for a message."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _named(reward: RewardFunction, name: str) -> RewardFunction:
    """Give a reward function the name TRL logs it under."""
    reward.__name__ = reward.__qualname__ = name
    return reward
