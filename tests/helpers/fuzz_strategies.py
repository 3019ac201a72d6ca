"""Hypothesis strategies for config fuzzing: mappings that mix valid values with everything a file or a browser
could send instead (wrong types, out-of-range and non-finite numbers, unknown keys, huge and odd text).

Valid values are read from the RunConfig schema (choices, bounds), so a field added to the config is fuzzed too.
"""

from __future__ import annotations

import json
import math
import re
import tempfile
import types
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

import annotated_types as at
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.configuration import set_hypothesis_home_dir
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from engine.config import RunConfig

# Hypothesis caches (unicode tables, constants) go to the temp dir, not into the repository (.hypothesis/).
set_hypothesis_home_dir(Path(tempfile.gettempdir()) / "hypothesis-tuning-studio")


def fuzz(max_examples: int) -> settings:
    """Settings for these tests: no example database (it would be written into the repository), no deadline
    (the machine is shared and loaded)."""
    return settings(
        max_examples=max_examples,
        database=None,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )


SPECIAL_TEXT = [
    "",
    " ",
    "nan",
    "-inf",
    "1e999",
    "-1",
    "0x10",
    "3.5",
    "auto",
    "../../etc/passwd",
    "/etc/passwd",
    "~/x.jsonl",
    "a\x00b",
    "\ud800",  # a lone surrogate: not encodable as UTF-8
    "名前 🚀 \u202e",
    "hf_" + "A1b2" * 9,  # shaped like a Hugging Face token
    "q_proj, v_proj",
    "x" * 100_000,
    '{"a": ' + "[" * 100_000,  # JSON nested past Python's recursion limit
    "[" * 100_000,
]

odd_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(10**40), max_value=10**40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([math.nan, math.inf, -math.inf, 1e308, -0.0, 2**31, 2**63]),
    st.text(max_size=12),
    st.sampled_from(SPECIAL_TEXT),
)
odd_values = st.one_of(
    odd_scalars,
    st.lists(odd_scalars, max_size=3),
    st.dictionaries(st.text(max_size=6), odd_scalars, max_size=3),
)


_PATH_PART = re.compile(r'"(?:[^"\\]|\\.)*"|[^.]+')


def _strip_none(annotation: Any) -> tuple[Any, bool]:
    if get_origin(annotation) in (Union, types.UnionType) and type(None) in get_args(annotation):
        rest = [arg for arg in get_args(annotation) if arg is not type(None)]
        return (rest[0] if len(rest) == 1 else Union[tuple(rest)]), True  # noqa: UP007
    return annotation, False


def _bounds(info: FieldInfo) -> tuple[float | None, float | None]:
    low = high = None
    for item in info.metadata:
        if isinstance(item, (at.Ge, at.Gt)):
            low = getattr(item, "ge", None) if isinstance(item, at.Ge) else item.gt
        elif isinstance(item, (at.Le, at.Lt)):
            high = getattr(item, "le", None) if isinstance(item, at.Le) else item.lt
    return low, high


def valid_value(info: FieldInfo) -> st.SearchStrategy[Any]:
    """Values of the field's type within its bounds (still not always valid: cross-field rules apply)."""
    annotation, optional = _strip_none(info.annotation)
    low, high = _bounds(info)
    if get_origin(annotation) is Literal:
        strategy: st.SearchStrategy[Any] = st.sampled_from(get_args(annotation))
    elif annotation is bool:
        strategy = st.booleans()
    elif annotation is int:
        strategy = st.integers(min_value=None if low is None else math.ceil(low), max_value=high)
    elif annotation is float:
        strategy = st.floats(min_value=low, max_value=high, allow_nan=False, allow_infinity=False)
    elif annotation is str:
        strategy = st.text(min_size=1, max_size=20)
    elif get_origin(annotation) is dict:
        strategy = st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=2)
    else:  # list[str], or str | list[str]
        strategy = st.one_of(st.sampled_from(["auto", "all-linear", "q_proj,v_proj"]), st.lists(st.text(max_size=8)))
    return st.one_of(st.none(), strategy) if optional else strategy


def _model(info: FieldInfo) -> type[BaseModel] | None:
    annotation = info.annotation
    return annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None


@st.composite
def section_data(draw: st.DrawFn, model: type[BaseModel], odd_in_ten: int | None = None) -> dict[str, Any]:
    """A mapping for ``model``: some of its fields, nested sections, unknown keys; ``odd_in_ten`` of ten values
    are odd ones (drawn once per example when not given: none, a few, or many, so valid configs occur too)."""
    odd = draw(st.sampled_from([0, 1, 4])) if odd_in_ten is None else odd_in_ten

    def is_odd() -> bool:
        return draw(st.integers(0, 9)) < odd

    data: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        if not draw(st.booleans()):
            continue
        nested = _model(info)
        if is_odd():
            data[name] = draw(odd_values)
        else:
            data[name] = draw(section_data(nested, odd) if nested is not None else valid_value(info))
    if is_odd():
        data[draw(st.text(max_size=10))] = draw(odd_values)  # an unknown key, or by chance a known one
    return data


config_data = section_data(RunConfig)


def _split_path(field: str) -> list[str]:
    """The steps of a dotted path; quoted steps (JSON strings) may hold dots."""
    return [json.loads(part) if part.startswith('"') else part for part in _PATH_PART.findall(field)]


def names_a_field(field: str, data: Any, model: type[BaseModel] | None = RunConfig) -> bool:
    """Whether a dotted problem path leads somewhere: through schema fields, keys of the input, list indices."""
    if not field:
        return False
    node = data
    for part in _split_path(field):
        fields = model.model_fields if model is not None else {}
        keys = {str(key): value for key, value in node.items()} if isinstance(node, dict) else {}
        if part in fields or part in keys:
            model = _model(fields[part]) if part in fields else None
            node = keys.get(part)
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            model, node = None, node[int(part)]
        elif isinstance(node, str) and part.isdigit():  # "a, b" becomes a list before its items are checked
            model, node = None, None
        else:
            return False
    return True
