"""The config sections' own checks (their pydantic validators) speak the visitor's language: each check is triggered
through the engine's own validation (parse_config for a run's config, parse_sweep for a sweep file and its search
space, read_sweep_text for its text, load_config for a config file) or the form's (values_to_config, where a box's
text cannot be read), and its English, said again by translate_problem in zh-CN, ja and ko, differs from the English,
keeps the values it holds and leaves no placeholder unfilled. The catalog of these messages as a whole (every key in
every language, no message written inline, every table collected): tests/studio/test_check_tables.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.api import CHECK_MESSAGES, MESSAGES
from engine.config import ConfigError, load_config, parse_config
from engine.sweeps import parse_sweep
from engine.sweeps.config import MAX_SWEEP_NAME_CHARS
from engine.sweeps.control import read_sweep_text
from studio.form.values import FORM_MESSAGES, values_to_config
from studio.i18n import catalog
from studio.i18n.catalog import LANGUAGES, SOURCE, text
from studio.i18n.problems import MULTILINE, NESTED, translate_problem
from tests.studio.check_cases import CASES, RAY_CASE, UNREACHED, Case, sweep_file

OTHERS = [lang for lang in LANGUAGES if lang != SOURCE]
# Every check's template, by name, from the tables the engine writes beside its checks, and the form's.
TEMPLATES = {name: words for table in (*CHECK_MESSAGES, FORM_MESSAGES) for name, words in table.items()}


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
    english = english_of(Case("name_too_long", "name", sweep_file(name="s" * 101), (), "sweep"), monkeypatch, tmp_path)
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
