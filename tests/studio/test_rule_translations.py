"""The rules across fields speak the visitor's language: each rule is triggered through the engine's own checks
(parse_config for the config's and the methods' rules, vision_problems, hardware_problems with a described machine,
tracker_problems), and its English, said again by translate_problem in zh-CN, ja and ko, differs from the English,
keeps the values it holds and leaves no placeholder unfilled."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from engine.config import ConfigError, parse_config, vision_problems
from engine.config.schema import Problem
from engine.training.hardware import CPU_ONLY, Hardware, hardware_problems
from engine.training.packages import installed
from engine.training.trackers import TRACKER_MODULES, tracker_problems
from studio.i18n import catalog
from studio.i18n.catalog import LANGUAGES, SOURCE, text, translations
from studio.i18n.problems import translate_problem

OTHERS = [lang for lang in LANGUAGES if lang != SOURCE]
EVAL = {"data": {"eval_size": 0.1}, "train": {"eval_strategy": "steps", "eval_steps": 10}}
REWARD = {"kind": "length", "target_tokens": 20}
BARE_GPU = Hardware(gpu_count=1, bf16_supported=False)
FULL_GPU = Hardware(gpu_count=1, bf16_supported=True)


@dataclass(frozen=True)
class Case:
    """A config that breaks one rule, where the rule reports it, and the values its message must keep."""

    rule: str
    field: str
    data: dict[str, Any]
    values: tuple[str, ...] = ()
    check: str = "config"  # config (parse_config), vision, hardware (on ``hardware``)
    hardware: Hardware = field(default=CPU_ONLY)


def _merged(*parts: dict[str, Any]) -> dict[str, Any]:
    """The sections of ``parts`` merged one level deep (a section named twice keeps the keys of both)."""
    merged: dict[str, Any] = {}
    for part in parts:
        for section, values in part.items():
            merged[section] = {**merged.get(section, {}), **values} if isinstance(values, dict) else values
    return merged


CASES = [
    Case("vision_lora_parts", "vision.train_language_model", {"vision": {"train_language_model": False}}, (), "vision"),
    Case(
        "vision_nothing_trains",
        "vision.train_language_model",
        {"adapter": {"method": "full"}, "vision": {"train_language_model": False, "train_projector": False}},
        (),
        "vision",
    ),
    Case(
        "quantized_full",
        "quantization.mode",
        {"quantization": {"mode": "4bit"}, "adapter": {"method": "full"}},
        ("4bit",),
    ),
    Case("loftq_quantized", "adapter.init", {"quantization": {"mode": "4bit"}, "adapter": {"init": "loftq"}}),
    Case("eval_without_data", "train.eval_strategy", {"train": {"eval_strategy": "steps"}}),
    Case("eval_on_start_without_data", "train.eval_on_start", {"train": {"eval_on_start": True}}),
    Case("eval_size_fraction", "data.eval_size", {"data": {"eval_size": 1.5}}),
    Case("warmup_fraction", "train.warmup", {"train": {"warmup": 1.5}}),
    Case("dora_init", "adapter.use_dora", {"adapter": {"use_dora": True, "init": "pissa"}}, ("pissa",)),
    Case("devices_one_gpu", "launch.devices", {"launch": {"devices": [0], "num_processes": 2}}, ("1", "2")),
    Case("devices_gpus", "launch.devices", {"launch": {"devices": [0, 1, 2], "num_processes": 2}}, ("3", "2")),
    Case(
        "padding_free_method", "train.padding_free", {"method": "dpo", "train": {"padding_free": "on"}}, ("dpo", "sft")
    ),
    Case(
        "padding_free_remote_code",
        "train.padding_free",
        {"model": {"trust_remote_code": True}, "train": {"padding_free": "on"}},
    ),
    Case("padding_free_packing", "train.padding_free", {"train": {"padding_free": "off", "packing": True}}),
    Case(
        "group_by_length_method",
        "train.group_by_length",
        {"method": "kto", "train": {"group_by_length": True}},
        ("kto", "sft"),
    ),
    Case("group_by_length_packing", "train.group_by_length", {"train": {"group_by_length": True, "packing": True}}),
    Case("packing_method", "train.packing", {"method": "orpo", "train": {"packing": True}}, ("orpo", "sft")),
    Case("trackio_only", "train.trackio_project", {"train": {"trackio_project": "mine"}}),
    Case(
        "early_stopping_without_eval",
        "train.early_stopping.patience",
        {"train": {"early_stopping": {"patience": 3}}},
    ),
    Case(
        "early_stopping_save_strategy",
        "train.save_strategy",
        _merged(EVAL, {"train": {"early_stopping": {"patience": 3}, "save_strategy": "epoch"}}),
        ("steps",),
    ),
    Case(
        "early_stopping_save_steps",
        "train.save_steps",
        _merged(EVAL, {"train": {"early_stopping": {"patience": 3}, "save_steps": 15}}),
        ("10",),
    ),
    Case(
        "early_stopping_metric",
        "train.early_stopping.metric",
        _merged(
            EVAL,
            {
                "method": "grpo",
                "grpo": {"num_generations": 2, "rewards": [{"kind": "length", "target_tokens": 4}]},
                "train": {"early_stopping": {"patience": 3}},
            },
        ),
        ("eval_loss", "grpo", "eval_reward"),
    ),
    Case("cuda_without_gpu", "launch.device", {"launch": {"device": "cuda"}}, (), "hardware"),
    Case("bf16_on_this_gpu", "train.precision", {"train": {"precision": "bf16"}}, (), "hardware", BARE_GPU),
    Case("bf16_on_cpu", "train.precision", {"train": {"precision": "bf16"}}, (), "hardware"),
    Case("fp16_on_cpu", "train.precision", {"train": {"precision": "fp16"}}, (), "hardware"),
    Case("liger_without_gpu", "train.liger_kernel", {"train": {"liger_kernel": "on"}}, (), "hardware"),
    Case("liger_not_installed", "train.liger_kernel", {"train": {"liger_kernel": "on"}}, (), "hardware", FULL_GPU),
    Case(
        "flex_attention_on_cpu",
        "model.attn_implementation",
        {"model": {"attn_implementation": "flex_attention"}},
        (),
        "hardware",
    ),
    Case(
        "processes_without_gpus",
        "launch.num_processes",
        {"launch": {"device": "cuda", "num_processes": 3}},
        ("3", "1"),
        "hardware",
        FULL_GPU,
    ),
    Case(
        "lm_head_adapter",
        "adapter.target_modules",
        {"method": "dpo", "adapter": {"target_modules": ["q_proj", "lm_head"]}},
        ("dpo",),
    ),
    Case(
        "label_smoothing_unused",
        "dpo.label_smoothing",
        {"method": "dpo", "dpo": {"loss_type": "hinge", "label_smoothing": 0.1}},
        ("hinge", "sigmoid, robust, sigmoid_norm"),
    ),
    Case("kl_batch_size", "train.per_device_batch_size", {"method": "kto", "train": {"per_device_batch_size": 1}}),
    Case("reward_missing", "grpo.rewards", {"method": "grpo"}, ("grpo",)),
    Case(
        "generation_round",
        "train.per_device_batch_size",
        {"method": "rloo", "rloo": {"rewards": [REWARD], "num_generations": 4}, "train": {"per_device_batch_size": 3}},
        ("3", "rloo", "4"),
    ),
    Case(
        "eval_whole_groups",
        "train.eval_batch_size",
        _merged(EVAL, {"method": "grpo", "grpo": {"rewards": [REWARD]}, "train": {"eval_batch_size": 3}}),
        ("grpo", "4"),
    ),
    Case("teacher_missing", "distill.teacher", {"method": "distill"}),
    Case(
        "teacher_is_model",
        "distill.teacher",
        {"method": "distill", "model": {"name_or_path": "org/small"}, "distill": {"teacher": "org/small"}},
    ),
]


def problems_of(case: Case) -> list[Problem]:
    """What the engine's check of ``case``'s config reports: pydantic's validation (every rule across fields of
    the config and its method), the vision section's rule, or what the machine ``case.hardware`` cannot run."""
    if case.check == "config":
        with pytest.raises(ConfigError) as refused:
            parse_config(case.data)
        return refused.value.problems
    config = parse_config(case.data)
    return vision_problems(config) if case.check == "vision" else hardware_problems(config, case.hardware)


