"""The studio's words in every language it speaks, with no Gradio in it: the catalog, the keys in use, and which
language a request wants.

One JSON file per language in ``assets/locales/`` maps a stable key to its text (``en.json`` is the source). Two
kinds of English stay where they are written instead, and the other languages translate them under keys made
from where they come from: the config form's labels and help texts (the field's name and description in
engine.config's schema: ``field.<path>.label`` / ``field.<path>.help``, ``dataset_field.<name>...`` for a dataset
of a list, engine.config.DatasetEntry), and the engine's validation messages (engine.config.schema.errors.MESSAGES:
``problem.<kind>``; what the config sections' own checks say, a run's and a sweep file's, and the form's where a box
cannot be read: ``check.<name>``; its rules across fields, the config's, the machine's and each method's:
``rule.<name>``), and the titles of the training methods' own charts (``chart.<metric>``, ``unit.<unit>``).

Every key the studio uses is declared where it is used, with ``key()`` (a module constant, for text the server
builds) or ``studio.i18n.widgets.t()`` (a component's label), at import or while the page is built; ``used_keys()``
is then what tests/studio/test_translations.py holds every language file to: each used key in every language,
no key that nothing uses.

The page says which language it shows in the ``ts_lang`` cookie (assets/language.js); ``pick_language`` reads
it, else the browser's Accept-Language, for the text the server builds (``text``).
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from pydantic import BaseModel

from engine.api import (
    ABOUT_KEY,
    CHECK_MESSAGES,
    EVAL_FILE_PREFIX,
    EVAL_LABEL,
    FORMAT_MISFIT,
    FORMAT_WORDS,
    HARDWARE_MESSAGES,
    MESSAGES,
    METHODS,
    MISFIT_ADVICE,
    MODALITY_MISFIT,
    PRUNE_REASONS,
    RULE_MESSAGES,
    STOPPING_MESSAGES,
    SUGGESTION,
    TRACKER_MESSAGES,
    UNKNOWN_KEY,
    WARNINGS,
    DatasetEntry,
    RunConfig,
    SamplingParams,
)
from studio.form.schema import FieldSpec, SectionSpec, schema_tree
from studio.form.values import FORM_MESSAGES
from studio.path_guard import ASSETS_DIR

LOCALES_DIR = ASSETS_DIR / "locales"
SOURCE = "en"
COOKIE = "ts_lang"  # set by assets/language.js to the language the page shows
# What English each translation was made from (a fingerprint per key): a changed English text shows up as stale.
SOURCES_FILE = LOCALES_DIR / "translated-from.json"
NAME_KEY = "language.name"  # each file names its language in itself, for the header's menu
FIRST = ("en", "zh-CN", "ja", "ko")  # the menu's order; a language added later comes after them


def _languages() -> dict[str, str]:
    """Code -> name of every language with a file in LOCALES_DIR (the code is the file's name, as Gradio's
    frontend spells it: zh-CN, ja, pt-BR)."""
    found = {}
    for path in LOCALES_DIR.glob("*.json"):
        if path != SOURCES_FILE:
            found[path.stem] = json.loads(path.read_text(encoding="utf-8")).get(NAME_KEY, path.stem)
    order = [code for code in FIRST if code in found] + sorted(code for code in found if code not in FIRST)
    return {code: found[code] for code in order}


LANGUAGES = _languages()  # the languages the header offers, each named in itself
# The schemas the form builds widgets from, by the key prefix of their fields' words (the Chat tab's sampling
# settings too: engine.chat.client.SamplingParams).
SCHEMA_ROOTS: dict[str, type[BaseModel]] = {
    "field": RunConfig,
    "dataset_field": DatasetEntry,
    "sampling": SamplingParams,
}
_PLACEHOLDER = re.compile(r"\{(\w+)\}")
_NOT_A_NAME = re.compile(r"\W+")  # what a key made from words has in place of spaces and punctuation: "_"

_used: set[str] = set()


def key(name: str) -> str:
    """Declare that the studio uses ``name`` and return it (KeyError when no English text exists for it, so a
    misspelt key fails where it is written)."""
    if name not in english():
        raise KeyError(f"no English text for the key {name!r}: add it to {LOCALES_DIR / 'en.json'}")
    _used.add(name)
    return name


def used_keys() -> frozenset[str]:
    """Every key declared so far (after the studio's modules are imported and its page built: all of them), and
    every field's and section's words: they are in use as long as the field exists in the schema, also where the
    form shows a field under a heading of the studio's own (the data section in the dataset panel). A listed
    dataset's fields (``dataset_field.``) count where a widget shows them: the form shows two of them."""
    return frozenset(_used) | frozenset(name for name in schema_words() if name.startswith("field."))


def text(name: str, lang: str | None = None, /, **values: object) -> str:
    """The text of ``name`` in ``lang`` (English where that language lacks it), its ``{placeholders}`` filled in
    from ``values``."""
    words = translations(lang or SOURCE).get(name) or english()[name]
    return words.format(**values) if values else words


def means(name: str, shown: object) -> bool:
    """Whether ``shown`` (a label as a page sent it back, in whatever language the page showed) is ``name``'s text
    in one of the languages."""
    return any(translations(lang).get(name) == shown for lang in LANGUAGES)


class SaidError(ValueError):
    """A refusal the studio says in the page's language: its English as the message (for logs and English callers),
    its key and values to say it in another language (``said``)."""

    def __init__(self, name: str, **values: object):
        super().__init__(text(name, SOURCE, **values))
        self.name, self.values = name, values

    def said(self, lang: str) -> str:
        """The message in ``lang``."""
        return text(self.name, lang, **self.values)


# --- the catalog ------------------------------------------------------------------------------------------------


@functools.cache
def language_file(lang: str) -> dict[str, str]:
    """What ``assets/locales/<lang>.json`` holds ({} for a language without a file)."""
    path = LOCALES_DIR / f"{lang}.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


@functools.cache
def schema_words() -> dict[str, str]:
    """The English of every form field and section: ``field.<path>.label`` (its name, as the form writes it) and
    ``.help`` (its description, where it has one)."""
    words: dict[str, str] = {}
    for prefix, model in SCHEMA_ROOTS.items():
        for node in schema_nodes(schema_tree(model)):
            words[f"{prefix}.{node.path}.label"] = node.title if isinstance(node, SectionSpec) else node.label
            if node.help:
                words[f"{prefix}.{node.path}.help"] = node.help
    return words


def schema_nodes(section: SectionSpec) -> Iterator[FieldSpec | SectionSpec]:
    """Every section and leaf field below ``section``, depth first, in schema order."""
    for child in section.children:
        yield child
        if isinstance(child, SectionSpec):
            yield from schema_nodes(child)


@functools.cache
def problem_words() -> dict[str, str]:
    """The English of the engine's validation messages (one key per distinct message), ``{placeholders}`` and all."""
    words = {
        "problem.unknown_key": UNKNOWN_KEY,
        "problem.suggestion": SUGGESTION.strip(),
        "problem.about_key": ABOUT_KEY,
    }
    for kind, message in MESSAGES.items():
        if message not in words.values():
            words[f"problem.{kind}"] = message
    return words


@functools.cache
def check_words() -> dict[str, str]:
    """The English of what the config sections' own checks say (``check.<name>``: a blank dataset path, a repeated
    GPU, a run's or a sweep's name, a search range), from the tables written beside them (engine.api.CHECK_MESSAGES),
    and of what the form says where a box's text cannot be read (studio.form.values.FORM_MESSAGES). One key per
    distinct message: a check that says what one of pydantic's errors says is said by that key."""
    said = set(problem_words().values())
    words: dict[str, str] = {}
    for messages in (*CHECK_MESSAGES, FORM_MESSAGES):
        for name, message in messages.items():
            if message in said:
                continue
            if words.setdefault(f"check.{name}", message) != message:
                raise ValueError(f"two checks are named {name!r} and say different things: rename one")
    return words


@functools.cache
def rule_words() -> dict[str, str]:
    """The English of the rules across fields (``rule.<name>``): engine.config's and early stopping's, what this
    machine cannot run (engine.training.hardware, engine.training.trackers), and each method's own, from the registry
    (``Method.rule_messages``: a method added with rules brings its words). A rule the methods share is one key."""
    words: dict[str, str] = {}
    tables = [RULE_MESSAGES, STOPPING_MESSAGES, HARDWARE_MESSAGES, TRACKER_MESSAGES]
    for messages in tables + [method.rule_messages for method in METHODS.values()]:
        for name, message in messages.items():
            if words.setdefault(f"rule.{name}", message) != message:
                raise ValueError(f"two rules are named {name!r} and say different things: rename one")
    return words


@functools.cache
def trains_on_words() -> dict[str, str]:
    """The English of what each method trains on (``Method.trains_on``: "whole pairs"), which a rule's message names
    (``rule.trains_on.<the words, with underscores>``, one key for the methods that say the same)."""
    return {
        "rule.trains_on." + _NOT_A_NAME.sub("_", method.trains_on.lower()).strip("_"): method.trains_on
        for method in METHODS.values()
        if method.trains_on
    }


def warning_words() -> dict[str, str]:
    """The English of the dataset check's warnings (engine.data.warnings.WARNINGS): ``warning.<kind>``, and
    ``warning.eval_label`` / ``warning.eval_file``, the words that say a warning is about the eval rows or file."""
    return {
        **{f"warning.{kind}": words for kind, words in WARNINGS.items()},
        "warning.eval_label": EVAL_LABEL,
        "warning.eval_file": EVAL_FILE_PREFIX,
    }


def misfit_words() -> dict[str, str]:
    """The English of the refusal of data that the method does not train on (engine.training.method_data):
    ``misfit.message``, its advice ``misfit.advice.<kind>`` and how a format reads ``misfit.format.<format>``; and of
    images for a text model or text for a vision-language one, ``misfit.modality.<kind>``."""
    return {
        "misfit.message": FORMAT_MISFIT,
        **{f"misfit.modality.{kind}": words for kind, words in MODALITY_MISFIT.items()},
        **{f"misfit.advice.{kind}": words for kind, words in MISFIT_ADVICE.items()},
        **{f"misfit.format.{name}": words for name, words in FORMAT_WORDS.items()},
    }


def prune_words() -> dict[str, str]:
    """The English of why a sweep's pruner stopped a trial (engine.sweeps.summary.PRUNE_REASONS):
    ``sweep.pruned.<pruner>``."""
    return {f"sweep.pruned.{kind}": words for kind, words in PRUNE_REASONS.items()}


def prune_keys() -> list[str]:
    """The keys of ``prune_words``, declared in use (the Monitor and the Sweeps tab say a pruned trial's reason)."""
    return [key(name) for name in prune_words()]


@functools.cache
def chart_words() -> dict[str, str]:
    """The English of the charts the training methods add to the Monitor: ``chart.<metric>`` (its title) and
    ``unit.<unit>`` (its axis)."""
    from engine.api import method_charts

    words = {}
    for metric, chart in method_charts().items():
        words[f"chart.{metric}"] = chart.title
        words[f"unit.{chart.unit}"] = chart.unit
    return words


@functools.cache
def english() -> dict[str, str]:
    """Every English text: the studio's (en.json), the schema's, the engine's messages, checks and rules, and its
    methods' charts."""
    engine = {**problem_words(), **check_words(), **rule_words(), **trains_on_words(), **warning_words()}
    engine |= {**misfit_words(), **prune_words(), **chart_words()}
    return {**language_file(SOURCE), **schema_words(), **engine}


def translations(lang: str) -> dict[str, str]:
    """Every text of ``lang`` ({} for a language the studio does not speak)."""
    if lang == SOURCE:
        return english()
    return language_file(lang) if lang in LANGUAGES else {}


def fingerprint(words: str) -> str:
    """A short fingerprint of an English text."""
    return hashlib.sha256(words.encode("utf-8")).hexdigest()[:12]


def translated_from() -> dict[str, str]:
    """Key -> the fingerprint of the English its translations were made from (SOURCES_FILE)."""
    return json.loads(SOURCES_FILE.read_text(encoding="utf-8")) if SOURCES_FILE.is_file() else {}


def stale(keys: frozenset[str] | set[str]) -> list[str]:
    """The ``keys`` whose English changed (or is new) since their translations were made."""
    made_from = translated_from()
    return sorted(name for name in keys if made_from.get(name) != fingerprint(english()[name]))


def stamp(keys: frozenset[str] | set[str]) -> None:
    """Record that the translations of ``keys`` now say what their English says (studio.stamp_translations, once every
    language file has them)."""
    made_from = {name: fingerprint(english()[name]) for name in sorted(keys)}
    SOURCES_FILE.write_text(json.dumps(made_from, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def placeholders(words: str) -> set[str]:
    """The ``{names}`` a text fills in."""
    return set(_PLACEHOLDER.findall(words))


@functools.cache
def template_pattern(words: str, shapes: tuple[tuple[str, str], ...] = ()) -> re.Pattern[str]:
    """A regular expression that reads a text made from ``words`` (a text with ``{names}``) back into its values;
    ``shapes`` gives a name a regular expression of its own, as (name, expression) pairs (a number, a value that
    may be ""); any other value is any text of one character or more. A doubled brace (``{{``, as str.format writes
    one in a template it fills in) reads as one brace."""
    pieces = _PLACEHOLDER.split(words)  # literal, name, literal, name, ...
    own = dict(shapes)
    return re.compile(
        "".join(
            f"(?P<{piece}>{own.get(piece, '.+?')})" if odd % 2 else re.escape(_one_brace(piece))
            for odd, piece in enumerate(pieces)
        )
    )


def _one_brace(literal: str) -> str:
    """A template's literal text as the filled-in text has it: ``{{`` and ``}}`` as one brace each."""
    return literal.replace("{{", "{").replace("}}", "}")


def read_english(shown: str, names: Iterable[str]) -> tuple[str, dict[str, str]] | None:
    """Which of the keys ``names`` has the English that ``shown`` was made from, with the values filled in; None
    when none has. For English that another process wrote (a job's phase, the chat worker's steps) to be said
    again in the page's language."""
    for name in names:
        found = template_pattern(english()[name]).fullmatch(shown)
        if found:
            return name, found.groupdict()
    return None


def say_again(
    shown: str,
    names: Iterable[str],
    lang: str,
    said_values: Callable[[dict[str, str]], dict[str, str]] | None = None,
) -> str:
    """``shown`` (English another process wrote from one of the keys ``names``) in ``lang``, its values passed
    through ``said_values`` first where they are words too; as it is when no key made it, or in English."""
    found = read_english(shown, names) if lang != SOURCE else None
    if found is None:
        return shown
    name, values = found
    return text(name, lang, **(said_values(values) if said_values else values))


# --- which language ---------------------------------------------------------------------------------------------


def supported(tag: str | None) -> str | None:
    """The studio's language for a language tag (``zh-CN``, ``zh-Hans``, ``ja-JP``, ``ko``, ``en-GB``), or None.

    Chinese in simplified script (zh, zh-Hans-*, zh-CN, zh-SG) is zh-CN; traditional (zh-TW, zh-HK, zh-Hant) is
    not offered, so it follows the next language the browser lists.
    """
    if not tag:
        return None
    parts = tag.strip().replace("_", "-").lower().split("-")
    if parts[0] == "zh":
        return "zh-CN" if not ({"tw", "hk", "mo", "hant"} & set(parts[1:])) else None
    return next((lang for lang in LANGUAGES if lang.lower() == parts[0]), None)


def from_accept_language(header: str | None) -> str | None:
    """The first language of an Accept-Language header, by its q weights, that the studio speaks."""
    ranked = []
    for position, item in enumerate((header or "").split(",")):
        tag, _, params = item.strip().partition(";")
        weight = 1.0
        if params.strip().startswith("q="):
            try:
                weight = float(params.strip()[2:])
            except ValueError:
                weight = 0.0
        ranked.append((-weight, position, tag))
    return next((lang for *_, tag in sorted(ranked) if (lang := supported(tag))), None)


def pick_language(cookie: str | None, accept_language: str | None) -> str:
    """The language of a request: what the page shows (its ``ts_lang`` cookie), else the browser's first
    language the studio speaks, else English."""
    return (cookie if cookie in LANGUAGES else None) or from_accept_language(accept_language) or SOURCE


def request_language(request: Any) -> str:
    """The language of the page that sent ``request`` (its ``ts_lang`` cookie, else its Accept-Language; English
    for a script without either)."""
    if request is None:
        return SOURCE
    try:
        cookies = dict(request.cookies or {})
        headers = dict(request.headers or {})
    except AttributeError:  # a Request made by hand, without the attributes of a browser's
        return SOURCE
    return pick_language(cookies.get(COOKIE), headers.get("accept-language"))
