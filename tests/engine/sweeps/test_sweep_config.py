"""The sweep file: every refusal names the key at fault (a space entry by its quoted path) and says why; accepted
values are read as the run config's fields read them; the shipped demo sweep loads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from engine.config import ConfigError, parse_config
from engine.store.paths import PROJECT_ROOT
from engine.sweeps import SweepConfig, load_sweep, parse_sweep
from engine.sweeps.objective import pruning_feed
from engine.sweeps.sections import Objective
from tests.engine.sweeps.sweep_files import demo_base, engine_cli, write_sweep


def sweep(space: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"name": "s", "base": demo_base(), "space": space, **extra}


def problems_of(data: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(ConfigError) as caught:
        parse_sweep(data)
    return caught.value.by_field()


LR = 'space."train.learning_rate"'
RANK = 'space."adapter.r"'
# A GRPO base (groups of 2 answers: the demo preset's eval batches of 50 hold whole groups)
GRPO = {"method": "grpo", "grpo": {"num_generations": 2, "rewards": [{"kind": "length", "target_tokens": 4}]}}


@pytest.mark.parametrize(
    ("space", "field", "message"),
    [
        (
            {"train.learnig_rate": {"low": 1e-4, "high": 1e-3}},
            'space."train.learnig_rate"',
            "not a field of the run config: train has no learnig_rate (did you mean train.learning_rate?)",
        ),
        (
            {"train.learning_rate.x": {"choices": [1]}},
            'space."train.learning_rate.x"',
            "train.learning_rate is a value, not a section: the run config has no train.learning_rate.x",
        ),
        (
            {"train.optimizer": {"low": 0, "high": 1}},
            'space."train.optimizer"',
            "train.optimizer takes one of ['adamw_torch', 'adamw_torch_fused', 'adafactor', 'sgd', 'adamw_bnb_8bit', "
            "'paged_adamw_8bit', 'paged_adamw_32bit', 'lion_8bit', 'paged_lion_8bit']: use {choices: [...]}",
        ),
        (
            {"train.packing": {"low": 0, "high": 1}},
            'space."train.packing"',
            "train.packing is true or false, not a number: use {choices: [true, false]}",
        ),
        (
            {"adapter.target_modules": {"low": 1, "high": 2}},
            'space."adapter.target_modules"',
            "adapter.target_modules is not a number field: a range needs one; use {choices: [...]}",
        ),
        (
            {"train.learning_rate": {"low": 0, "high": 0.01}},
            LR,
            "low 0 is outside the field's bounds: train.learning_rate must be > 0",
        ),
        (
            {"train.learning_rate": {"low": 0.01, "high": 2}},
            LR,
            "high 2 is outside the field's bounds: train.learning_rate must be <= 1",
        ),
        (
            {"adapter.dropout": {"low": 0.1, "high": 1}},
            'space."adapter.dropout"',
            "high 1 is outside the field's bounds: adapter.dropout must be < 1",
        ),
        ({"adapter.r": {"low": 0, "high": 8}}, RANK, "low 0 is outside the field's bounds: adapter.r must be >= 1"),
        (
            {"adapter.r": {"low": 4.5, "high": 8}},
            RANK,
            "adapter.r is a whole number: low and high must be whole numbers",
        ),
        ({"adapter.r": {"low": 4, "high": 18, "step": 4}}, RANK, "high - low (14) must be a multiple of step (4)"),
        (
            {"train.learning_rate": {"low": 0.001, "high": 0.01, "step": 2}},
            LR,
            "step is for whole-number fields; train.learning_rate is a float: give {low, high, log}",
        ),
        ({"train.learning_rate": {"low": 0.01, "high": 0.001}}, LR, "low (0.01) must be below high (0.001)"),
        (
            {"train.warmup": {"low": 0, "high": 5, "log": True}},
            'space."train.warmup"',
            "a log range needs low above 0 (got 0)",
        ),
        (
            {"train.learning_rate": {"low": 0.001, "high": 0.01, "choices": [0.1]}},
            LR,
            "give either choices or a range, not both (found choices and low, high)",
        ),
        (
            {"train.learning_rate": {"high": 0.01}},
            LR,
            "give a range {low, high} (with log or step) or {choices: [...]}",
        ),
        (
            {"adapter.method": {"choices": ["lora", "qlora"]}},
            'space."adapter.method"',
            "\"qlora\" is refused: adapter.method: must be one of 'lora', 'full' or 'freeze'",
        ),
        ({"adapter.r": {"choices": [8, 2048]}}, RANK, "2048 is refused: adapter.r: must be <= 1024"),
        # YAML reads 3e-3 as text: the field reads it as 0.003, so it repeats the other choice.
        ({"train.learning_rate": {"choices": ["3e-3", 0.003]}}, LR, "the choice 0.003 is listed twice"),
        (
            {"name": {"choices": ["a", "b"]}},
            'space."name"',
            "set by the sweep: each trial's run is named after the sweep and the trial's number",
        ),
        (
            {"train.eval_strategy": {"choices": ["steps", "no"]}},
            'space."train.eval_strategy"',
            "the choice no logs no eval_loss, the objective",
        ),
    ],
)
def test_a_bad_space_entry_is_refused_by_its_name(space: dict[str, Any], field: str, message: str) -> None:
    problems = problems_of(sweep(space))
    assert problems[field].startswith(message), problems


def test_a_choice_that_breaks_a_rule_across_fields_is_refused() -> None:
    base = {**demo_base(), "quantization": {"mode": "4bit"}}  # 4-bit base weights train through LoRA only
    problems = problems_of(sweep({"adapter.method": {"choices": ["lora", "full"]}}, base=base))
    assert problems == {
        'space."adapter.method"': '"full" is refused: quantization.mode: 4bit base weights cannot be trained; '
        "use adapter.method lora"
    }


def test_every_bad_entry_is_named_at_once() -> None:
    problems = problems_of(sweep({"adapter.r": {"low": 0, "high": 8}, "train.nope": {"choices": [1]}}))
    assert set(problems) == {RANK, 'space."train.nope"'}


@pytest.mark.parametrize(
    ("extra", "field", "message"),
    [
        (
            {"base": {**demo_base(), "train": {"eval_strategy": "no"}}},
            "objective.metric",
            "eval_loss needs runs that evaluate: set base's train.eval_strategy to steps or epoch",
        ),
        (
            {"objective": {"metric": "exact_match"}},
            "objective.direction",
            "exact_match is better when higher: set direction to maximize",
        ),
        (
            {"base": {**demo_base(), "method": "dpo"}, "objective": {"metric": "exact_match", "direction": "maximize"}},
            "objective.metric",
            "exact_match does not tell how well a dpo run does: choose eval_loss, train_loss, eval_rewards/accuracies, "
            "or another key its runs log",
        ),
        (
            {"base": {**demo_base(), **GRPO}},
            "objective.metric",
            "eval_loss does not tell how well a grpo run does: choose eval_reward, reward, exact_match, or another key",
        ),
        (
            {"base": {**demo_base(), **GRPO, "train": {"eval_strategy": "no"}}, "objective": {"metric": "eval_reward"}},
            "objective.metric",
            "eval_reward needs runs that evaluate: set base's train.eval_strategy to steps or epoch (with eval data), "
            "or choose reward",
        ),
        (
            {"base": {**demo_base(), **GRPO}, "objective": {"metric": "eval_reward"}},
            "objective.direction",
            "eval_reward is better when higher: set direction to maximize",
        ),
        (
            {"objective": {"metric": "eval_loss", "direction": "maximize"}},
            "objective.direction",
            "eval_loss is better when lower: set direction to minimize",
        ),
        (
            {"objective": {"metric": "reward", "direction": "maximize"}},
            "objective.metric",
            "reward does not tell how well a sft run does: choose eval_loss, train_loss, exact_match, or another key",
        ),
        (
            {
                "base": {
                    **demo_base(),
                    "data": {"path": "assets/datasets/demo_sft_train.jsonl"},
                    "train": {**demo_base()["train"], "eval_strategy": "no"},
                },
                "objective": {"metric": "exact_match", "direction": "maximize"},
                "pruner": "none",
            },
            "objective.metric",
            "exact_match is scored on the eval set: give base a data.eval_path or a data.eval_size",
        ),
        ({"objective": {"metric": "exact_match", "eval_rows": 0}}, "objective.eval_rows", "must be >= 1"),
        ({"sampler": "grid"}, LR, "the grid sampler needs choices or a whole-number range; give choices"),
        ({"sampler": "bayes"}, "sampler.kind", "must be one of 'tpe', 'random' or 'grid'"),
        ({"pruner": {"kind": "median", "startup_trials": -1}}, "pruner.startup_trials", "must be >= 0"),
        ({"trials": 0}, "trials", "must be >= 1"),
        ({"time_budget_s": 0}, "time_budget_s", "must be > 0"),
        ({"objective": {"direction": "up"}}, "objective.direction", "must be one of 'minimize' or 'maximize'"),
        ({"objectve": {}}, "objectve", "unknown key (did you mean objective?)"),
        ({"name": "a/b"}, "name", "no / or \\ allowed"),
        ({"name": "n" * 101}, "name", "too long: 101 characters, at most 100"),
        ({"base": {**demo_base(), "train": {"learning_rate": 0}}}, "base.train.learning_rate", "must be > 0"),
        (
            {"first_trials": [{"train.learning_rate": 0.5}]},
            "first_trials.0",
            "train.learning_rate: 0.5 is outside its range [0.001, 0.01]",
        ),
        (
            {"first_trials": [{"adapter.r": 8}]},
            "first_trials.0",
            "adapter.r is not an entry of the space (train.learning_rate)",
        ),
    ],
)
def test_bad_sweep_keys_are_refused_by_name(extra: dict[str, Any], field: str, message: str) -> None:
    problems = problems_of(sweep({"train.learning_rate": {"low": 0.001, "high": 0.01}}, **extra))
    assert problems[field].startswith(message), problems


def test_a_train_loss_objective_needs_no_evaluation() -> None:
    base = demo_base()
    base["train"]["eval_strategy"] = "no"
    config = parse_sweep(sweep({"adapter.r": {"choices": [4]}}, base=base, objective={"metric": "train_loss"}))
    assert config.objective.metric == "train_loss" and config.objective.direction == "minimize"


def test_values_are_read_as_the_fields_read_them() -> None:
    config = parse_sweep(
        sweep(
            {
                "train.learning_rate": {"choices": ["3e-3", 1e-4]},
                "adapter.target_modules": {"choices": ["all-linear", "q_proj, v_proj"]},
                "adapter.r": {"low": 4, "high": 16, "step": 4},
            },
            sampler="grid",
            pruner="none",
            first_trials=[{"train.learning_rate": "1e-4", "adapter.target_modules": "q_proj,v_proj", "adapter.r": 8}],
        )
    )
    assert config.space["train.learning_rate"].choices == [0.003, 0.0001]
    assert config.space["adapter.target_modules"].choices == ["all-linear", ["q_proj", "v_proj"]]
    assert config.first_trials == [
        {"train.learning_rate": 0.0001, "adapter.target_modules": ["q_proj", "v_proj"], "adapter.r": 8}
    ]
    assert (config.sampler.kind, config.pruner.kind) == ("grid", "none")


def test_defaults() -> None:
    config = parse_sweep(sweep({"adapter.r": {"choices": [4, 8]}}))
    assert (config.objective.metric, config.objective.direction) == ("eval_loss", "minimize")
    assert (config.trials, config.sampler.kind, config.pruner.kind, config.time_budget_s) == (10, "tpe", "median", None)


def test_every_field_has_a_description() -> None:
    from engine.sweeps.sections import Objective, PrunerSection, SamplerSection, SpaceEntry

    for model in (SweepConfig, SpaceEntry, Objective, SamplerSection, PrunerSection):
        missing = [name for name, info in model.model_fields.items() if not info.description]
        assert missing == [], (model.__name__, missing)


def test_a_base_path_is_read_beside_the_sweep_file(tmp_path: Path) -> None:
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(demo_base(max_steps=12)))
    (tmp_path / "sweep.yaml").write_text(
        yaml.safe_dump({"name": "s", "base": "run.yaml", "space": {"adapter.r": {"choices": [4]}}})
    )
    assert load_sweep(tmp_path / "sweep.yaml").base.train.max_steps == 12


def test_a_bad_base_file_names_its_fields(tmp_path: Path) -> None:
    (tmp_path / "run.yaml").write_text(yaml.safe_dump({"train": {"learning_rate": 0}}))
    (tmp_path / "sweep.yaml").write_text(
        yaml.safe_dump({"name": "s", "base": "run.yaml", "space": {"adapter.r": {"choices": [4]}}})
    )
    with pytest.raises(ConfigError) as caught:
        load_sweep(tmp_path / "sweep.yaml")
    assert caught.value.by_field() == {"base.train.learning_rate": f"must be > 0.0 (in {tmp_path / 'run.yaml'})"}
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump({"name": "s", "base": "gone.yaml", "space": {}}))
    with pytest.raises(ConfigError) as caught:
        load_sweep(tmp_path / "sweep.yaml")
    assert caught.value.by_field() == {"base": "run config not found: gone.yaml"}


def test_a_missing_or_broken_sweep_file_says_so(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="sweep file not found"):
        load_sweep(tmp_path / "none.yaml")
    (tmp_path / "bad.yaml").write_text("name: [")
    with pytest.raises(ConfigError, match="is not valid YAML"):
        load_sweep(tmp_path / "bad.yaml")


def test_the_shipped_demo_sweep_loads() -> None:
    config = load_sweep(PROJECT_ROOT / "assets" / "presets" / "sweeps" / "demo-sweep.yaml")
    assert config.name == "demo-sweep" and config.trials == 6
    assert config.base.name == "demo-dates" and config.base.train.eval_strategy == "steps"
    lr = config.space["train.learning_rate"]
    assert (lr.low, lr.high, lr.log) == (1e-3, 1e-2, True)
    assert config.space["adapter.r"].choices == [8, 16, 32]
    assert (config.sampler.kind, config.pruner.kind) == ("tpe", "median")


def test_the_cli_refuses_a_bad_sweep_file_with_exit_2_and_the_error(tmp_path: Path) -> None:
    path = write_sweep(tmp_path, sweep({"adapter.r": {"low": 0, "high": 8}}))
    done = engine_cli("sweep", str(path), "--workspace", str(tmp_path / "ws"), timeout=120)
    assert done.returncode == 2
    assert done.stderr == 'error: space."adapter.r": low 0 is outside the field\'s bounds: adapter.r must be >= 1\n'
    assert not (tmp_path / "ws").exists()


def test_an_exact_match_sweep_prunes_on_the_held_out_metric_of_its_method() -> None:
    """exact_match is scored once a trial's run completes; while it trains, the pruner is told the method's held-out
    metric, turned the study's way (maximize): the negated eval loss, a GRPO run's eval reward as it is."""
    exact = Objective(metric="exact_match", direction="maximize")
    assert pruning_feed(exact, parse_config(demo_base())) == ("eval_loss", -1.0)
    assert pruning_feed(exact, parse_config({**demo_base(), **GRPO})) == ("eval_reward", 1.0)
    assert pruning_feed(Objective(metric="reward", direction="maximize"), parse_config(demo_base())) == ("reward", 1.0)
