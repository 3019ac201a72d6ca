"""What the Train form sets when a method is picked (or its own numbers change): the fields of other sections whose
value the method's rules refuse, made to fit as the method's record says (engine.training.methods.base.Method.fits).
GRPO, picked with the demo preset's eval batch size of 50, left "must be a multiple of grpo.num_generations (4)" in the
collapsed Advanced group of the training section, where nobody saw it. No Gradio here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from engine.api import METHODS, RunConfig
from studio.form.schema import leaf_specs
from studio.form.values import to_widget, values_to_data
from studio.i18n.catalog import SOURCE, key, text
from studio.i18n.widgets import field_key

FITTED = key("train.method.fitted")


def loose_config(values: Mapping[str, Any]) -> RunConfig | None:
    """The form's config with each section validated on its own and the rules across them left unchecked (they are
    what a fit answers), or None when a field cannot be read or a section is invalid."""
    data, problems = values_to_data(values, leaf_specs())
    if problems or data.get("method") not in METHODS:
        return None
    parts: dict[str, Any] = {}
    for name, info in RunConfig.model_fields.items():
        section = info.annotation
        if not (isinstance(section, type) and issubclass(section, BaseModel)):
            parts[name] = data.get(name, info.get_default(call_default_factory=True))
            continue
        try:
            parts[name] = section.model_validate(data.get(name, {}))
        except ValidationError:
            return None
    return RunConfig.model_construct(**parts)


def fitted_values(values: Mapping[str, Any], lang: str = SOURCE) -> tuple[dict[str, Any], str]:
    """The widget values (path -> value) that the form's method changes so that its rules take the form, and a note
    in ``lang`` that names each change ("" when there is none)."""
    config = loose_config(values)
    if config is None:
        return {}, ""
    specs = {spec.path: spec for spec in leaf_specs()}
    changes = {path: value for path, value in METHODS[config.method].fitted(config).items() if path in specs}
    if not changes:
        return {}, ""
    shown = "; ".join(
        f"{text(field_key(path, 'label'), lang)} {_value(config, path)} → {value}" for path, value in changes.items()
    )
    note = text(FITTED, lang, method=config.method, changes=shown)
    return {path: to_widget(specs[path], value) for path, value in changes.items()}, note


def _value(config: RunConfig, path: str) -> Any:
    """The value at a dotted path of the config."""
    value: Any = config
    for part in path.split("."):
        value = getattr(value, part)
    return value
