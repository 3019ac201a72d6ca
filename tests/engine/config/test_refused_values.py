"""Values a config refuses that pydantic alone would take: true / false for a number, direction marks in a name,
and an empty file."""

from __future__ import annotations

import types
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import pytest
from pydantic import BaseModel

from engine.config import ConfigError, RunConfig, load_config, parse_config
from engine.config.names import name_problem


def members_of(annotation: Any) -> set[Any]:
    """The types an annotation takes, unions, Literal values and Annotated unfolded."""
    if get_origin(annotation) in (Union, types.UnionType):
        return {member for arg in get_args(annotation) for member in members_of(arg)}
    if get_origin(annotation) is Literal:
        return {type(value) for value in get_args(annotation)}
    if get_origin(annotation) is Annotated:
        return members_of(get_args(annotation)[0])
    return {annotation}


def _number_fields(model: type[BaseModel], prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every field of the config's sections that takes a number (or a list of them) and no boolean."""
    found = []
    for name, field in model.model_fields.items():
        members = members_of(field.annotation)
        sections = [member for member in members if isinstance(member, type) and issubclass(member, BaseModel)]
        if sections:
            found += _number_fields(sections[0], (*prefix, name))
        elif bool not in members and {int, float} & (members | _list_items(members)):
            found.append((*prefix, name))
    return found


def _list_items(members: set[Any]) -> set[Any]:
    return {item for member in members if get_origin(member) is list for item in members_of(get_args(member)[0])}


NUMBER_FIELDS = _number_fields(RunConfig)


def _nested(path: tuple[str, ...], value: Any) -> dict[str, Any]:
    data: Any = value
    for part in reversed(path):
        data = {part: data}
    return data


@pytest.mark.parametrize("path", NUMBER_FIELDS, ids=".".join)
@pytest.mark.parametrize("value", [True, False])
def test_true_or_false_is_not_a_number(path: tuple[str, ...], value: bool):
    given: Any = [value] if path == ("launch", "devices") else value  # a list of GPU indices
    with pytest.raises(ConfigError) as refused:
        parse_config(_nested(path, given))
    field = ".".join(path)
    assert field in refused.value.by_field(), str(refused.value)
    assert refused.value.by_field()[field] in ("must be a whole number", "must be a number")


def test_max_steps_true_is_refused_not_read_as_one_step():
    with pytest.raises(ConfigError, match=r"^train\.max_steps: must be a whole number$"):
        parse_config({"train": {"max_steps": True}})
    assert parse_config({"train": {"max_steps": 1}}).train.max_steps == 1
    assert parse_config({"train": {"packing": True}}).train.packing is True  # a boolean field still takes one
    # The parametrized test above covers every section's numbers.
    assert {"train", "adapter", "launch", "data", "dpo", "grpo"} <= {path[0] for path in NUMBER_FIELDS}


@pytest.mark.parametrize(
    "mark",
    ["\u202e", "\u202d", "\u202a", "\u202b", "\u202c", "\u200e", "\u200f", "\u061c", "\u2066", "\u2067", "\u2069"],
)
def test_a_direction_mark_in_a_name_is_refused(mark: str):
    name = f"evil{mark}gpj.exe"
    assert name_problem(name) == (
        "no direction marks allowed (such as a right-to-left override): they change how a name reads"
    )
    with pytest.raises(ConfigError) as refused:
        parse_config({"name": name})
    assert set(refused.value.by_field()) == {"name"}
    for other in ("שלום עולם", "مرحبا", "日本語の実行", "run 🚀"):  # right-to-left scripts themselves still read
        assert name_problem(other) is None and parse_config({"name": other}).name == other


@pytest.mark.parametrize("separator", ["\u2028", "\u2029"])
def test_a_unicode_line_break_in_a_name_is_refused(separator: str):
    assert "no control characters" in name_problem(f"two{separator}lines")


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n", "---\n"])
def test_an_empty_config_file_is_refused(tmp_path: Path, text: str):
    path = tmp_path / "config.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match="config.yaml is empty"):
        load_config(path)
    path.write_text("{}\n")  # every default, written on purpose
    assert load_config(path) == RunConfig()
