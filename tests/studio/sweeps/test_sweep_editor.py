"""The Sweeps tab's builder as plain functions: the fields it offers, first ranges, editor rows -> the sweep YAML ->
a validated SweepConfig, settings changing one key each, and refusals that name the entry at fault."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from engine.config import load_config, parse_config
from engine.sweeps import load_sweep
from engine.sweeps.control import read_sweep_text
from studio.sweeps import space_editor as se
from tests.engine.sweeps.sweep_files import DEMO_PRESET

DEMO = load_config(DEMO_PRESET)


def test_the_picker_offers_the_usual_knobs_first_and_only_fields_with_values_to_vary() -> None:
    paths = [path for _, path in se.field_choices()]
    assert paths[:6] == [
        "train.learning_rate",
        "adapter.r",
        "adapter.alpha",
        "adapter.dropout",
        "train.per_device_batch_size",
        "train.warmup",
    ]
    assert "adapter.target_modules" not in paths and "data.path" not in paths and "name" not in paths  # no ranges
    assert "train.report_to" not in paths and "train.lr_scheduler" in paths and "adapter.use_rslora" in paths
    dpo = [path for _, path in se.field_choices("dpo")]
    assert dpo.index("dpo.beta") < dpo.index("model.dtype")  # the method's own knobs right after the usual ones
    assert dict((path, label) for label, path in se.field_choices())["adapter.r"] == "adapter.r · Rank (r)"


def test_first_ranges_sit_around_the_base_values() -> None:
    assert se.suggested_row("train.learning_rate", DEMO) == se.EntryRow("train.learning_rate", 0.001, 0.009, True)
    assert se.suggested_row("adapter.r", DEMO).choices == "4, 8, 16, 32"
    assert se.suggested_row("adapter.dropout", DEMO) == se.EntryRow("adapter.dropout", 0.0, 0.2)
    assert se.suggested_row("train.per_device_batch_size", DEMO).choices == "8, 16, 32"
    assert se.suggested_row("adapter.use_rslora", DEMO).choices == "true, false"
    assert se.suggested_row("adapter.bias", DEMO).choices == "none, all, lora_only"  # a short literal: every value
    assert se.suggested_row("train.lr_scheduler", DEMO).choices.startswith("cosine, ")  # a long one: base first


def test_rows_make_the_yaml_that_validates_into_the_sweep() -> None:
    text = se.first_sweep(DEMO, "tune")
    text = se.with_entry(text, se.EntryRow("adapter.dropout", 0.0, 0.1))
    text = se.with_entry(text, se.EntryRow("adapter.r", choices="[8, 16]"))  # replaces the first sweep's entry
    text = se.with_entry(text, se.EntryRow("adapter.use_rslora", choices="true, false"))
    text = se.with_entry(text, se.EntryRow("train.per_device_batch_size", 8.0, 32.0, step=8))
    text = se.without_entry(text, "train.learning_rate")
    for setting, value in [("trials", 4.0), ("sampler", "random"), ("pruner", "none"), ("budget_minutes", 1.5)]:
        text = se.with_setting(text, setting, value)
    text = se.with_setting(se.with_setting(text, "metric", "train_loss"), "direction", "minimize")
    assert "  adapter.dropout: {low: 0, high: 0.1}\n" in text  # one line per entry
    config, problems = se.check_text(text, None)
    assert problems == [] and config is not None
    assert {path: entry.model_dump(exclude_defaults=True) for path, entry in config.space.items()} == {
        "adapter.r": {"choices": [8, 16]},
        "adapter.dropout": {"low": 0.0, "high": 0.1},
        "adapter.use_rslora": {"choices": [True, False]},
        "train.per_device_batch_size": {"low": 8.0, "high": 32.0, "step": 8},
    }
    assert (config.trials, config.sampler.kind, config.pruner.kind, config.time_budget_s) == (4, "random", "none", 90)
    assert (config.objective.metric, config.name, config.base) == ("train_loss", "tune", DEMO)
    assert config.sampler.startup_trials == 3  # the kind changed, its other knobs kept
    assert se.settings_of(text) == {
        "name": "tune",
        "metric": "train_loss",
        "direction": "minimize",
        "trials": 4,
        "sampler": "random",
        "pruner": "none",
        "budget_minutes": 1.5,
    }


def test_a_picked_field_shows_its_entry_from_the_yaml_else_a_first_range() -> None:
    text = se.first_sweep(DEMO, "tune")
    assert se.field_row(text, "adapter.r") == [None, None, False, 1, "4, 8, 16, 32"]
    assert se.field_row(text, "train.learning_rate") == [0.001, 0.009, True, 1, ""]
    assert se.field_row(text, "adapter.alpha") == [11.0, 96.0, False, 1, ""]  # around the base's 32
    assert se.field_row("not: [valid", "adapter.dropout") == [0.0, 0.2, False, 1, ""]


def test_refusals_name_the_entry_or_key_at_fault(tmp_path: Path) -> None:
    text = se.with_entry(se.first_sweep(DEMO, "tune"), se.EntryRow("adapter.r", choices="0, 8"))
    assert [str(p) for p in se.check_text(text, tmp_path)[1]] == [
        'space."adapter.r": 0 is refused: adapter.r: must be >= 1'
    ]
    text = se.with_entry(se.first_sweep(DEMO, "tune"), se.EntryRow("train.lr_scheduler", 1.0, 2.0))
    [problem] = se.check_text(text, tmp_path)[1]
    assert problem.field == 'space."train.lr_scheduler"' and "use {choices: [...]}" in problem.message
    _, [problem] = se.check_text(se.with_setting(se.first_sweep(DEMO, "t"), "trials", 0), tmp_path)
    assert str(problem) == "trials: must be >= 1"
    outside = se.first_sweep(
        DEMO.model_copy(update={"data": DEMO.data.model_copy(update={"path": "/etc/x.jsonl"})}), "t"
    )
    [problem] = se.check_text(outside, tmp_path)[1]
    assert problem.field == "base.data.path" and "/etc/x.jsonl" in problem.message
    [problem] = se.check_text("name: t\nbase: /etc/passwd\nspace: {adapter.r: {choices: [4]}}", tmp_path)[1]
    assert problem.field == "base"
    [problem] = se.check_text("name: t\nspace: [", tmp_path)[1]
    assert problem.message.startswith("not valid YAML (line 2")
    with pytest.raises(ValueError, match="give low and high"):
        se.row_entry(se.EntryRow("adapter.alpha", low=1.0))
    with pytest.raises(ValueError, match="cannot read the choices"):
        se.with_entry(se.first_sweep(DEMO, "t"), se.EntryRow("adapter.r", choices="[4, 8"))
    with pytest.raises(ValueError, match="the YAML cannot be read"):
        se.with_setting("name: [", "trials", 3)


def test_a_section_of_one_key_is_written_so_that_the_sweep_driver_reads_it(tmp_path: Path) -> None:
    """A sweep without an objective or sampler gets one from the editor's metric and sampler pickers: each a mapping
    of one key, written on one line in its braces (without them the line is not YAML, and the driver, which reads
    the sweep's file with engine.sweeps.load_sweep, fails at once). A metric the methods do not list (a key the run
    logs) comes alone: a listed one brings its direction."""
    data = yaml.safe_load(se.first_sweep(DEMO, "one-key"))
    del data["objective"], data["sampler"]
    text = se.with_setting(yaml.safe_dump(data, sort_keys=False), "metric", "eval_mean_token_accuracy")
    text = se.with_setting(text, "sampler", "random")
    assert "\nobjective: {metric: eval_mean_token_accuracy}\n" in text and "\nsampler: {kind: random}\n" in text
    assert se.check_text(text, tmp_path)[1] == []
    sweep_file = tmp_path / "sweep.yaml"
    sweep_file.write_text(text, encoding="utf-8")
    config = load_sweep(sweep_file)
    assert (config.objective.metric, config.objective.direction, config.sampler.kind) == (
        "eval_mean_token_accuracy",
        "minimize",
        "random",
    )
    assert (se.settings_of(text) or {}).get("metric") == "eval_mean_token_accuracy"  # the widgets show it too
    # Sections of more keys, and the space's entries, stay as they were written.
    assert (
        "\npruner: {kind: median, startup_trials: 2}\n" in text and "  adapter.r: {choices: [4, 8, 16, 32]}\n" in text
    )


def test_the_bundled_sweep_reads_with_its_base_from_its_own_folder(tmp_path: Path) -> None:
    text = (se.SWEEP_PRESETS_DIR / "demo-sweep.yaml").read_text()
    config, problems = se.check_text(text, tmp_path)
    assert problems == [] and config is not None and config.base == DEMO
    _, kept = read_sweep_text(text, se.SWEEP_PRESETS_DIR)
    assert parse_config(yaml.safe_load(kept)["base"]) == DEMO  # written inline, so its folder stands alone


def test_unique_names_skip_the_sweeps_the_workspace_has(tmp_path: Path) -> None:
    assert se.unique_name(tmp_path) == "sweep-1"
    (tmp_path / "sweeps" / "sweep-1").mkdir(parents=True)
    (tmp_path / "sweeps" / "sweep-2").mkdir()
    assert se.unique_name(tmp_path) == "sweep-3"


def grpo_base(evaluates: bool):
    """The demo run as GRPO (groups of 2 answers), evaluating or not."""
    data = DEMO.model_dump(mode="json")
    data.update(method="grpo", grpo={"num_generations": 2, "rewards": [{"kind": "length", "target_tokens": 4}]})
    data["train"]["eval_strategy"] = "steps" if evaluates else "no"
    return parse_config(data)


def objective_of(text: str) -> tuple[str, str]:
    objective = yaml.safe_load(text)["objective"]
    return objective["metric"], objective["direction"]


def test_the_objective_is_one_that_measures_the_bases_method(tmp_path: Path) -> None:
    """A GRPO run's losses say nothing of how well it does (its policy loss is 0 whenever a group's answers score
    alike): its sweep optimizes the reward, the held-out one where the base evaluates, and the editor offers the
    method's own metrics."""
    assert objective_of(se.first_sweep(DEMO, "sft")) == ("eval_loss", "minimize")
    grpo = se.first_sweep(grpo_base(True), "grpo")
    assert objective_of(grpo) == ("eval_reward", "maximize")
    assert objective_of(se.first_sweep(grpo_base(False), "grpo")) == ("reward", "maximize")
    assert se.check_text(grpo, tmp_path)[1] == []
    assert se.metric_choices(grpo) == ["eval_reward", "reward", "exact_match"]
    assert se.metric_choices(se.first_sweep(DEMO, "sft")) == ["eval_loss", "train_loss", "exact_match"]

    # A new base of another method takes its own first metric in place of one it does not log...
    assert objective_of(se.with_base(se.first_sweep(DEMO, "sft"), grpo_base(True))) == ("eval_reward", "maximize")
    assert objective_of(se.with_base(grpo, DEMO)) == ("eval_loss", "minimize")
    # ... but keeps one that it does, and any key the methods do not list (a run logs it, the user typed it).
    exact = se.with_setting(grpo, "metric", "exact_match")
    assert objective_of(se.with_base(exact, DEMO)) == ("exact_match", "maximize")
    typed = se.with_setting(se.with_setting(grpo, "metric", "eval_rewards/length/mean"), "direction", "maximize")
    assert objective_of(se.with_base(typed, DEMO)) == ("eval_rewards/length/mean", "maximize")

    # Picking a listed metric sets its direction; the check refuses the other.
    assert objective_of(se.with_setting(se.first_sweep(DEMO, "sft"), "metric", "exact_match")) == (
        "exact_match",
        "maximize",
    )
    wrong = se.with_setting(grpo, "direction", "minimize")
    assert [(p.field, p.message) for p in se.check_text(wrong, tmp_path)[1]] == [
        ("objective.direction", "eval_reward is better when higher: set direction to maximize")
    ]
