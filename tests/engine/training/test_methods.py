"""The method seam: every method is registered under a name the config accepts, imports no ML library until it
is used, and every TrainSection knob reaches the training arguments (or names the place that consumes it)."""

from __future__ import annotations

import subprocess
import sys
import typing
from pathlib import Path
from typing import Any

import pytest
from pydantic.fields import FieldInfo

from engine.config import METHOD_SECTIONS, ConfigError, RunConfig, TrainingMethod, TrainSection, parse_config
from engine.store.paths import PROJECT_ROOT
from engine.training.builders import common_training_kwargs
from engine.training.hardware import Hardware
from engine.training.method_data import require_format
from engine.training.methods import METHODS, method_of

# TrainSection fields that are not training arguments, each with the place that consumes it instead
# ("module:function"): such a place must read the field.
CONSUMED_ELSEWHERE: dict[str, str] = {
    # A section of its own: its training arguments and callback (tests/engine/training/test_early_stopping.py).
    "early_stopping": "engine.training.builders:to_early_stopping_callback",
}
# Fields a method reads outside its training arguments: (method, field) -> module:function that reads it.
READ_BY_THE_DATA = {
    # The methods that sample their answers read max_length when they cut the prompts.
    **{
        (name, "max_length"): "engine.data.prompts:prepare_prompt_datasets"
        for name, method in METHODS.items()
        if "prompt" in method.formats
    },
    # Padding-free sft rows reach TRL already cut to max_length (TRL then takes no max_length).
    ("sft", "max_length"): "engine.data.prepare:_checked_sets",
}
# TrainSection fields that only sft takes, with a value the other methods refuse.
SFT_ONLY = {"packing": True, "padding_free": "on", "group_by_length": True}
# A value other than the default that changes the arguments where the first other choice would not (sft's
# padding_free: auto means off on a GPU without flash-attn), or where there is no list of choices to take it from
# (the trackers).
OTHER_VALUES = {"padding_free": "on", "report_to": ["trackio"], "trackio_project": "dates", "trackio_space": "me/b"}
# Fields that reach the arguments only beside another setting: that setting, in both configs compared.
NEEDS = {"trackio_project": {"report_to": ["trackio"]}, "trackio_space": {"report_to": ["trackio"]}}
# A sampling method's rewards reach its trainer as functions (engine.training.rewards), their weights as
# reward_weights; every method that learns from rewards needs one.
REWARDED = [name for name, section in METHOD_SECTIONS.items() if "rewards" in section.model_fields]
ONE_REWARD = {name: {"rewards": [{"kind": "exact_match"}]} for name in REWARDED}
# What each method's section needs beyond its defaults to be accepted: a reward, or distill's teacher.
NEEDED_SECTIONS = {**ONE_REWARD, "distill": {"teacher": "org/teacher"}}
# Method section fields that are not training arguments, each with the place that reads it ("module:function").
SECTION_FIELDS_ELSEWHERE = {
    ("distill", "teacher"): "engine.training.methods.distill.trainer:find_teacher",
    ("distill", "teacher_revision"): "engine.training.methods.distill.trainer:find_teacher",
}
# A GPU with bf16, so that precision and gradient checkpointing have choices to show (nothing is started).
GPU = Hardware(gpu_count=1, bf16_supported=True)
BASE = {"data": {"eval_size": 0.1}, "train": {"eval_strategy": "steps"}}


def base_config(method: str, **train: Any) -> RunConfig:
    """BASE trained with ``method`` (with one reward where it learns from rewards, a teacher where it distills), with
    train fields changed."""
    return parse_config({**BASE, **NEEDED_SECTIONS, "method": method, "train": {**BASE["train"], **train}})


def test_every_method_package_is_registered_under_a_name_the_config_accepts() -> None:
    folder = PROJECT_ROOT / "engine/training/methods"
    packages = {path.parent.name for path in folder.glob("*/__init__.py") if "\nMETHOD = Method(" in path.read_text()}
    assert set(METHODS) == packages == set(typing.get_args(TrainingMethod))
    assert method_of(RunConfig()).name == "sft"
    for name, method in METHODS.items():
        assert method.package == f"engine.training.methods.{name}"
        assert (METHOD_SECTIONS.get(name) is not None) == (method.section is not None)
        trainer = method.trainer()
        assert trainer.__name__ == f"engine.training.methods.{name}.trainer"
        for part in ("prepare_data", "training_kwargs", "args_class", "build_trainer"):
            assert callable(getattr(trainer, part, None)), f"{trainer.__name__} has no {part}"


