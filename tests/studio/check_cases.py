"""The checks of the config sections, each with a config it refuses: the cases tests/studio/test_check_translations.py
triggers through the engine's own validation (parse_config, parse_sweep, read_sweep_text, load_config) or the form's
(values_to_config), to see each message said again in every language."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from typing import Any

from engine.config.names import MAX_NAME_BYTES, MAX_NAME_CHARS
from engine.training.methods.reward_spec import REGEX_LIMITS

RAY_INSTALLED = importlib.util.find_spec("ray") is not None
SPACE = {"train.learning_rate": {"low": 1e-4, "high": 1e-3}}
REGEX = {"method": "grpo", "grpo": {"rewards": [{"kind": "regex"}]}}
LR, RANK = 'space."train.learning_rate"', 'space."adapter.r"'
WITH_EVAL = {"data": {"eval_size": 0.1}, "train": {"eval_strategy": "steps"}}  # a base whose runs evaluate
DEEP = "[" * 5000 + "]" * 5000  # past the recursion limit of PyYAML's composer


@dataclass(frozen=True)
class Case:
    """A config that one check refuses, where the engine reports it, and the values its message must keep."""

    check: str
    field: str
    data: Any
    values: tuple[str, ...] = ()
    # config (parse_config), sweep (parse_sweep), sweep_text (read_sweep_text), config_file (load_config of the file
    # named by data) or form (values_to_config of widget values)
    kind: str = "config"
    env: dict[str, str] = field(default_factory=dict)
    files: dict[str, str | bytes] = field(default_factory=dict)  # written to the folder a sweep's base is read from
    inside: str = ""  # the check whose message holds this one's as its {problem}


def sweep_file(**changes: Any) -> dict[str, Any]:
    """A sweep file that passes every check but those ``changes`` break."""
    return {"name": "s", "base": {}, "space": SPACE, "objective": {"metric": "train_loss"}, **changes}


def base_file_case(check: str, content: str | bytes, *values: str) -> Case:
    """A sweep whose base is a run YAML file, ``run.yaml``, that ``check`` refuses (said inside ``base_problem``)."""
    files = {"run.yaml": content}
    return Case(
        check, "base", sweep_file(base="run.yaml"), ("run.yaml", *values), "sweep", files=files, inside="base_problem"
    )


def regex_rewards(pattern: str) -> dict[str, Any]:
    return {"method": "grpo", "grpo": {"rewards": [{"kind": "regex", "pattern": pattern}]}}


CASES = [
    Case(
        "secret_env_value",
        "model.revision",
        {"model": {"revision": "main-s3cr3t-value"}},
        ("$HF_TOKEN",),
        env={"HF_TOKEN": "s3cr3t-value"},
    ),
    Case("secret_hf_token", "model.revision", {"model": {"revision": "hf_" + "a" * 34}}),
    Case("name_blank", "name", sweep_file(name="  "), (), "sweep"),
    Case("name_too_long", "name", {"name": "x" * 121}, ("121", str(MAX_NAME_CHARS))),
    Case("name_not_unicode", "name", {"name": "run\ud800"}),
    Case("name_too_many_bytes", "name", {"name": "é" * 101}, (str(MAX_NAME_BYTES),)),
    Case("name_control_characters", "name", {"name": "a\tb"}),
    Case("name_direction_marks", "name", {"name": "evil\u202egpj.exe"}),
    Case("name_path_separator", "name", {"name": "a/b"}, ("/", "\\")),
    Case("target_modules_empty", "adapter.target_modules", {"adapter": {"target_modules": " , "}}, ("auto",)),
    Case("eval_metric_name", "train.early_stopping.metric", {"train": {"early_stopping": {"metric": "loss"}}}),
    Case("max_steps_zero", "train.max_steps", {"train": {"max_steps": 0}}, ("num_epochs", "-1")),
    Case("report_to_none", "train.report_to", {"train": {"report_to": ["none", "wandb"]}}, ("none",)),
    Case("trackio_project_name", "train.trackio_project", {"train": {"trackio_project": "my project"}}, ("trackio",)),
    Case("trackio_space_id", "train.trackio_space", {"train": {"trackio_space": "a/b/c"}}, ("user/name",)),
    Case("dataset_path_empty", "data.path.0", {"data": {"path": ["  "]}}),
    Case("dataset_without_path", "data.path.0", {"data": {"path": [{"weight": 2}]}}, ("{path: FILE",)),
    Case("devices_repeated", "launch.devices", {"launch": {"devices": [0, 0]}}),
    Case("reward_needs", "grpo.rewards.0", REGEX, ("pattern", "regex")),
    Case("reward_pattern", "grpo.rewards.0", regex_rewards("(x"), ("pattern", "missing ) at position 2")),
    Case("pattern_invalid", "grpo.rewards.0", regex_rewards("a[b"), ("unterminated character set at position 3",)),
    Case(
        "pattern_memory",
        "grpo.rewards.0",
        regex_rewards("((a{100}){100}){100}"),
        (str(REGEX_LIMITS.memory_bytes // 2**20),),
    ),
    Case(
        "range_and_choices",
        'space."train.learning_rate"',
        sweep_file(space={"train.learning_rate": {"choices": [1e-4], "low": 1e-4, "log": True}}),
        ("low, log",),
        "sweep",
    ),
    Case("range_or_choices", 'space."train.learning_rate"', sweep_file(space={"train.learning_rate": {}}), (), "sweep"),
    Case(
        "range_low_not_below_high",
        'space."train.learning_rate"',
        sweep_file(space={"train.learning_rate": {"low": 2e-3, "high": 1e-3}}),
        ("0.002", "0.001"),
        "sweep",
    ),
    Case(
        "log_range_low",
        'space."train.learning_rate"',
        sweep_file(space={"train.learning_rate": {"low": -1, "high": 1e-3, "log": True}}),
        ("-1",),
        "sweep",
    ),
    Case(
        "log_range_step",
        'space."adapter.r"',
        sweep_file(space={"adapter.r": {"low": 4, "high": 16, "log": True, "step": 2}}),
        (),
        "sweep",
    ),
    Case(
        "executor_address",
        "executor.address",
        sweep_file(executor={"kind": "ray", "address": "head node:6379"}),
        ("HOST:PORT",),
        "sweep",
    ),
    Case(
        "executor_ray_only",
        "executor",
        sweep_file(executor={"kind": "local", "gpus_per_trial": 2, "address": "head:6379"}),
        ("address, gpus_per_trial",),
        "sweep",
    ),
    Case(
        "gpus_per_trial_below_processes",
        "executor.gpus_per_trial",
        sweep_file(base={"launch": {"num_processes": 4}}, executor={"kind": "ray", "gpus_per_trial": 1.5}),
        ("1.5", "4"),
        "sweep",
    ),
    # The search space's own checks (engine.sweeps.space)
    Case(
        "entry_not_a_section",
        'space."train.learning_rate.x"',
        sweep_file(space={"train.learning_rate.x": {"choices": [1]}}),
        ("train.learning_rate", "train.learning_rate.x"),
        "sweep",
    ),
    Case(
        "entry_not_a_top_field_close",
        'space."trian.learning_rate"',
        sweep_file(space={"trian.learning_rate": {"low": 1e-4, "high": 1e-3}}),
        ("trian", "train"),
        "sweep",
    ),
    Case("entry_not_a_top_field", 'space."zzz"', sweep_file(space={"zzz": {"choices": [1]}}), ("zzz",), "sweep"),
    Case(
        "entry_not_a_field_close",
        'space."train.learnig_rate"',
        sweep_file(space={"train.learnig_rate": {"low": 1e-4, "high": 1e-3}}),
        ("train", "learnig_rate", "train.learning_rate"),
        "sweep",
    ),
    Case(
        "entry_not_a_field",
        'space."train.zzzz"',
        sweep_file(space={"train.zzzz": {"choices": [1]}}),
        ("train", "zzzz"),
        "sweep",
    ),
    Case("entry_named_by_sweep", 'space."name"', sweep_file(space={"name": {"choices": ["a", "b"]}}), (), "sweep"),
    Case(
        "choice_twice", LR, sweep_file(space={"train.learning_rate": {"choices": ["3e-3", 0.003]}}), ("0.003",), "sweep"
    ),
    Case(
        "range_on_bool",
        'space."train.packing"',
        sweep_file(space={"train.packing": {"low": 0, "high": 1}}),
        ("train.packing", "{choices: [true, false]}"),
        "sweep",
    ),
    Case(
        "range_on_literal",
        'space."train.optimizer"',
        sweep_file(space={"train.optimizer": {"low": 0, "high": 1}}),
        ("train.optimizer", "'adamw_torch', ", "{choices: [...]}"),
        "sweep",
    ),
    Case(
        "range_on_other",
        'space."adapter.target_modules"',
        sweep_file(space={"adapter.target_modules": {"low": 1, "high": 2}}),
        ("adapter.target_modules", "{choices: [...]}"),
        "sweep",
    ),
    Case(
        "step_on_float",
        LR,
        sweep_file(space={"train.learning_rate": {"low": 0.001, "high": 0.01, "step": 2}}),
        ("train.learning_rate", "{low, high, log}"),
        "sweep",
    ),
    Case("range_not_whole", RANK, sweep_file(space={"adapter.r": {"low": 4.5, "high": 8}}), ("adapter.r",), "sweep"),
    Case(
        "range_off_step", RANK, sweep_file(space={"adapter.r": {"low": 4, "high": 18, "step": 4}}), ("14", "4"), "sweep"
    ),
    Case("low_beyond", RANK, sweep_file(space={"adapter.r": {"low": 0, "high": 8}}), ("low 0", "adapter.r"), "sweep"),
    Case(
        "high_beyond",
        'space."adapter.dropout"',
        sweep_file(space={"adapter.dropout": {"low": 0.1, "high": 1}}),
        ("high 1", "adapter.dropout"),
        "sweep",
    ),
    Case(
        "low_refused",
        'space."train.max_steps"',
        sweep_file(space={"train.max_steps": {"low": 0, "high": 10}}),
        ("low 0", "train.max_steps", "num_epochs"),
        "sweep",
    ),
    Case(
        "high_refused",
        'space."train.warmup"',
        sweep_file(space={"train.warmup": {"low": 0.1, "high": 1.5}}),
        ("high 1.5", "train.warmup"),
        "sweep",
    ),
    Case(
        "value_refused", RANK, sweep_file(space={"adapter.r": {"choices": [8, 2048]}}), ("2048", "adapter.r"), "sweep"
    ),
    Case(
        "objective_not_of_method",
        "objective.metric",
        sweep_file(base={"method": "dpo"}, objective={"metric": "exact_match", "direction": "maximize"}),
        ("exact_match", "dpo", "eval_loss, train_loss, eval_rewards/accuracies"),
        "sweep",
    ),
    Case(
        "objective_needs_eval",
        "objective.metric",
        sweep_file(base=regex_rewards("^[A-Z]"), objective={"metric": "eval_reward", "direction": "maximize"}),
        ("eval_reward", "train.eval_strategy", "reward"),
        "sweep",
    ),
    Case(
        "objective_choice_no_eval",
        'space."train.eval_strategy"',
        sweep_file(base=WITH_EVAL, space={"train.eval_strategy": {"choices": ["steps", "no"]}}, objective={}),
        ("eval_loss",),
        "sweep",
    ),
    Case(
        "exact_match_eval_set",
        "objective.metric",
        sweep_file(objective={"metric": "exact_match", "direction": "maximize"}),
        ("data.eval_path", "data.eval_size"),
        "sweep",
    ),
    Case(
        "objective_maximize",
        "objective.direction",
        sweep_file(base=WITH_EVAL, objective={"metric": "exact_match"}),
        ("exact_match", "maximize"),
        "sweep",
    ),
    Case(
        "objective_minimize",
        "objective.direction",
        sweep_file(objective={"metric": "train_loss", "direction": "maximize"}),
        ("train_loss", "minimize"),
        "sweep",
    ),
    Case("grid_float_range", LR, sweep_file(sampler="grid"), ("choices",), "sweep"),
    Case(
        "first_not_in_space",
        "first_trials.0",
        sweep_file(first_trials=[{"adapter.r": 8}]),
        ("adapter.r", "train.learning_rate"),
        "sweep",
    ),
    Case(
        "first_grid_missing",
        "first_trials.0",
        sweep_file(
            space={"adapter.r": {"choices": [4, 8]}, "train.packing": {"choices": [True, False]}},
            sampler="grid",
            first_trials=[{"adapter.r": 4}],
        ),
        ("train.packing",),
        "sweep",
    ),
    Case(
        "first_not_a_choice",
        "first_trials.0",
        sweep_file(space={"adapter.r": {"choices": [4, 8]}}, first_trials=[{"adapter.r": 16}]),
        ("adapter.r", "16"),
        "sweep",
    ),
    Case(
        "first_outside_range",
        "first_trials.0",
        sweep_file(first_trials=[{"train.learning_rate": 0.5}]),
        ("train.learning_rate", "0.5", "[0.0001, 0.001]"),
        "sweep",
    ),
    Case(
        "first_off_steps",
        "first_trials.0",
        sweep_file(space={"adapter.r": {"low": 4, "high": 16, "step": 4}}, first_trials=[{"adapter.r": 6}]),
        ("adapter.r", "6", "low 4", "step 4"),
        "sweep",
    ),
    # A sweep file's text and its base file (engine.sweeps.config, engine.sweeps.control, engine.config)
    Case("base_not_found", "base", sweep_file(base="gone.yaml"), ("gone.yaml",), "sweep"),
    Case(
        "base_problem",
        "base.train.learning_rate",
        sweep_file(base="run.yaml"),
        ("run.yaml",),
        "sweep",
        files={"run.yaml": "train: {learning_rate: 0}\n"},
    ),
    Case("sweep_not_a_mapping", "", ["name", "base"], (), "sweep"),
    Case("sweep_too_deep", "", DEEP, (), "sweep_text"),
    Case("sweep_not_yaml_at", "", "name: s\nspace: [\n", ("3", "1"), "sweep_text"),
    Case("sweep_not_yaml", "", "name: s\x07\n", ("#x0007",), "sweep_text"),
    Case("config_not_found", "", "gone.yaml", ("gone.yaml",), "config_file"),
    base_file_case("config_unreadable", b"\xff\xfe", "invalid start byte"),
    base_file_case("config_not_yaml", "train: [\n", "while parsing"),
    base_file_case("config_too_deep", DEEP),
    base_file_case("config_empty", "# nothing set\n", "model"),
    base_file_case("config_not_a_mapping", "- train\n", "model"),
    # The form's boxes whose text cannot be read (studio.form.values)
    Case("form_json_invalid", "data.placeholders", {"data.placeholders": "{name: x}"}, ("double quotes",), "form"),
    Case("form_json_unusable", "data.placeholders", {"data.placeholders": '{"n": 1' + "0" * 5000 + "}"}, (), "form"),
    Case("form_mapping_line", "data.placeholders", {"data.placeholders": "name=x\nauthor"}, ("2", "key=value"), "form"),
    Case("form_pick_from_list", "train.report_to", {"train.report_to": 5}, (), "form"),
    Case("form_yaml_invalid", "grpo.rewards", {"grpo.rewards": "[{kind: regex"}, ("YAML",), "form"),
    Case(
        "form_datasets_unreadable",
        "data.path",
        {"data.path": "[{path: a.jsonl"},
        ("[{path: FILE, weight: 2}, {path: FILE}]",),
        "form",
    ),
]
# The checks this machine reaches as one or the other: ray's absence, or a trial's resources once ray is here.
RAY_CASES = {
    "executor_ray_missing": Case(
        "executor_ray_missing", "executor", sweep_file(executor="ray"), ("ray[default]",), "sweep"
    ),
    "executor_no_resources": Case(
        "executor_no_resources",
        "executor",
        sweep_file(executor={"kind": "ray", "gpus_per_trial": 0, "cpus_per_trial": 0}),
        ("gpus_per_trial",),
        "sweep",
    ),
}
RAY_CASE = RAY_CASES["executor_no_resources" if RAY_INSTALLED else "executor_ray_missing"]
UNREACHED = "executor_ray_missing" if RAY_INSTALLED else "executor_no_resources"
