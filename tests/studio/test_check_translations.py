"""The config sections' own checks (their pydantic validators) speak the visitor's language: each check is triggered
through the engine's own validation (parse_config for a run's config, parse_sweep for a sweep file and its search
space, read_sweep_text for its text, load_config for a config file) or the form's (values_to_config, where a box's
text cannot be read), and its English, said again by translate_problem in zh-CN, ja and ko, differs from the English,
keeps the values it holds and leaves no placeholder unfilled. The catalog of these messages as a whole (every key in
every language, no message written inline, every table collected): tests/studio/test_check_tables.py."""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from engine.api import CHECK_MESSAGES, MESSAGES
from engine.config import ConfigError, load_config, parse_config
from engine.config.names import MAX_NAME_BYTES, MAX_NAME_CHARS
from engine.sweeps import parse_sweep
from engine.sweeps.config import MAX_SWEEP_NAME_CHARS
from engine.sweeps.control import read_sweep_text
from engine.training.methods.reward_spec import REGEX_LIMITS
from studio.form.values import FORM_MESSAGES, values_to_config
from studio.i18n import catalog
from studio.i18n.catalog import LANGUAGES, SOURCE, text
from studio.i18n.problems import MULTILINE, NESTED, translate_problem

OTHERS = [lang for lang in LANGUAGES if lang != SOURCE]
# Every check's template, by name, from the tables the engine writes beside its checks, and the form's.
TEMPLATES = {name: words for table in (*CHECK_MESSAGES, FORM_MESSAGES) for name, words in table.items()}
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


def _sweep(**changes: Any) -> dict[str, Any]:
    """A sweep file that passes every check but those ``changes`` break."""
    return {"name": "s", "base": {}, "space": SPACE, "objective": {"metric": "train_loss"}, **changes}


def _base_file(check: str, content: str | bytes, *values: str) -> Case:
    """A sweep whose base is a run YAML file, ``run.yaml``, that ``check`` refuses (said inside ``base_problem``)."""
    files = {"run.yaml": content}
    return Case(
        check, "base", _sweep(base="run.yaml"), ("run.yaml", *values), "sweep", files=files, inside="base_problem"
    )


