"""``--set KEY=VALUE`` (engine.cli.overrides) in process: how a value is typed by its field, and what is refused
with the key named."""

from __future__ import annotations

from typing import Any

import pytest

from engine.cli.overrides import apply_overrides, parse_overrides
from engine.config import ConfigError, RunConfig, parse_config
from engine.sweeps.config import SweepConfig


def overridden(*items: str, data: dict[str, Any] | None = None) -> RunConfig:
    return parse_config(apply_overrides(data or {}, parse_overrides(list(items)), RunConfig))


@pytest.mark.parametrize(
    ("item", "field", "expected"),
    [
        ("train.max_steps=5", ("train", "max_steps"), 5),
        ("train.learning_rate=3e-4", ("train", "learning_rate"), 3e-4),  # YAML 1.1 reads text; the field a number
        ("train.learning_rate=1", ("train", "learning_rate"), 1.0),
        ("train.packing=true", ("train", "packing"), True),
        ("train.padding_free=on", ("train", "padding_free"), "on"),  # YAML's boolean, the field's word
        ("name=2024", ("name",), "2024"),
        ("name=my run # 1", ("name",), "my run # 1"),  # a text field takes the text as written
        ("name='quoted'", ("name",), "quoted"),
        ("name=null", ("name",), None),
        ("model.init_from=", ("model", "init_from"), None),
        ("adapter.target_modules=[q_proj, v_proj]", ("adapter", "target_modules"), ["q_proj", "v_proj"]),
        ("adapter.target_modules=all-linear", ("adapter", "target_modules"), "all-linear"),
        ("launch.devices=[0, 1]", ("launch", "devices"), [0, 1]),
    ],
)
def test_a_value_is_typed_by_its_field(item: str, field: tuple[str, ...], expected: Any):
    value: Any = overridden(item)
    for part in field:
        value = getattr(value, part)
    assert value == expected and type(value) is type(expected)


def test_later_overrides_win_and_the_file_is_not_changed():
    data = {"train": {"max_steps": 9, "seed": 1}}
    config = overridden("train.max_steps=5", "train.max_steps=6", data=data)
    assert (config.train.max_steps, config.train.seed) == (6, 1) and data == {"train": {"max_steps": 9, "seed": 1}}


def test_a_list_item_and_a_quoted_key():
    config = overridden("data.path.0.weight=2", data={"data": {"path": [{"path": "a.jsonl"}, {"path": "b.jsonl"}]}})
    assert [entry.weight for entry in config.data.path] == [2, 1]
    space = {"train.learning_rate": {"low": 0.001, "high": 0.01}}
    sweep = apply_overrides({"space": space}, parse_overrides(['space."train.learning_rate".high=0.02']), SweepConfig)
    assert sweep["space"]["train.learning_rate"] == {"low": 0.001, "high": 0.02}


@pytest.mark.parametrize(
    ("items", "data", "message"),
    [
        (["train.max_stpes=5"], {}, "train.max_stpes: unknown key (did you mean max_steps?)"),
        (["trian.max_steps=5"], {}, "trian: unknown key (did you mean train?)"),
        (["train.max_steps=true"], {}, "train.max_steps: must be a whole number"),
        (["train.max_steps=five"], {}, "train.max_steps: must be a whole number"),
        (["train.padding_free=sometimes"], {}, "train.padding_free: must be one of"),
        (["train.max_steps=[1"], {}, "train.max_steps: --set value '[1' is not YAML"),
        (["train.max_steps"], {}, "--set 'train.max_steps': write KEY=VALUE"),
        (["=5"], {}, "--set '=5': write KEY=VALUE"),
        (["train..max_steps=5"], {}, "write KEY=VALUE"),
        (["train.max_steps.x=1"], {"train": {"max_steps": 5}}, "train.max_steps: holds 5, not a section"),
        (["data.path.3.weight=2"], {"data": {"path": [{"path": "a.jsonl"}]}}, "data.path: no item 3 in a list of 1"),
    ],
)
def test_a_bad_override_is_refused_naming_the_key(items: list[str], data: dict[str, Any], message: str):
    with pytest.raises(ConfigError) as refused:
        overridden(*items, data=data)
    assert message in str(refused.value)
