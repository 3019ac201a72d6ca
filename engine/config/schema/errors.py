"""Readable validation errors that name the field: ``train.learning_rate: must be > 0``."""

from __future__ import annotations

import difflib
import json
import types
from dataclasses import dataclass
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a config: the dotted field path ('' for the whole config) and what is wrong."""

    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}" if self.field else self.message


class ConfigError(ValueError):
    """A config that cannot run; ``problems`` lists every field at fault."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        super().__init__("\n".join(str(problem) for problem in problems))

    def by_field(self) -> dict[str, str]:
        """Problems keyed by field path, for showing each next to its widget."""
        return {problem.field: problem.message for problem in self.problems}


UNKNOWN_KEY, SUGGESTION = "unknown key", " (did you mean {name}?)"
# A mapping's key at fault rather than its value: another of these messages about the key (the studio says both).
ABOUT_KEY = "the key {problem}"
# What each kind of pydantic error says, with its context's values in braces (the studio translates these).
MESSAGES = {
    "greater_than": "must be > {gt}",
    "greater_than_equal": "must be >= {ge}",
    "less_than": "must be < {lt}",
    "less_than_equal": "must be <= {le}",
    "literal_error": "must be one of {expected}",
    "missing": "is required",
    "int_parsing": "must be a whole number",
    "int_from_float": "must be a whole number",
    "int_type": "must be a whole number",
    "float_parsing": "must be a number",
    "float_type": "must be a number",
    "bool_parsing": "must be true or false",
    "bool_type": "must be true or false",
    "string_too_short": "must not be empty",
    "string_type": "must be text",
    "string_unicode": "must be valid Unicode text",
    "list_type": "must be a list",
    "dict_type": "must be a mapping of keys to values",
    "model_type": "must be a section of keys and values",
    "finite_number": "must be a finite number",
    "too_short": "must list at least {min_length}",
    "too_long": "must list at most {max_length}",
}


def _known_keys(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """The field names valid at ``loc`` (the parent of an unknown key), for 'did you mean' hints."""
    current: Any = model
    tagged = False  # after a union field, pydantic names the member ("list") before going inside it
    for part in loc:
        if isinstance(part, int) or (tagged and isinstance(part, str)):  # a list item (data.path.0), a member
            tagged = False
            continue
        field = getattr(current, "model_fields", {}).get(part)
        if field is None:
            return []
        current, tagged = _model_in(field.annotation), _is_union(field.annotation)
    return list(getattr(current, "model_fields", {}))


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model an annotation holds: itself, or the one inside a list or a union (data.path's entries)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _describe(error: dict[str, Any], model: type[BaseModel]) -> str:
    """Turn one pydantic error into a short sentence a user can act on."""
    kind, ctx = error["type"], error.get("ctx", {})
    if kind in MESSAGES:
        return MESSAGES[kind].format(**ctx)
    if kind == "extra_forbidden":
        key = str(error["loc"][-1])
        close = difflib.get_close_matches(key, _known_keys(model, tuple(error["loc"][:-1])), n=1)
        return UNKNOWN_KEY + (SUGGESTION.format(name=close[0]) if close else "")
    if kind in ("value_error", "assertion_error") and "error" in ctx:
        # A validator's own words (a template of the check that raised it), without the "Value error, " that
        # pydantic puts before them in ``msg``: the studio reads them back into their template.
        return str(ctx["error"])
    message = str(error.get("msg", kind))
    return message.removeprefix("Value error, ")


def _is_union(annotation: Any) -> bool:
    """Whether pydantic tags this field's errors by member type (a union of two or more non-None types)."""
    if get_origin(annotation) not in (Union, types.UnionType):
        return False
    return len([arg for arg in get_args(annotation) if arg is not type(None)]) > 1


def _path_part(part: Any) -> str:
    """One step of a dotted path; a key that would read ambiguously (empty, with a dot) is quoted as JSON."""
    text = str(part)
    return json.dumps(text, ensure_ascii=False) if not text or "." in text or text.startswith('"') else text


def _field_path(loc: tuple[Any, ...], model: type[BaseModel]) -> tuple[str, bool]:
    """The dotted field path of an error's ``loc`` without pydantic's tags, and whether a mapping's key is at fault.

    A union field's errors carry the member type after the field name ("str", "list[str]"); a mapping's bad
    key is followed by "[key]". Only those positions are dropped, so a user's key named "strategy" or "[key]"
    stays in the path.
    """
    path: list[str] = []
    current: Any = model
    expect = ""  # "member" after a union field, "key" after a mapping field, "tag" after that key
    about_key = False
    for part in loc:
        if (expect == "member" and isinstance(part, str)) or (expect == "tag" and part == "[key]"):
            about_key = expect == "tag"
            expect = ""
            continue
        path.append(_path_part(part))
        if expect == "key":
            current, expect = None, "tag"
            continue
        field = getattr(current, "model_fields", {}).get(part) if isinstance(part, str) else None
        annotation = field.annotation if field is not None else None
        expect = "member" if _is_union(annotation) else "key" if get_origin(annotation) is dict else ""
        current = annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None
    return ".".join(path), about_key


def problems_from_validation(exc: ValidationError, model: type[BaseModel]) -> list[Problem]:
    """Convert a pydantic ValidationError into Problems, one per distinct field."""
    problems: list[Problem] = []
    seen: set[str] = set()
    for error in exc.errors():
        field, about_key = _field_path(tuple(error["loc"]), model)
        described = _describe(error, model)
        for message in (ABOUT_KEY.format(problem=described) if about_key else described).split("\n"):
            if not field and ": " in message:
                # Cross-field checks raise "section.field: message" lines so the studio can place each one.
                problem = Problem(*message.split(": ", 1))
            else:
                problem = Problem(field, message)
            if problem.field not in seen:
                seen.add(problem.field)
                problems.append(problem)
    return problems
