"""Lists of config sections as the form's text boxes show them: data.path's datasets (one path, or a YAML list of
datasets on one line) and a method's rewards (one flow mapping per line). Pure: no Gradio."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import yaml
from pydantic import BaseModel

# How a YAML list (or one mapping) of datasets starts in the data.path box; anything else is one path or hub id.
_YAML_STARTS = ("[", "{", "- ")
# What the data.path box says when its YAML cannot be read (one of studio.form.values.FORM_MESSAGES); the braces are
# YAML to write, not placeholders.
LIST_MESSAGES = {
    "form_datasets_unreadable": "not a valid YAML list of datasets: write [{path: FILE, weight: 2}, {path: FILE}]",
}


def yaml_list_text(entries: list[Any]) -> str:
    """A list of sections (grpo.rewards) as its box shows it: one flow mapping per line, ``- {kind: regex, ...}``;
    nothing for none (an empty box reads back as no entries, ``studio.form.values.from_widget``)."""
    return "\n".join(f"- {flow_yaml(entry)}" for entry in entries)


def flow_yaml(value: Any) -> str:
    """One value as one line of flow-style YAML."""
    return (
        yaml.safe_dump(value, default_flow_style=True, sort_keys=False, width=2**31 - 1)
        .strip()
        .removesuffix("...")
        .strip()
    )


def entry_data(item: Any) -> Any:
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
        raise ValueError(LIST_MESSAGES["form_datasets_unreadable"]) from None
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
