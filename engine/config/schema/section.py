"""The base of every config section: a pydantic model that refuses unknown keys, infinite numbers and secrets.

It lives below engine.config because the sections of a training method live in the method's own package
(engine.training.methods), and engine.config composes RunConfig from them: both build on this module.
"""

from __future__ import annotations

import types
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from engine.config.schema.secrets import refuse_secrets

# Upper bound of counts (steps, rows): what the C integers of torch and the Trainer hold.
MAX_COUNT = 2**31 - 1


def advanced(**extra: Any) -> dict[str, Any]:
    """Schema extra that marks a field as advanced (collapsed in the studio form)."""
    return {"advanced": True, **extra}


def blank_is_none(value: str | None) -> str | None:
    """An optional text as a config keeps it: a blank one (a cleared form box) is none, the rest stripped."""
    return value.strip() or None if value is not None else None


MODEL_SOURCE = "model_source"
RUN_SOURCE = "run_source"


def names_model(**extra: Any) -> dict[str, Any]:
    """Schema extra that marks a field as naming a model to load (a hub id or a directory on the machine): the
    studio confines it as it does the base model's, and a public demo offers only its bundled models there."""
    return {MODEL_SOURCE: True, **extra}


def names_run(**extra: Any) -> dict[str, Any]:
    """Schema extra that marks a field as able to name a run of the workspace (its id, its directory or one of its
    checkpoints): the run's directory is written in its place when the run is created (engine.runs.lineage.pinned),
    the studio lists the workspace's runs there, and a public demo takes a visitor's own runs."""
    return {RUN_SOURCE: True, **extra}


class Section(BaseModel):
    """Base of every config section: unknown keys are errors, assignments are validated, numbers are finite and
    never true / false, and no text holds an access token (the config is saved and shown)."""

    model_config = ConfigDict(
        extra="forbid", validate_assignment=True, use_attribute_docstrings=False, allow_inf_nan=False
    )

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        """pydantic reads true as 1 for a number field: ``max_steps: true`` would train one step."""
        if isinstance(value, (bool, list)) and info.field_name is not None:
            kind = bool_as_number(cls.model_fields[info.field_name].annotation, value)
            if kind is not None:
                raise PydanticCustomError(kind, "true / false is not a number")
        return value

    @field_validator("*", mode="after")
    @classmethod
    def _no_secrets(cls, value: Any) -> Any:
        return refuse_secrets(value)

    def to_yaml_data(self) -> dict[str, Any]:
        """The section as its YAML file shows it (a section may leave out what reads back the same)."""
        return self.model_dump(mode="json")


def bool_as_number(annotation: Any, value: Any) -> str | None:
    """The pydantic error type ("int_type", "float_type") when ``value`` is, or a list of them holds, a boolean
    where ``annotation`` takes a number but no boolean; None when the value may stand."""
    return _bool_as_number(members_of(annotation), value)


def _bool_as_number(members: set[Any], value: Any) -> str | None:
    if isinstance(value, list):
        lists = [member for member in members if get_origin(member) in (list, tuple)]
        items = {found for member in lists for item in get_args(member) for found in members_of(item)}
        kinds = (_bool_as_number(items, item) for item in value) if items else ()
        return next((kind for kind in kinds if kind is not None), None)
    if not isinstance(value, bool) or bool in members or Any in members:
        return None
    if int in members:
        return "int_type"
    return "float_type" if float in members else None


def members_of(annotation: Any) -> set[Any]:
    """The types an annotation takes, unions and Literal values unfolded (``int | None``: {int, NoneType})."""
    if annotation is Ellipsis:
        return set()
    if get_origin(annotation) in (Union, types.UnionType):
        return {member for arg in get_args(annotation) for member in members_of(arg)}
    if get_origin(annotation) is Literal:
        return {type(value) for value in get_args(annotation)}
    if getattr(annotation, "__metadata__", None) is not None:  # Annotated[int, ...]: the type inside
        return members_of(get_args(annotation)[0])
    return {annotation}
