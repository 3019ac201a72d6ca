"""Early stopping's config (train.early_stopping): what it needs of the rest is refused before launch at the field
to change, and what passes builds training arguments transformers accepts, with its EarlyStoppingCallback. The
runs themselves: tests/engine/runs/test_requests.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engine.config import ConfigError, load_config, parse_config
from engine.store.paths import PROJECT_ROOT
from engine.training.builders import common_training_kwargs, to_early_stopping_callback, to_training_args
from engine.training.hardware import Hardware

CPU = Hardware(gpu_count=0, bf16_supported=False)
PRESET = PROJECT_ROOT / "assets" / "presets" / "demo-early-stopping.yaml"
EVALUATED = {"eval_strategy": "steps", "eval_steps": 10, "save_steps": 20}


def problems(train: dict[str, Any], eval_size: float = 8) -> dict[str, str]:
    """The config problems by field, for these train settings and early stopping after 2 evaluations."""
    try:
        parse_config({"data": {"eval_size": eval_size}, "train": {**train, "early_stopping": {"patience": 2}}})
    except ConfigError as exc:
        return exc.by_field()
    return {}


@pytest.mark.parametrize(
    ("train", "field", "words"),
    [
        ({}, "train.early_stopping.patience", "set train.eval_strategy to steps or epoch"),
        ({**EVALUATED, "save_strategy": "epoch"}, "train.save_strategy", "must be steps, as train.eval_strategy"),
        ({"eval_strategy": "epoch"}, "train.save_strategy", "must be epoch, as train.eval_strategy"),
        ({**EVALUATED, "save_steps": 15}, "train.save_steps", "must be a multiple of train.eval_steps (10)"),
        ({**EVALUATED, "save_strategy": "no"}, "train.save_strategy", "must be steps"),
    ],
)
def test_what_early_stopping_needs_is_refused_at_the_field_to_change(train: dict, field: str, words: str) -> None:
    found = problems(train)
    assert list(found) == [field] and words in found[field], found


def test_settings_that_line_up_pass_and_early_stopping_off_asks_nothing() -> None:
    assert problems(EVALUATED) == {}
    assert problems({"eval_strategy": "epoch", "save_strategy": "epoch"}) == {}
    assert problems({**EVALUATED, "save_steps": 10}) == {}
    parse_config({"train": {"save_steps": 15}})  # off: no evaluations needed, any save_steps
    with pytest.raises(ConfigError) as refused:
        parse_config({"train": {"early_stopping": {"metric": "loss"}}})
    assert refused.value.by_field() == {
        "train.early_stopping.metric": "name an evaluation metric as logged, starting with eval_ (e.g. eval_loss)"
    }


def test_the_arguments_keep_the_best_model_and_transformers_accepts_them(tmp_path: Path) -> None:
    config = parse_config({"data": {"eval_size": 8}, "train": {**EVALUATED, "early_stopping": {"patience": 3}}})
    kwargs = common_training_kwargs(config, tmp_path, CPU)
    assert {key: kwargs[key] for key in ("load_best_model_at_end", "metric_for_best_model", "greater_is_better")} == {
        "load_best_model_at_end": True,
        "metric_for_best_model": "eval_loss",
        "greater_is_better": False,
    }
    assert kwargs["restore_callback_states_from_checkpoint"]  # a resumed run keeps counting its misses
    args = to_training_args(config, tmp_path, CPU)  # TrainingArguments' own checks of the strategies pass
    assert args.load_best_model_at_end and args.save_steps % args.eval_steps == 0
    callback = to_early_stopping_callback(config)
    assert (callback.early_stopping_patience, callback.early_stopping_threshold) == (3, 0.0)

    accuracy = parse_config(
        {
            "data": {"eval_size": 8},
            "train": {**EVALUATED, "early_stopping": {"patience": 1, "metric": "eval_mean_token_accuracy"}},
        }
    )
    assert common_training_kwargs(accuracy, tmp_path, CPU)["greater_is_better"] is True  # not a loss: higher wins

    off = parse_config({"data": {"eval_size": 8}, "train": EVALUATED})
    assert to_early_stopping_callback(off) is None
    assert "load_best_model_at_end" not in common_training_kwargs(off, tmp_path, CPU)


def test_the_preset_stops_early_on_the_demo() -> None:
    preset = load_config(PRESET)
    stopping = preset.train.early_stopping
    assert stopping.enabled and stopping.metric == "eval_loss" and preset.train.eval_strategy == "steps"
    assert preset.train.max_steps > 0 and preset.train.save_steps % preset.train.eval_steps == 0