def english_of(case: Case) -> str:
    """The message of the rule ``case`` breaks, as the engine writes it at the case's field."""
    messages = [problem.message for problem in problems_of(case) if problem.field == case.field]
    assert len(messages) == 1, [str(problem) for problem in problems_of(case)]
    return messages[0]


def assert_said_again(english: str, rule: str, values: tuple[str, ...]) -> None:
    """``english`` is the rule's message with ``values`` in it, and each other language says it in its own words with
    the same values, every placeholder filled in."""
    assert catalog.template_pattern(catalog.english()[f"rule.{rule}"]).fullmatch(english), english
    for value in values:
        assert value in english
    for lang in OTHERS:
        said = translate_problem(english, lang)
        assert said != english and said == said.strip(), (lang, said)
        assert "{" not in said and "}" not in said, (lang, said)
        for value in values:
            assert value in said, (lang, value, said)


def test_every_rule_has_a_case() -> None:
    trackers = {"rule.tracker_not_installed", "rule.trackers_not_installed"}  # test_a_missing_tracker_...
    assert sorted(f"rule.{case.rule}" for case in CASES) == sorted(set(catalog.rule_words()) - trackers)


@pytest.mark.parametrize("case", CASES, ids=[case.rule for case in CASES])
def test_a_broken_rule_is_said_in_the_visitors_language(case: Case) -> None:
    english = english_of(case)
    assert_said_again(english, case.rule, case.values)
    assert translate_problem(english, SOURCE) == english


