"""The studio's languages stay whole: every word the studio uses (declared in the code with ``key()`` / ``t()``,
collected while the page is built in both modes) and every field of the config form has its text in every
language, no language file holds a word nothing uses, and the texts fill in the same values.

The set of used keys is computed, not listed: studio.i18n.catalog records each key as the modules are imported and
the page is built (studio.i18n).
"""

from __future__ import annotations

from pathlib import Path

import gradio as gr
import pytest

from engine.config import RunConfig
from studio.app import build_app
from studio.demo.policy import DemoPolicy
from studio.form.schema import SectionSpec, schema_tree
from studio.i18n import catalog
from studio.i18n.catalog import LANGUAGES, SOURCE, english, language_file, placeholders, text
from studio.i18n.problems import translate_problem
from studio.i18n.widgets import core_module, i18n

OTHERS = [lang for lang in LANGUAGES if lang != SOURCE]


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> list[gr.Blocks]:
    """The page built as one's own studio and as the public demo."""
    built = []
    for policy in (None, DemoPolicy(enabled=True)):
        workspace = tmp_path_factory.mktemp("workspace")
        built.append(build_app(workspace, policy) if policy else build_app(workspace))
    return built


@pytest.fixture(scope="module")
def used(pages: list[gr.Blocks]) -> frozenset[str]:
    """Every key the studio uses, as the pages were built."""
    return catalog.used_keys()


def test_no_event_lets_gradio_check_a_number_s_bounds(pages: list[gr.Blocks]) -> None:
    """Gradio refuses a number past a box's ``minimum`` / ``maximum`` before the handler runs, in English and naming
    no field (Evaluate's Max rows at -5 said "Value -5 is less than minimum value 1." on a Korean page): an event
    that takes a bounded box does not preprocess (the form's fields: studio.train.tab), and the other boxes set no
    bounds, their handlers say what is wrong in the page's language."""
    checked = [
        f"{box.label} (minimum {box.minimum}, maximum {box.maximum}) in {event.name}"
        for page in pages
        for event in page.fns.values()
        if event.preprocess and event.fn is not None  # a page script alone reaches no server check
        for box in event.inputs
        if isinstance(box, gr.Number) and (box.minimum is not None or box.maximum is not None)
    ]
    assert checked == []


def schema_keys() -> list[str]:
    """The keys of every field and section of the config form, walked as the form renders them."""
    keys = []
    for node in catalog.schema_nodes(schema_tree(RunConfig)):
        keys.append(f"field.{node.path}.label")
        if node.help:
            keys.append(f"field.{node.path}.help")
    return keys


def test_the_page_uses_a_good_number_of_keys(used: frozenset[str]) -> None:
    studio_keys = used - set(catalog.schema_words())  # the form's fields count in any case
    assert len(studio_keys) > 120, "the page was not built, or its words are not declared"
    assert {"tab.train", "tab.monitor", "train.start", "field.train.learning_rate.help"} <= used


def test_every_field_and_section_of_the_form_is_translated(used: frozenset[str]) -> None:
    """The form's words come from the schema: each field's and section's label and help is a key in use, with its
    text in every language."""
    keys = schema_keys()
    assert len(keys) > 200
    assert sorted(set(keys) - used) == []
    for lang in OTHERS:
        assert sorted(set(keys) - set(language_file(lang))) == [], lang


@pytest.mark.parametrize("lang", OTHERS)
def test_every_used_key_has_its_text_in_every_language(used: frozenset[str], lang: str) -> None:
    missing = sorted(used - set(language_file(lang)))
    assert missing == [], f"{lang}.json lacks {len(missing)} keys: {missing[:20]}"


def test_every_used_key_has_its_english(used: frozenset[str]) -> None:
    assert sorted(used - set(english())) == []


@pytest.mark.parametrize("lang", list(LANGUAGES))
def test_no_language_file_holds_a_key_nothing_uses(used: frozenset[str], lang: str) -> None:
    unused = sorted(set(language_file(lang)) - used)
    assert unused == [], f"{lang}.json holds {len(unused)} keys nothing uses: {unused[:20]}"


