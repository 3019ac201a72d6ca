"""``--set KEY=VALUE`` on the command line: change one field of a config file for this command only, so a short trial
run needs no copied YAML (``python -m engine train demo.yaml --set train.max_steps=5``).

KEY is the field's dotted path, as errors name it (``train.max_steps``, ``grpo.rewards``; a key that holds dots is
written in double quotes, ``space."train.learning_rate".high``). VALUE is read as YAML (``5``, ``3.0e-4``, ``true``,
``[q_proj, v_proj]``, ``null``), typed by the field: a text field takes the text as written (``name=2024`` is the
name "2024", ``train.padding_free=on`` the word "on"). The changed mapping is then validated as a whole by the
same pydantic model as the file, so an unknown key or a bad value is refused with the usual message naming it.
"""

from __future__ import annotations

import argparse
import copy
import json
import re
from dataclasses import dataclass
from typing import Any, get_args, get_origin

import yaml
from pydantic import BaseModel

from engine.config.schema import ConfigError, Problem
from engine.config.schema.section import members_of

SET_HELP = (
    "change one field for this command: KEY=VALUE, KEY a dotted path (train.max_steps=5), VALUE read as YAML "
    "(5, 3.0e-4, true, [a, b], null) and checked like the file; repeatable"
)
_KEY_PART = re.compile(r'"(?:[^"\\]|\\.)*"|[^.]+')
_NULLS = ("", "~", "null", "Null", "NULL")
_SCALARS = (bool, int, float, type(None))


@dataclass(frozen=True)
class Override:
    """One ``--set``: the field's path, and its value as typed on the command line."""

    path: tuple[str, ...]
    text: str

    @property
    def key(self) -> str:
        """The path as written, for messages."""
        return ".".join(json.dumps(part) if "." in part or not part else part for part in self.path)


def parse_overrides(items: list[str] | None) -> list[Override]:
    """The ``--set`` arguments as overrides; ConfigError for one that is not KEY=VALUE."""
    overrides = []
    for item in items or ():
        key, equals, text = item.partition("=")
        path = _split_key(key.strip())
        if not equals or path is None:
            raise ConfigError([Problem("", f"--set {item!r}: write KEY=VALUE, e.g. --set train.max_steps=5")])
        overrides.append(Override(path, text))
    return overrides


def _split_key(key: str) -> tuple[str, ...] | None:
    """``a.b."c.d"`` as ("a", "b", "c.d"); None when it is not a dotted path."""
    parts = _KEY_PART.findall(key)
    if not key or ".".join(parts) != key:
        return None
    try:
        return tuple(json.loads(part) if part.startswith('"') else part for part in parts)
    except json.JSONDecodeError:
        return None


def apply_overrides(data: dict[str, Any], overrides: list[Override], model: type[BaseModel]) -> dict[str, Any]:
    """A copy of ``data`` (a config file's mapping) with each override set in turn, typed by ``model``'s field at
    its path; the result is not yet validated. ConfigError naming the key when a value is not YAML or its path
    runs through a value that is not a section."""
    changed = copy.deepcopy(data)
    for override in overrides:
        _set(changed, override, _value(override, field_annotation(model, override.path)))
    return changed


def field_annotation(model: type[BaseModel], path: tuple[str, ...]) -> Any:
    """The type annotation of the field at ``path`` (through sections, mappings and lists), or None when there is
    no such field (validation then names the unknown key)."""
    current: Any = model
    for part in path:
        found = None
        for member in members_of(current):
            if isinstance(member, type) and issubclass(member, BaseModel):
                field = member.model_fields.get(part)
                found = field.annotation if field is not None else None
            elif get_origin(member) is dict:
                found = get_args(member)[1]
            elif get_origin(member) in (list, tuple) and part.isdigit():
                found = get_args(member)[0]
            if found is not None:
                break
        if found is None:
            return None
        current = found
    return current


def _value(override: Override, annotation: Any) -> Any:
    """The override's value as the field takes it: the text itself for a text field, else the YAML value."""
    text = override.text.strip()
    members = members_of(annotation) if annotation is not None else set()
    takes_text = str in members
    if takes_text and members <= {str, type(None)} and not _quoted(text):
        return None if text in _NULLS and type(None) in members else override.text
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError([Problem(override.key, f"--set value {override.text!r} is not YAML: {mark}")]) from None
    if takes_text and not isinstance(value, (str, list, dict)) and not _takes(members, value):
        return override.text  # train.padding_free=on: YAML reads a boolean, the field takes the word
    return value


def _quoted(text: str) -> bool:
    return len(text) >= 2 and text[0] == text[-1] and text[0] in "'\""


def _takes(members: set[Any], value: Any) -> bool:
    """Whether a field of these types takes the scalar ``value`` as it is (an int where a float goes, too)."""
    if isinstance(value, bool):
        return bool in members
    if isinstance(value, int):
        return bool({int, float} & members)
    return type(value) in members


def _set(data: dict[str, Any], override: Override, value: Any) -> None:
    node: Any = data
    for depth, part in enumerate(override.path[:-1]):
        child = _child(node, part)
        if child is None and isinstance(node, list):
            where = ".".join(override.path[:depth])
            raise ConfigError([Problem(where, f"no item {part} in a list of {len(node)} (--set {override.key})")])
        if child is None:
            child = node[part] = {}
        if not isinstance(child, (dict, list)):
            where = ".".join(override.path[: depth + 1])
            held = "nothing" if child is None else repr(child)
            message = f"holds {held}, not a section: set {where} as a whole (--set {override.key}=...)"
            raise ConfigError([Problem(where, message)])
        node = child
    last = override.path[-1]
    if isinstance(node, list):
        if not (last.isdigit() and int(last) < len(node)):
            where = ".".join(override.path[:-1])
            raise ConfigError([Problem(where, f"no item {last} in a list of {len(node)} (--set {override.key})")])
        node[int(last)] = value
    else:
        node[last] = value


def _child(node: Any, part: str) -> Any:
    if isinstance(node, dict):
        return node.get(part)
    if isinstance(node, list) and part.isdigit() and int(part) < len(node):
        return node[int(part)]
    return None


def add_set_option(command: argparse.ArgumentParser, help_text: str) -> None:
    """``--set KEY=VALUE``, repeatable (read by parse_overrides), with the command's own help."""
    command.add_argument("--set", action="append", metavar="KEY=VALUE", help=help_text)