def test_the_values_are_said_again_as_the_engine_wrote_them() -> None:
    english = english_of(next(case for case in CASES if case.rule == "devices_gpus"))
    assert english == "names 3 GPUs for 2 processes: name one GPU per process, or leave it empty"
    for lang in OTHERS:
        assert translate_problem(english, lang) == text("rule.devices_gpus", lang, gpus="3", processes="2")


def test_what_a_method_trains_on_is_said_again_too() -> None:
    english = english_of(next(case for case in CASES if case.rule == "packing_method"))
    assert english == "orpo trains on whole pairs; packing is for sft only"
    for lang in OTHERS:
        trains_on = text("rule.trains_on.whole_pairs", lang)
        assert trains_on != "whole pairs"
        expected = text("rule.packing_method", lang, method="orpo", trains_on=trains_on, batched="sft")
        assert translate_problem(english, lang) == expected


def test_a_missing_tracker_is_said_in_the_visitors_language() -> None:
    """A tracker this machine lacks, through tracker_problems where one is missing here; by its templates alone for
    a machine that has them all."""
    missing = [name for name, modules in TRACKER_MODULES.items() if not any(installed(m) for m in modules)]
    if missing:
        problems = tracker_problems(parse_config({"train": {"report_to": missing}}))
        rule = "tracker_not_installed" if len(missing) == 1 else "trackers_not_installed"
        assert_said_again(problems[0].message, rule, tuple(missing))
    assert_said_again("wandb is not installed here (pip install wandb)", "tracker_not_installed", ("wandb",))
    several = "tensorboard and wandb are not installed here (pip install tensorboard wandb)"
    assert_said_again(several, "trackers_not_installed", ("tensorboard and wandb", "tensorboard wandb"))


def test_every_rule_key_is_in_every_language() -> None:
    names = {*catalog.rule_words(), *catalog.trains_on_words()}
    assert len(names) > 35
    for lang in LANGUAGES:
        assert sorted(names - set(translations(lang))) == [], lang
    for lang in OTHERS:
        for name in names:
            assert catalog.placeholders(translations(lang)[name]) == catalog.placeholders(catalog.english()[name])


def test_the_rules_english_stays_in_the_engine() -> None:
    """en.json holds the studio's words only: the rules' English is written beside the rules."""
    assert sorted({*catalog.rule_words(), *catalog.trains_on_words()} & set(catalog.language_file(SOURCE))) == []


def test_a_method_brings_its_rules_words_through_the_registry() -> None:
    """The catalog reads each method's rule_messages from the registry: a method's rules are its package's."""
    from engine.api import METHODS

    for method in METHODS.values():
        for name, words in method.rule_messages.items():
            assert catalog.rule_words()[f"rule.{name}"] == words
    assert "rule.label_smoothing_unused" in catalog.rule_words()
