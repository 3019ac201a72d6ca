"""The config form's model: one FieldSpec per leaf field of RunConfig, and the conversions both ways.

Everything here is read from the pydantic schema (annotation, description, bounds, ``advanced`` marker), so a
field added to a config section gets its widget, label, help text, bounds and round trip without another edit.
Widget values are what the browser sends (numbers, text, booleans); config values are what RunConfig holds.
This module is pure: no Gradio, so the conversions are tested without building a page.
"""

from __future__ import annotations

import contextlib
import json
import math
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import annotated_types as at
import yaml
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from engine.api import ConfigError, Problem, RunConfig, parse_config, problems_from_validation

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
    max_length: int | None = None
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


# How a YAML list (or one mapping) of datasets starts in the data.path box; anything else is one path or hub id.
_YAML_STARTS = ("[", "{", "- ")


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


# --- config value -> widget value -------------------------------------------------------------------------


def to_widget(spec: FieldSpec, value: Any) -> Any:
    """The widget value that shows a config value."""
    if spec.kind in ("int", "float") and spec.optional:
        return "" if value is None else str(value)  # edited as text, see text_number
    if spec.kind in ("int", "float", "bool", "choice"):
        return "" if spec.kind == "choice" and value is None else value
    if spec.kind == "choices":
        return list(value or [])
    if value is None:
        return ""
    if spec.kind in ("list", "modules"):
        return ", ".join(map(str, value)) if isinstance(value, list) else str(value)  # names, or GPU indices
    if spec.kind == "mapping":
        return "\n".join(f"{key}={item}" for key, item in value.items())
    if spec.kind == "datasets" and isinstance(value, list):
        return datasets_text([_entry_data(item) for item in value])
    if spec.kind == "yaml":
        if isinstance(value, list):
            return yaml_list_text([_entry_data(item) for item in value])
        return _flow_yaml(_entry_data(value))
    return str(value)


def yaml_list_text(entries: list[Any]) -> str:
    """A list of sections (grpo.rewards) as its box shows it: one flow mapping per line, ``- {kind: regex, ...}``;
    ``[]`` for none."""
    return "\n".join(f"- {_flow_yaml(entry)}" for entry in entries) if entries else "[]"


def _flow_yaml(value: Any) -> str:
    """One value as one line of flow-style YAML."""
    return (
        yaml.safe_dump(value, default_flow_style=True, sort_keys=False, width=2**31 - 1)
        .strip()
        .removesuffix("...")
        .strip()
    )


def _entry_data(item: Any) -> Any:
    """A dataset (or reward) of a list as the YAML shows it: what differs from the defaults (its path, or its
    kind, always)."""
    return item.model_dump(mode="json", exclude_defaults=True) if isinstance(item, BaseModel) else item


def datasets_text(entries: list[dict[str, Any]]) -> str:
    """A list of datasets as the one line of YAML the data.path box shows: ``[{path: a.jsonl, weight: 2.0}, ...]``."""
    return yaml.safe_dump(entries, default_flow_style=True, sort_keys=False, width=2**31 - 1).strip()


def read_datasets(text: str) -> str | list[Any]:
    """The data.path box's text as the config reads it: one path or hub id, or the YAML list of datasets it holds
    (``[{path: a.jsonl}, {path: b.jsonl, weight: 2}]``, or one ``{path: ...}`` mapping); ValueError if unreadable."""
    if not text.lstrip().startswith(_YAML_STARTS):
        return text  # as a text field reads it
    try:
        value = yaml.safe_load(text)
    except (yaml.YAMLError, RecursionError):
        raise ValueError("not a valid YAML list of datasets: write [{path: FILE, weight: 2}, {path: FILE}]") from None
    return value if isinstance(value, (str, list)) else [value]


def dataset_paths(raw: Any) -> list[str] | None:
    """Every path a data.path widget value names: the one path, or each dataset's of a YAML list ([] when empty);
    None when the value cannot be read or a dataset's path is not text (the config check refuses it)."""
    try:
        value = read_datasets("" if raw is None else str(raw))
    except ValueError:
        return None
    if isinstance(value, str):
        return [value] if value.strip() else []
    paths = [item.get("path") if isinstance(item, dict) else item for item in value]
    return paths if all(isinstance(path, str) for path in paths) else None


def map_dataset_paths(raw: Any, change: Callable[[str], str]) -> Any:
    """A data.path widget value with each path it names passed through ``change`` (one path, or each dataset's of a
    YAML list, written back as YAML); a value that cannot be read is returned as it is."""
    try:
        value = read_datasets("" if raw is None else str(raw))
    except ValueError:
        return raw
    if isinstance(value, str):
        return change(value) if value.strip() else raw
    if not all(isinstance(item, (str, dict)) for item in value):
        return raw
    items = [{"path": item} if isinstance(item, str) else item for item in value]
    with contextlib.suppress(yaml.YAMLError, RecursionError):  # values nested deeper than a dump can go
        return datasets_text(
            [{**item, "path": change(item["path"])} if isinstance(item.get("path"), str) else item for item in items]
        )
    return raw