def test_the_registry_imports_no_training_library() -> None:
    heavy = ("torch", "transformers", "trl", "peft", "datasets")
    code = f"import sys, engine.training.methods; print([m for m in {heavy!r} if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=PROJECT_ROOT)
    assert out.stdout.strip() == "[]"


# The methods that train on preference pairs, as the registry lists them.
PAIR_METHODS = [name for name, method in METHODS.items() if "preference" in method.formats]


def test_a_method_refuses_data_of_another_format() -> None:
    sft = METHODS["sft"]
    require_format(sft, "alpaca", "data.json")
    with pytest.raises(ConfigError) as caught:
        require_format(sft, "preference", "data.json")
    assert str(caught.value) == (
        "method: data.json is preference data (a chosen and a rejected answer per prompt), and sft trains on "
        f"{', '.join(sft.formats)} data; set method to {' or '.join(PAIR_METHODS)}"
    )


@pytest.mark.parametrize("name", sorted(METHODS))
def test_shared_and_method_arguments_do_not_overlap(name: str, tmp_path: Path) -> None:
    config = base_config(name)
    assert not set(common_training_kwargs(config, tmp_path, GPU)) & set(
        METHODS[name].trainer().training_kwargs(config, GPU)
    )


def _other_value(info: FieldInfo, default: Any) -> Any:
    """A valid value of a field that differs from ``default``."""
    annotation = info.annotation
    choices = typing.get_args(annotation) if typing.get_origin(annotation) is typing.Literal else ()
    if choices:
        return next(choice for choice in choices if choice != default)
    if default is None or isinstance(default, bool):
        return 5.0 if default is None else not default
    upper = next((m.le for m in info.metadata if getattr(m, "le", None) is not None), None)
    if isinstance(default, int):
        return default + 1 if upper is None or default + 1 <= upper else default - 1
    return default * 2 if default and (upper is None or default * 2 <= upper) else min(0.5, (upper or 1) / 2)


def assert_reads(reader: str, field: str) -> None:
    """The place ``reader`` ("module:function") exists, and its module reads ``field`` (as ``config.<field>``)."""
    module, function = reader.split(":")
    source = (PROJECT_ROOT / (module.replace(".", "/") + ".py")).read_text(encoding="utf-8")
    assert f"def {function}(" in source and field in source


def _arguments(config: RunConfig, tmp_path: Path) -> dict[str, Any]:
    return {**common_training_kwargs(config, tmp_path, GPU), **method_of(config).trainer().training_kwargs(config, GPU)}


@pytest.mark.parametrize("field", sorted(TrainSection.model_fields))
@pytest.mark.parametrize("method", sorted(METHODS))
def test_every_train_field_reaches_the_training_arguments(field: str, method: str, tmp_path: Path) -> None:
    base = base_config(method, **NEEDS.get(field, {}))
    reader = CONSUMED_ELSEWHERE.get(field) or READ_BY_THE_DATA.get((method, field))
    if reader:
        assert_reads(reader, f"train.{field}")
        return
    if method != "sft" and field in SFT_ONLY:  # whole pairs or sampled answers only: refused, not ignored
        with pytest.raises(ConfigError, match=f"train.{field}: .* for sft only"):
            base_config(method, **{field: SFT_ONLY[field]})
        return
    value = OTHER_VALUES.get(field, _other_value(TrainSection.model_fields[field], getattr(base.train, field)))
    changed = base.model_copy(update={"train": base.train.model_copy(update={field: value})})
    assert _arguments(changed, tmp_path) != _arguments(base, tmp_path), f"train.{field} = {value!r} changes nothing"


@pytest.mark.parametrize(
    ("method", "field"),
    [(m, f) for m, section in METHOD_SECTIONS.items() for f in section.model_fields if f != "rewards"],
)
def test_every_field_of_a_method_section_reaches_its_training_arguments(
    method: str, field: str, tmp_path: Path
) -> None:
    reader = SECTION_FIELDS_ELSEWHERE.get((method, field))
    if reader:
        assert_reads(reader, f"{method}.{field}")
        return
    base = base_config(method)
    section = getattr(base, method)
    value = _other_value(type(section).model_fields[field], getattr(section, field))
    changed = base.model_copy(update={method: section.model_copy(update={field: value})})
    assert _arguments(changed, tmp_path) != _arguments(base, tmp_path), f"{method}.{field} = {value!r} changes nothing"
