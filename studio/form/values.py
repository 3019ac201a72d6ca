"""Widget values and config values, both ways: what the browser sends (numbers, text, booleans) read into a
config, and a config shown as widget values. Each conversion follows the field's FieldSpec (studio.form.schema), so
a field added to a config section gets its round trip without another edit. Pure: no Gradio.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import yaml
from pydantic import BaseModel

from engine.api import MESSAGES, ConfigError, Problem, RunConfig, parse_config, problems_from_validation
from studio.form.schema import FieldSpec, leaf_specs
from studio.form.yaml_lists import LIST_MESSAGES, datasets_text, entry_data, flow_yaml, read_datasets, yaml_list_text

# What the form says where a box's text cannot be read, by name: English with ``{placeholders}``, beside the checks
# that say it (a dataset list's in studio.form.yaml_lists). The studio says it in the page's language as it says the
# engine's checks (studio.i18n.catalog.check_words, keys ``check.<name>``); a number or a checkbox that cannot be read
# is said in pydantic's words (engine.config.schema.errors.MESSAGES), and a JSON error keeps the parser's own detail.
FORM_MESSAGES = {
    "form_json_invalid": "not valid JSON: {error}",
    "form_json_unusable": "not a usable JSON object",
    "form_mapping_line": "line {number}: write key=value",
    "form_pick_from_list": "pick values from the list",
    "form_yaml_invalid": "not a valid YAML value",
    **LIST_MESSAGES,
}

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
        return datasets_text([entry_data(item) for item in value])
    if spec.kind == "yaml":
        if isinstance(value, list):
            return yaml_list_text([entry_data(item) for item in value])
        return flow_yaml(entry_data(value))
    return str(value)


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
            raise ValueError(MESSAGES["float_parsing"]) from None
    if spec.kind == "int" and isinstance(raw, float) and math.isfinite(raw) and raw.is_integer():
        return int(raw)  # the browser sends 3.0 for 3; a real fraction is left for pydantic to refuse
    return raw


def _mapping(text: str) -> dict[str, str]:
    """``key=value`` lines (or a JSON object: text that starts with ``{`` and parses is one) -> dict."""
    text = text.strip()
    if text.startswith("{"):
        try:
            loaded = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(FORM_MESSAGES["form_json_invalid"].format(error=exc.msg)) from None
        except (RecursionError, ValueError):  # nested past the recursion limit, a number of 5000 digits
            raise ValueError(FORM_MESSAGES["form_json_unusable"]) from None
        return {str(key): str(value) for key, value in loaded.items()}
    result = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise ValueError(FORM_MESSAGES["form_mapping_line"].format(number=number))
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
    raise ValueError(MESSAGES["bool_parsing"])


def _picked(raw: Any) -> list[Any]:
    """A multiselect's value as a list: nothing picked is [], one value sent as text a list of one (the schema
    then checks each value)."""
    if raw is None or raw == "":
        return []
    if isinstance(raw, str):
        return [raw]
    if isinstance(raw, (list, tuple)):
        return list(raw)
    raise ValueError(FORM_MESSAGES["form_pick_from_list"])


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
        if not text.strip() and isinstance(spec.default, list):
            return []  # a list's box shows none as nothing (yaml_list_text): YAML would read it as null
        try:
            return yaml.safe_load(text)
        except (yaml.YAMLError, RecursionError):
            raise ValueError(FORM_MESSAGES["form_yaml_invalid"]) from None
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