def config_to_values(config: BaseModel, specs: list[FieldSpec] | None = None) -> dict[str, Any]:
    """Widget values (path -> value) that show ``config``: the config -> form direction."""
    values = {}
    for spec in specs if specs is not None else leaf_specs(type(config)):
        value: Any = config
        for part in spec.path.split("."):
            value = getattr(value, part)
        values[spec.path] = to_widget(spec, value)
    return values


def default_values(model: type[BaseModel] = RunConfig) -> dict[str, Any]:
    """Widget values of a default config."""
    return config_to_values(model())


# --- widget value -> config value -------------------------------------------------------------------------


def _number(spec: FieldSpec, raw: Any) -> Any:
    if isinstance(raw, str):
        raw = raw.strip()
        if not raw:
            return None
        try:
            raw = float(raw)
        except ValueError:
            raise ValueError("must be a number") from None
    if spec.kind == "int" and isinstance(raw, float) and math.isfinite(raw) and raw.is_integer():
        return int(raw)  # the browser sends 3.0 for 3; a real fraction is left for pydantic to refuse
    return raw


def _mapping(text: str) -> dict[str, str]:
    """``key=value`` lines (or a JSON object) -> dict."""
    text = text.strip()
    if text.startswith("{"):
        try:
            loaded = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"not valid JSON: {exc.msg}") from None
        except (RecursionError, ValueError):  # nested past the recursion limit, a number of 5000 digits
            raise ValueError("not a usable JSON object") from None
        if not isinstance(loaded, dict):
            raise ValueError("write key=value lines or a JSON object")
        return {str(key): str(value) for key, value in loaded.items()}
    result = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"line {number}: write key=value")
        result[key.strip()] = value.strip()
    return result


_TRUE, _FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off", "")


def _boolean(raw: Any) -> bool:
    """A checkbox's value. A request may send text: "false" must not read as true (as ``bool`` would have it),
    since a checkbox such as trust_remote_code decides whether code runs."""
    if raw is None or isinstance(raw, bool):
        return bool(raw)
    if isinstance(raw, int) and raw in (0, 1):
        return bool(raw)
    if isinstance(raw, str) and raw.strip().lower() in _TRUE + _FALSE:
        return raw.strip().lower() in _TRUE
    raise ValueError("must be true or false")


def _picked(raw: Any) -> list[Any]:
    """A multiselect's value as a list: nothing picked is [], one value sent as text a list of one (the schema
    then checks each value)."""
    if raw is None or raw == "":
        return []
    if isinstance(raw, str):
        return [raw]
    if isinstance(raw, (list, tuple)):
        return list(raw)
    raise ValueError("pick values from the list")


def from_widget(spec: FieldSpec, raw: Any) -> Any:
    """The config value of a widget value; raises ValueError with a short message if it cannot be read."""
    if spec.kind in ("int", "float"):
        return _number(spec, raw)
    if spec.kind == "bool":
        return _boolean(raw)
    if spec.kind == "choice":
        return None if spec.optional and raw in ("", None) else raw
    if spec.kind == "choices":
        return _picked(raw)
    text = "" if raw is None else str(raw)
    if spec.kind == "list":
        return [item.strip() for item in text.split(",") if item.strip()]
    if spec.kind == "mapping":
        return _mapping(text)
    if not text.strip() and spec.optional:
        return None
    if spec.kind == "datasets":
        return read_datasets(text)
    if spec.kind == "yaml":
        try:
            return yaml.safe_load(text)
        except (yaml.YAMLError, RecursionError):
            raise ValueError("not a valid YAML value") from None
    return text.strip() if spec.kind == "modules" else text


def values_to_data(values: Mapping[str, Any], specs: list[FieldSpec]) -> tuple[dict[str, Any], list[Problem]]:
    """The nested mapping the widget values stand for, and the widgets whose text could not be read.

    Paths missing from ``values`` are left out (the config's default applies).
    """
    data: dict[str, Any] = {}
    problems = []
    for spec in specs:
        if spec.path not in values:
            continue
        try:
            value = from_widget(spec, values[spec.path])
        except ValueError as exc:
            problems.append(Problem(spec.path, str(exc)))
            continue
        *parents, last = spec.path.split(".")
        node = data
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    return data, problems


def values_to_config(values: Mapping[str, Any], model: type[BaseModel] = RunConfig) -> BaseModel:
    """Validate widget values (path -> value) into a config, or raise ConfigError naming every bad field."""
    data, problems = values_to_data(values, leaf_specs(model))
    try:
        config = parse_config(data) if model is RunConfig else _validate(model, data)
    except ConfigError as exc:
        unreadable = {problem.field for problem in problems}
        raise ConfigError(problems + [p for p in exc.problems if p.field not in unreadable]) from None
    if problems:
        raise ConfigError(problems)
    return config


def _validate(model: type[BaseModel], data: dict[str, Any]) -> BaseModel:
    from pydantic import ValidationError

    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(problems_from_validation(exc, model)) from None