def test_no_translation_is_stale(used: frozenset[str]) -> None:
    """Each translation was made from the English the studio shows now: a changed field description or message
    lists its key here until every language says it again (then ``python -m studio.stamp_translations``)."""
    assert catalog.stale(used) == []
    assert sorted(set(catalog.translated_from()) - used) == []


def test_english_of_fields_and_messages_stays_where_it_is_written() -> None:
    """en.json holds the studio's words only: the schema's and the engine's English are their source."""
    written = set(catalog.schema_words()) | set(catalog.problem_words()) | set(catalog.chart_words())
    assert sorted(set(language_file(SOURCE)) & written) == []


@pytest.mark.parametrize("lang", OTHERS)
def test_translations_fill_in_the_same_values(lang: str) -> None:
    wrong = {
        name: words
        for name, words in language_file(lang).items()
        if name in english() and placeholders(words) != placeholders(english()[name])
    }
    assert wrong == {}


@pytest.mark.parametrize("lang", OTHERS)
def test_translations_are_not_left_empty_or_in_english(lang: str) -> None:
    """A text longer than a few words that reads exactly as the English was not translated."""
    same = [
        name
        for name, words in language_file(lang).items()
        if not words.strip() or (words == english().get(name) and len(words.split()) > 3)
    ]
    assert same == []


def test_gradio_gets_every_language() -> None:
    translations = i18n().translations_dict
    assert list(translations) == list(LANGUAGES)
    assert translations["en"]["field.train.learning_rate.label"] == "Learning rate"
    assert translations["zh-CN"]["field.train.learning_rate.label"] == "学习率"


def test_the_page_script_can_switch_gradios_language() -> None:
    """assets/language.js switches the page with the function Gradio's own settings panel uses."""
    module = core_module()
    assert module.startswith("assets/core-") and module.endswith(".js")


@pytest.mark.parametrize(
    ("cookie", "accept", "expected"),
    [
        ("ja", "zh-CN,zh;q=0.9", "ja"),  # the page's choice wins
        (None, "zh-CN,zh;q=0.9,en;q=0.8", "zh-CN"),
        (None, "zh", "zh-CN"),
        (None, "zh-Hans-SG", "zh-CN"),
        (None, "zh-TW,ko;q=0.5", "ko"),  # traditional Chinese is not offered: the next language
        (None, "fr-FR,ja;q=0.7,ko;q=0.9", "ko"),
        (None, "ko-KR", "ko"),
        ("xx", "de-DE", "en"),
        (None, None, "en"),
    ],
)
def test_the_language_of_a_request(cookie: str | None, accept: str | None, expected: str) -> None:
    assert catalog.pick_language(cookie, accept) == expected


def test_engine_messages_are_said_again_in_the_visitors_language() -> None:
    assert translate_problem("must be > 0.0", "zh-CN") == text("problem.greater_than", "zh-CN", gt="0.0")
    assert "0.0" in translate_problem("must be > 0.0", "ja")
    assert translate_problem("must be > 0.0", "en") == "must be > 0.0"
    suggested = translate_problem("unknown key (did you mean rank?)", "ko")
    assert "rank" in suggested and suggested.startswith(text("problem.unknown_key", "ko"))
    assert translate_problem("unknown key", "zh-CN") == text("problem.unknown_key", "zh-CN")
    assert translate_problem("a rule across fields", "zh-CN") == "a rule across fields"  # no template: as written


def test_a_language_file_is_one_flat_mapping_of_text() -> None:
    for lang in LANGUAGES:
        words = language_file(lang)
        assert words and all(isinstance(k, str) and isinstance(v, str) for k, v in words.items()), lang
        assert (Path(catalog.LOCALES_DIR) / f"{lang}.json").is_file()


def test_sections_are_walked_too() -> None:
    assert any(isinstance(node, SectionSpec) for node in catalog.schema_nodes(schema_tree(RunConfig)))
    assert "field.train.early_stopping.label" in schema_keys()