def _regex(pattern: str) -> dict[str, Any]:
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
    Case("name_blank", "name", _sweep(name="  "), (), "sweep"),
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
    Case("reward_pattern", "grpo.rewards.0", _regex("(x"), ("pattern", "missing ) at position 2")),
    Case("pattern_invalid", "grpo.rewards.0", _regex("a[b"), ("unterminated character set at position 3",)),
    Case(
        "pattern_memory",
        "grpo.rewards.0",
        _regex("((a{100}){100}){100}"),
        (str(REGEX_LIMITS.memory_bytes // 2**20),),
    ),
    Case(
        "range_and_choices",
        'space."train.learning_rate"',
        _sweep(space={"train.learning_rate": {"choices": [1e-4], "low": 1e-4, "log": True}}),
        ("low, log",),
        "sweep",
    ),
    Case("range_or_choices", 'space."train.learning_rate"', _sweep(space={"train.learning_rate": {}}), (), "sweep"),
    Case(
        "range_low_not_below_high",
        'space."train.learning_rate"',
        _sweep(space={"train.learning_rate": {"low": 2e-3, "high": 1e-3}}),
        ("0.002", "0.001"),
        "sweep",
    ),
    Case(
        "log_range_low",
        'space."train.learning_rate"',
        _sweep(space={"train.learning_rate": {"low": -1, "high": 1e-3, "log": True}}),
        ("-1",),
        "sweep",
    ),
    Case(
        "log_range_step",
        'space."adapter.r"',
        _sweep(space={"adapter.r": {"low": 4, "high": 16, "log": True, "step": 2}}),
        (),
        "sweep",
    ),
    Case(
        "executor_address",
        "executor.address",
        _sweep(executor={"kind": "ray", "address": "head node:6379"}),
        ("HOST:PORT",),
        "sweep",
    ),
    Case(
        "executor_ray_only",
        "executor",
        _sweep(executor={"kind": "local", "gpus_per_trial": 2, "address": "head:6379"}),
        ("address, gpus_per_trial",),
        "sweep",
    ),
    Case(
        "gpus_per_trial_below_processes",
        "executor.gpus_per_trial",
        _sweep(base={"launch": {"num_processes": 4}}, executor={"kind": "ray", "gpus_per_trial": 1.5}),
        ("1.5", "4"),
        "sweep",
    ),
    # The search space's own checks (engine.sweeps.space)
    Case(
        "entry_not_a_section",
        'space."train.learning_rate.x"',
        _sweep(space={"train.learning_rate.x": {"choices": [1]}}),
        ("train.learning_rate", "train.learning_rate.x"),
        "sweep",
    ),
    Case(
        "entry_not_a_top_field_close",
        'space."trian.learning_rate"',
        _sweep(space={"trian.learning_rate": {"low": 1e-4, "high": 1e-3}}),
        ("trian", "train"),
        "sweep",
    ),
    Case("entry_not_a_top_field", 'space."zzz"', _sweep(space={"zzz": {"choices": [1]}}), ("zzz",), "sweep"),
    Case(
        "entry_not_a_field_close",
        'space."train.learnig_rate"',
        _sweep(space={"train.learnig_rate": {"low": 1e-4, "high": 1e-3}}),
        ("train", "learnig_rate", "train.learning_rate"),
        "sweep",
    ),
    Case(
        "entry_not_a_field",
        'space."train.zzzz"',
        _sweep(space={"train.zzzz": {"choices": [1]}}),
        ("train", "zzzz"),
        "sweep",
    ),
    Case("entry_named_by_sweep", 'space."name"', _sweep(space={"name": {"choices": ["a", "b"]}}), (), "sweep"),
    Case("choice_twice", LR, _sweep(space={"train.learning_rate": {"choices": ["3e-3", 0.003]}}), ("0.003",), "sweep"),
    Case(
        "range_on_bool",
        'space."train.packing"',
        _sweep(space={"train.packing": {"low": 0, "high": 1}}),
        ("train.packing", "{choices: [true, false]}"),
        "sweep",
    ),
    Case(
        "range_on_literal",
        'space."train.optimizer"',
        _sweep(space={"train.optimizer": {"low": 0, "high": 1}}),
        ("train.optimizer", "'adamw_torch', ", "{choices: [...]}"),
        "sweep",
    ),
    Case(
        "range_on_other",
        'space."adapter.target_modules"',
        _sweep(space={"adapter.target_modules": {"low": 1, "high": 2}}),
        ("adapter.target_modules", "{choices: [...]}"),
        "sweep",
    ),
    Case(
        "step_on_float",
        LR,
        _sweep(space={"train.learning_rate": {"low": 0.001, "high": 0.01, "step": 2}}),
        ("train.learning_rate", "{low, high, log}"),
        "sweep",
    ),
    Case("range_not_whole", RANK, _sweep(space={"adapter.r": {"low": 4.5, "high": 8}}), ("adapter.r",), "sweep"),
    Case("range_off_step", RANK, _sweep(space={"adapter.r": {"low": 4, "high": 18, "step": 4}}), ("14", "4"), "sweep"),
    Case("low_beyond", RANK, _sweep(space={"adapter.r": {"low": 0, "high": 8}}), ("low 0", "adapter.r"), "sweep"),
    Case(
        "high_beyond",
        'space."adapter.dropout"',
        _sweep(space={"adapter.dropout": {"low": 0.1, "high": 1}}),
        ("high 1", "adapter.dropout"),
        "sweep",
    ),
    Case(
        "low_refused",
        'space."train.max_steps"',
        _sweep(space={"train.max_steps": {"low": 0, "high": 10}}),
        ("low 0", "train.max_steps", "num_epochs"),
        "sweep",
    ),
    Case(
        "high_refused",
        'space."train.warmup"',
        _sweep(space={"train.warmup": {"low": 0.1, "high": 1.5}}),
        ("high 1.5", "train.warmup"),
        "sweep",
    ),
    Case("value_refused", RANK, _sweep(space={"adapter.r": {"choices": [8, 2048]}}), ("2048", "adapter.r"), "sweep"),
    Case(
        "objective_needs_eval",
        "objective.metric",
        _sweep(objective={"metric": "eval_loss"}),
        ("eval_loss", "train.eval_strategy"),
        "sweep",
    ),
    Case(
        "objective_choice_no_eval",
        'space."train.eval_strategy"',
        _sweep(base=WITH_EVAL, space={"train.eval_strategy": {"choices": ["steps", "no"]}}, objective={}),
        ("eval_loss",),
        "sweep",
    ),
    Case(
        "exact_match_method",
        "objective.metric",
        _sweep(base={"method": "dpo"}, objective={"metric": "exact_match", "direction": "maximize"}),
        ("exact_match", "dpo", "eval_loss"),
        "sweep",
    ),
    Case(
        "exact_match_eval_set",
        "objective.metric",
        _sweep(objective={"metric": "exact_match", "direction": "maximize"}),
        ("data.eval_path", "data.eval_size"),
        "sweep",
    ),
    Case(
        "exact_match_direction",
        "objective.direction",
        _sweep(base=WITH_EVAL, objective={"metric": "exact_match"}),
        ("maximize",),
        "sweep",
    ),
    Case("grid_float_range", LR, _sweep(sampler="grid"), ("choices",), "sweep"),
    Case(
        "first_not_in_space",
        "first_trials.0",
        _sweep(first_trials=[{"adapter.r": 8}]),
        ("adapter.r", "train.learning_rate"),
        "sweep",
    ),
    Case(
        "first_grid_missing",
        "first_trials.0",
        _sweep(
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
        _sweep(space={"adapter.r": {"choices": [4, 8]}}, first_trials=[{"adapter.r": 16}]),
        ("adapter.r", "16"),
        "sweep",
    ),
    Case(
        "first_outside_range",
        "first_trials.0",
        _sweep(first_trials=[{"train.learning_rate": 0.5}]),
        ("train.learning_rate", "0.5", "[0.0001, 0.001]"),
        "sweep",
    ),
    Case(
        "first_off_steps",
        "first_trials.0",
        _sweep(space={"adapter.r": {"low": 4, "high": 16, "step": 4}}, first_trials=[{"adapter.r": 6}]),
        ("adapter.r", "6", "low 4", "step 4"),
        "sweep",
    ),
    # A sweep file's text and its base file (engine.sweeps.config, engine.sweeps.control, engine.config)
    Case("base_not_found", "base", _sweep(base="gone.yaml"), ("gone.yaml",), "sweep"),
    Case(
        "base_problem",
        "base.train.learning_rate",
        _sweep(base="run.yaml"),
        ("run.yaml",),
        "sweep",
        files={"run.yaml": "train: {learning_rate: 0}\n"},
    ),
    Case("sweep_not_a_mapping", "", ["name", "base"], (), "sweep"),
    Case("sweep_too_deep", "", DEEP, (), "sweep_text"),
    Case("sweep_not_yaml_at", "", "name: s\nspace: [\n", ("3", "1"), "sweep_text"),
    Case("sweep_not_yaml", "", "name: s\x07\n", ("#x0007",), "sweep_text"),
    Case("config_not_found", "", "gone.yaml", ("gone.yaml",), "config_file"),
    _base_file("config_unreadable", b"\xff\xfe", "invalid start byte"),
    _base_file("config_not_yaml", "train: [\n", "while parsing"),
    _base_file("config_too_deep", DEEP),
    _base_file("config_empty", "# nothing set\n", "model"),
    _base_file("config_not_a_mapping", "- train\n", "model"),
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
        "executor_ray_missing", "executor", _sweep(executor="ray"), ("ray[default]",), "sweep"
    ),
    "executor_no_resources": Case(
        "executor_no_resources",
        "executor",
        _sweep(executor={"kind": "ray", "gpus_per_trial": 0, "cpus_per_trial": 0}),
        ("gpus_per_trial",),
        "sweep",
    ),
}
RAY_CASE = RAY_CASES["executor_no_resources" if RAY_INSTALLED else "executor_ray_missing"]
UNREACHED = "executor_ray_missing" if RAY_INSTALLED else "executor_no_resources"


def holder(check: str, inside: str = "") -> str:
    """The check whose message holds ``check``'s: a pattern's problem is said inside the reward's ``pattern:
    {problem}``, a base file's inside ``{problem} (in {path})`` (a case's ``inside``); "" for none."""
    return inside or ("reward_pattern" if check.startswith("pattern_") else "")


def template_of(check: str) -> str:
    """The whole message a check writes, inside the message that holds it."""
    words, held = TEMPLATES[check], holder(check)
    return TEMPLATES[held].replace("{" + NESTED + "}", words) if held else words


def reads_as(english: str, check: str, inside: str = "") -> bool:
    """Whether ``english`` is a message of ``check``'s template (inside the one that holds it, if any)."""
    held = holder(check, inside)
    if held:
        outer = catalog.template_pattern(TEMPLATES[held], MULTILINE).fullmatch(english)
        english = outer[NESTED] if outer else ""
    return catalog.template_pattern(TEMPLATES[check], MULTILINE).fullmatch(english) is not None


# Said by their templates alone: the other of the two above, and a pattern that takes too long to compile (within the
# memory cap, past the CPU second: no pattern does that reliably on a machine of unknown speed).
BY_TEMPLATE = {"pattern_slow": template_of("pattern_slow"), UNREACHED: template_of(UNREACHED)}
TRIGGERED = [*CASES, RAY_CASE]


def english_of(case: Case, monkeypatch: pytest.MonkeyPatch, folder: Path) -> str:
    """The message of the check ``case`` breaks, as the engine's validation writes it at the case's field (a sweep's
    base file, and a config file, are read from ``folder``)."""
    for name, value in case.env.items():
        monkeypatch.setenv(name, value)
    for name, content in case.files.items():
        (folder / name).write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    readers = {
        "config": lambda: parse_config(case.data),
        "sweep": lambda: parse_sweep(case.data, folder),
        "sweep_text": lambda: read_sweep_text(case.data, folder),
        "config_file": lambda: load_config(folder / case.data),
        "form": lambda: values_to_config(case.data),
    }
    with pytest.raises(ConfigError) as refused:
        readers[case.kind]()
    problems = refused.value.problems
    messages = [problem.message for problem in problems if problem.field == case.field]
    assert len(messages) == 1, [str(problem) for problem in problems]
    return messages[0]


def assert_said_again(english: str, values: tuple[str, ...]) -> None:
    """Each other language says ``english`` in its own words with ``values``, every placeholder filled in."""
    for value in values:
        assert value in english, (value, english)
    for lang in OTHERS:
        said = translate_problem(english, lang)
        assert said != english and said == said.strip(), (lang, said)
        assert catalog.placeholders(said) == set(), (lang, said)
        for value in values:
            assert value in said, (lang, value, said)
    assert translate_problem(english, SOURCE) == english


def test_every_check_has_a_case() -> None:
    """Each template of CHECK_MESSAGES (and of the form's) is triggered below, or said by its template alone (what this
    machine cannot reach); a template added without a case fails here."""
    covered = [case.check for case in TRIGGERED] + list(BY_TEMPLATE)
    assert sorted(covered) == sorted(TEMPLATES)
    assert len(TEMPLATES) >= 80


@pytest.mark.parametrize("case", TRIGGERED, ids=[case.check for case in TRIGGERED])
def test_a_refused_value_is_said_in_the_visitors_language(
    case: Case, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    english = english_of(case, monkeypatch, tmp_path)
    assert reads_as(english, case.check, case.inside), (TEMPLATES[case.check], english)
    assert not english.startswith("Value error"), english  # pydantic's prefix is not the check's words
    assert_said_again(english, case.values)


@pytest.mark.parametrize("name", sorted(BY_TEMPLATE))
def test_a_check_this_machine_does_not_reach_is_said_by_its_template(name: str) -> None:
    assert_said_again(BY_TEMPLATE[name], ())


def test_the_values_are_said_again_as_the_engine_wrote_them(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    case = next(case for case in CASES if case.check == "name_too_long")
    english = english_of(case, monkeypatch, tmp_path)
    assert english == "too long: 121 characters, at most 120"
    for lang in OTHERS:
        assert translate_problem(english, lang) == text("check.name_too_long", lang, length="121", limit="120")


def test_a_sweeps_name_is_held_to_its_own_length_with_the_same_words(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    english = english_of(Case("name_too_long", "name", _sweep(name="s" * 101), (), "sweep"), monkeypatch, tmp_path)
    assert english == f"too long: 101 characters, at most {MAX_SWEEP_NAME_CHARS}"
    assert_said_again(english, ("101", str(MAX_SWEEP_NAME_CHARS)))


def test_a_message_inside_a_message_is_said_again_in_turn(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """``pattern: {problem}`` says the pattern's problem in the visitor's language; a reward's own message that
    starts with ``pattern:`` is read as its own template, not as a problem inside another."""
    invalid = english_of(next(case for case in CASES if case.check == "reward_pattern"), monkeypatch, tmp_path)
    assert invalid == "pattern: not a valid regular expression: missing ) at position 2"
    missing = english_of(next(case for case in CASES if case.check == "reward_needs"), monkeypatch, tmp_path)
    assert missing == "pattern: a regex reward needs it"
    for lang in OTHERS:
        inner = text("check.pattern_invalid", lang, error="missing ) at position 2")
        assert translate_problem(invalid, lang) == text("check.reward_pattern", lang, problem=inner)
        assert translate_problem(missing, lang) == text("check.reward_needs", lang, key="pattern", kind="regex")
    unknown = "pattern: some words no template wrote"
    assert translate_problem(unknown, "ja") == unknown


def test_a_check_that_says_what_pydantic_says_is_one_key(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A name that is not valid Unicode reads as pydantic's string_unicode: the catalog keeps one key per message."""
    assert "check.name_not_unicode" not in catalog.check_words()
    english = english_of(next(case for case in CASES if case.check == "name_not_unicode"), monkeypatch, tmp_path)
    assert english == catalog.problem_words()["problem.string_unicode"]
    for lang in OTHERS:
        assert translate_problem(english, lang) == text("problem.string_unicode", lang)


def case_of(check: str) -> Case:
    return next(case for case in CASES if case.check == check)


def test_a_bound_a_range_passes_is_said_in_the_words_of_the_config_errors(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A range end past the field's bound says the bound as pydantic's own message does, said again in turn."""
    english = english_of(case_of("low_beyond"), monkeypatch, tmp_path)
    assert english == "low 0 is outside the field's bounds: adapter.r must be >= 1"
    for lang in OTHERS:
        bound = text("problem.greater_than_equal", lang, ge="1")
        assert translate_problem(english, lang) == text(
            "check.low_beyond", lang, value="0", path="adapter.r", problem=bound
        )


def test_a_refused_choice_says_the_fields_own_problem(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A choice (or a range's end) the run config refuses names the field and its problem, said again in turn; the
    end a range names is read as its own template, not as part of a choice."""
    english = english_of(case_of("value_refused"), monkeypatch, tmp_path)
    assert english == "2048 is refused: adapter.r: must be <= 1024"
    low = english_of(case_of("low_refused"), monkeypatch, tmp_path)
    zero = catalog.english()["check.max_steps_zero"]
    assert low == f"low 0 is refused: train.max_steps: {zero}"
    for lang in OTHERS:
        bound = text("problem.less_than_equal", lang, le="1024")
        said = text("check.value_refused", lang, value="2048", field="adapter.r", problem=bound)
        assert translate_problem(english, lang) == said
        said = text(
            "check.low_refused", lang, value="0", field="train.max_steps", problem=text("check.max_steps_zero", lang)
        )
        assert translate_problem(low, lang) == said


def test_a_field_the_run_config_lacks_is_named_with_its_section(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The whole config is a section of its own words: "the run config" is said in the visitor's language too."""
    english = english_of(case_of("entry_not_a_top_field_close"), monkeypatch, tmp_path)
    assert english == "not a field of the run config: the run config has no trian (did you mean train?)"
    for lang in OTHERS:
        said = translate_problem(english, lang)
        assert said == text("check.entry_not_a_top_field_close", lang, name="trian", close="train")
        assert "the run config" not in said


def test_a_base_files_problem_is_said_with_the_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A problem of a sweep's base file keeps the file's path, its own words said again in turn; one of PyYAML's
    errors, over several lines, stays as PyYAML wrote it."""
    english = english_of(case_of("base_problem"), monkeypatch, tmp_path)
    path = tmp_path / "run.yaml"
    assert english == f"must be > 0.0 (in {path})"
    broken = english_of(case_of("config_not_yaml"), monkeypatch, tmp_path)
    error = broken.removeprefix(f"{path} is not valid YAML: ").removesuffix(f" (in {path})")
    assert "\n" in error and error != broken
    for lang in OTHERS:
        inner = text("problem.greater_than", lang, gt="0.0")
        assert translate_problem(english, lang) == text("check.base_problem", lang, problem=inner, path=path)
        inner = text("check.config_not_yaml", lang, path=path, error=error)
        assert translate_problem(broken, lang) == text("check.base_problem", lang, problem=inner, path=path)


def test_a_key_at_fault_is_said_in_the_visitors_language() -> None:
    """A mapping's key at fault (not its value) is said as such, with the key's problem said again in turn."""
    with pytest.raises(ConfigError) as refused:
        parse_config({"data": {"placeholders": {1: "x"}}})
    english = refused.value.by_field()["data.placeholders.1"]
    assert english == "the key must be text"
    for lang in OTHERS:
        said = text("problem.about_key", lang, problem=text("problem.string_type", lang))
        assert translate_problem(english, lang) == said != english


def test_a_number_or_a_checkbox_the_form_cannot_read_is_said_in_pydantics_words() -> None:
    """The form's own reading of a number or a checkbox refuses in the words pydantic's errors use, said again."""
    with pytest.raises(ConfigError) as refused:
        values_to_config({"train.learning_rate": "fast", "model.trust_remote_code": "maybe"})
    errors = refused.value.by_field()
    assert errors == {
        "train.learning_rate": MESSAGES["float_parsing"],
        "model.trust_remote_code": MESSAGES["bool_parsing"],
    }
    for lang in OTHERS:
        assert translate_problem(errors["train.learning_rate"], lang) == text("problem.float_parsing", lang)
        assert translate_problem(errors["model.trust_remote_code"], lang) == text("problem.bool_parsing", lang)
