"""RunConfig validation: every error names its field; YAML round trips; cross-field rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.config import ConfigError, RunConfig, load_config, parse_config, save_config
from engine.config.schema import Section
from engine.store.paths import PROJECT_ROOT


def problems_of(data: dict) -> dict[str, str]:
    with pytest.raises(ConfigError) as caught:
        parse_config(data)
    return caught.value.by_field()


def test_defaults_are_valid_and_cpu_friendly():
    config = parse_config({})
    assert config.adapter.method == "lora"
    assert config.train.precision == "auto"
    assert config.train.gradient_checkpointing == "auto"
    assert config.model.trust_remote_code is False


@pytest.mark.parametrize(
    ("data", "field", "fragment"),
    [
        ({"train": {"learning_rate": 0}}, "train.learning_rate", "must be > 0"),
        ({"train": {"learning_rate": -1e-4}}, "train.learning_rate", "must be > 0"),
        ({"train": {"per_device_batch_size": 0}}, "train.per_device_batch_size", "must be >= 1"),
        ({"train": {"max_steps": "many"}}, "train.max_steps", "whole number"),
        ({"adapter": {"r": 2048}}, "adapter.r", "must be <= 1024"),
        ({"adapter": {"dropout": 1.0}}, "adapter.dropout", "must be < 1"),
        ({"adapter": {"method": "qlora"}}, "adapter.method", "must be one of"),
        ({"quantization": {"mode": "3bit"}}, "quantization.mode", "must be one of"),
        ({"model": {"name_or_path": ""}}, "model.name_or_path", "must not be empty"),
        ({"train": {"learnig_rate": 1e-4}}, "train.learnig_rate", "did you mean learning_rate"),
        ({"trian": {}}, "trian", "did you mean train"),
        ({"adapter": {"target_modules": " , "}}, "adapter.target_modules", "at least one module"),
        ({"data": {"eval_size": 2.5}}, "data.eval_size", "whole number"),
        ({"train": {"warmup": 3.5}}, "train.warmup", "whole number"),
        ({"name": "n" * 300}, "name", "too long: 300 characters, at most 120"),
        ({"name": "a\x00b"}, "name", "no control characters allowed"),
        ({"name": "runs/../x"}, "name", "no / or \\ allowed"),
        ({"name": "é" * 110}, "name", "too long for a file name"),
    ],
)
def test_bad_values_name_their_field(data, field, fragment):
    problems = problems_of(data)
    assert field in problems, problems
    assert fragment in problems[field]


def test_error_text_reads_field_colon_message():
    with pytest.raises(ConfigError) as caught:
        parse_config({"train": {"learning_rate": 0}})
    assert str(caught.value) == "train.learning_rate: must be > 0.0"


def test_several_problems_are_all_reported():
    problems = problems_of({"train": {"learning_rate": 0, "seed": -1}, "adapter": {"r": 0}})
    assert set(problems) == {"train.learning_rate", "train.seed", "adapter.r"}


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"quantization": {"mode": "4bit"}, "adapter": {"method": "full"}}, "quantization.mode"),
        ({"quantization": {"mode": "8bit"}, "adapter": {"method": "freeze"}}, "quantization.mode"),
        ({"train": {"eval_strategy": "steps"}}, "train.eval_strategy"),
        ({"train": {"eval_on_start": True}}, "train.eval_on_start"),
        ({"quantization": {"mode": "4bit"}, "adapter": {"init": "loftq"}}, "adapter.init"),
        ({"adapter": {"use_dora": True, "init": "pissa"}}, "adapter.use_dora"),
    ],
)
def test_cross_field_rules(data, field):
    assert field in problems_of(data)


def test_eval_settings_pass_with_eval_data():
    config = parse_config({"train": {"eval_strategy": "steps"}, "data": {"eval_size": 0.1}})
    assert config.has_eval_data


def test_target_modules_accepts_keywords_and_comma_lists():
    assert parse_config({"adapter": {"target_modules": "all-linear"}}).adapter.target_modules == "all-linear"
    listed = parse_config({"adapter": {"target_modules": "q_proj, v_proj"}}).adapter.target_modules
    assert listed == ["q_proj", "v_proj"]


def test_yaml_round_trip(tmp_path: Path):
    config = parse_config({"name": "trip", "adapter": {"r": 16, "target_modules": ["q_proj"]}, "train": {"seed": 7}})
    save_config(config, tmp_path / "c.yaml")
    assert load_config(tmp_path / "c.yaml") == config


def test_load_config_errors_are_clear(tmp_path: Path):
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "missing.yaml")
    (tmp_path / "bad.yaml").write_text("train: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(tmp_path / "bad.yaml")
    (tmp_path / "list.yaml").write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="must be a mapping"):
        load_config(tmp_path / "list.yaml")


def _all_fields(model: type[Section], prefix: str = ""):
    for name, field in model.model_fields.items():
        yield f"{prefix}{name}", field
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, Section):
            yield from _all_fields(annotation, f"{prefix}{name}.")


def test_every_field_has_a_description():
    missing = [name for name, field in _all_fields(RunConfig) if not field.description]
    assert missing == []


def test_every_shipped_preset_loads():
    presets = sorted((PROJECT_ROOT / "assets" / "presets").glob("*.yaml"))
    assert presets, "no presets shipped"
    for preset in presets:
        load_config(preset)


def test_one_name_rule_for_runs_saved_configs_and_exports(tmp_path: Path):
    from engine.config.names import name_problem
    from engine.export.exports import ExportError, resolve_target

    assert parse_config({"name": "  my run 2  "}).name == "my run 2" and name_problem("my run 2") is None
    for bad in ("x" * 300, "a\x00b"):
        # The export's file system calls would stop at these with "File name too long" / "embedded null byte".
        with pytest.raises(ExportError, match="the export name is not usable") as refused:
            resolve_target(tmp_path, bad)
        assert str(refused.value).endswith(name_problem(bad))
    assert resolve_target(tmp_path, "fine") == (tmp_path / "fine").resolve()
