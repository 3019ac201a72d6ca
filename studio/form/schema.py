"""The config form's model: one FieldSpec per leaf field of RunConfig (or of any pydantic model, such as the chat's
sampling settings), read from the pydantic schema.

Everything here is read from the schema (annotation, description, bounds, ``advanced`` marker), so a field added to
a config section gets its widget, label, help text and bounds without another edit. The conversions between widget
values and config values are in studio.form.values; the text of a list of datasets or rewards in
studio.form.yaml_lists. This module is pure: no Gradio, so it is tested without building a page.
"""

from __future__ import annotations

import types
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import annotated_types as at
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from engine.api import RunConfig

# Words that a plain capitalisation would spell wrong in a label.
_WORDS = {"lr": "LR", "dora": "DoRA", "rslora": "rsLoRA", "neftune": "NEFTune", "num": "number of", "r": "rank (r)"}


@dataclass(frozen=True)
class FieldSpec:
    """One leaf field of the config, as the form needs it."""

    path: str  # dotted path in the config, e.g. "train.learning_rate"
    kind: str  # int, float, choice, choices, bool, text, list, modules, datasets, mapping, yaml
    label: str
    help: str
    default: Any
    optional: bool = False  # None is allowed: an empty widget means None
    advanced: bool = False
    choices: tuple[Any, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    max_length: int | None = None  # characters, for a text field (a list's max_length counts items, not characters)
    exclusive: tuple[bool, bool] = (False, False)  # (minimum, maximum) excluded, for float gt / lt bounds

    @property
    def text_number(self) -> bool:
        """An optional number, edited in a textbox: Gradio 6's Number shows None as 0 (its frontend does
        ``value ??= 0``), so an empty field could not mean None there."""
        return self.kind in ("int", "float") and self.optional

    def bounds_text(self) -> str:
        """The bounds in words, e.g. '>= 1, <= 1024' ('' when unbounded)."""
        parts = []
        if self.minimum is not None:
            parts.append(f"{'>' if self.exclusive[0] else '>='} {_number_text(self.minimum)}")
        if self.maximum is not None:
            parts.append(f"{'<' if self.exclusive[1] else '<='} {_number_text(self.maximum)}")
        return ", ".join(parts)


@dataclass(frozen=True)
class SectionSpec:
    """A pydantic model inside the config (a section, or a nested group such as data.columns)."""

    path: str  # "" for the root
    title: str
    help: str
    children: list[FieldSpec | SectionSpec] = field(default_factory=list)

    def leaves(self) -> list[FieldSpec]:
        """Every leaf field below this section, in schema order."""
        out: list[FieldSpec] = []
        for child in self.children:
            out.extend(child.leaves() if isinstance(child, SectionSpec) else [child])
        return out


def _number_text(value: float) -> str:
    return f"{int(value):,}" if float(value).is_integer() else f"{value:g}"


def humanise(name: str) -> str:
    """A label from a field name: ``per_device_batch_size`` -> ``Per device batch size``."""
    text = " ".join(_WORDS.get(word, word) for word in name.split("_"))
    return text[:1].upper() + text[1:]


def _model_class(annotation: Any) -> type[BaseModel] | None:
    return annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None


def _strip_none(annotation: Any) -> tuple[Any, bool]:
    """``X | None`` -> (X, True); anything else -> (annotation, False)."""
    if get_origin(annotation) in (Union, types.UnionType):
        args = [arg for arg in get_args(annotation) if arg is not type(None)]
        if len(args) < len(get_args(annotation)):
            return (args[0] if len(args) == 1 else Union[tuple(args)]), True  # noqa: UP007
    return annotation, False


def _kind(annotation: Any) -> tuple[str, tuple[Any, ...]]:
    """The widget kind of a (non-None) annotation, and its choices for a Literal."""
    origin = get_origin(annotation)
    if origin is Literal:
        return "choice", get_args(annotation)
    if annotation is bool:
        return "bool", ()
    if annotation is int:
        return "int", ()
    if annotation is float:
        return "float", ()
    if annotation is str:
        return "text", ()
    if origin is list and get_origin(get_args(annotation)[0]) is Literal:  # several of fixed values (report_to)
        return "choices", get_args(get_args(annotation)[0])
    if origin is list:  # names written as "a, b"; a list of sections (grpo.rewards) as YAML
        return ("yaml" if _model_class(get_args(annotation)[0]) else "list"), ()
    if origin is dict:
        return "mapping", ()
    if origin in (Union, types.UnionType) and set(get_args(annotation)) == {str, list[str]}:
        return "modules", ()  # a keyword (auto) or a list of names, both written as text
    if origin in (Union, types.UnionType) and _is_path_or_models(annotation):
        return "datasets", ()  # one path as text, or a list of datasets as a YAML list (data.path)
    return "yaml", ()  # anything else is edited as a YAML value


def _bare(annotation: Any) -> Any:
    """``Annotated[X, ...]`` -> X."""
    return get_args(annotation)[0] if get_origin(annotation) is Annotated else annotation


def _is_path_or_models(annotation: Any) -> bool:
    """Whether a union is text or a list of sections, as data.path is (a path, or a list of datasets)."""
    members = [_bare(arg) for arg in get_args(annotation)]
    lists = [member for member in members if get_origin(member) is list]
    return str in members and len(members) == 2 and len(lists) == 1 and _model_class(get_args(lists[0])[0]) is not None


def _bounds(info: FieldInfo, kind: str) -> tuple[float | None, float | None, int | None, tuple[bool, bool]]:
    """Widget minimum / maximum from ge/gt/le/lt, whether each is exclusive, and a string's max length.

    Exclusive bounds of ints are tightened by one; a float widget cannot say "greater than", so it gets the
    boundary itself and pydantic reports the boundary value next to the field.
    """
    low = high = length = None
    low_open = high_open = False
    step = 1 if kind == "int" else 0
    for item in info.metadata:
        if isinstance(item, at.Ge):
            low = item.ge
        elif isinstance(item, at.Gt):
            low, low_open = item.gt + step, not step
        elif isinstance(item, at.Le):
            high = item.le
        elif isinstance(item, at.Lt):
            high, high_open = item.lt - step, not step
        elif isinstance(item, at.MaxLen):
            length = item.max_length
    return low, high, length, (low_open, high_open)


def _default(info: FieldInfo) -> Any:
    return info.get_default(call_default_factory=True)


def _is_advanced(info: FieldInfo) -> bool:
    extra = info.json_schema_extra
    return isinstance(extra, dict) and bool(extra.get("advanced"))


def schema_tree(
    model: type[BaseModel] = RunConfig, path: str = "", title: str = "", help_text: str = ""
) -> SectionSpec:
    """Walk a pydantic model's fields recursively into sections and leaf FieldSpecs."""
    section = SectionSpec(path, title, help_text)
    for name, info in model.model_fields.items():
        child_path = f"{path}.{name}" if path else name
        annotation, optional = _strip_none(info.annotation)
        nested = _model_class(annotation)
        if nested is not None:
            section.children.append(schema_tree(nested, child_path, humanise(name), info.description or ""))
            continue
        kind, choices = _kind(annotation)
        low, high, length, exclusive = _bounds(info, kind)
        # pydantic's max_length of a list counts its items: the box that holds the list as text takes any length.
        length = length if kind == "text" else None
        spec = FieldSpec(
            path=child_path,
            kind=kind,
            label=humanise(name),
            help=info.description or "",
            default=_default(info),
            optional=optional,
            advanced=_is_advanced(info),
            choices=choices,
            minimum=low,
            maximum=high,
            max_length=length,
            exclusive=exclusive,
        )
        section.children.append(spec)
    return section


def leaf_specs(model: type[BaseModel] = RunConfig) -> list[FieldSpec]:
    """Every leaf field of the model, in schema order."""
    return schema_tree(model).leaves()
