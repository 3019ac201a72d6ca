"""The engine's validation messages (``must be > 0``, ``unknown key (did you mean r?)``, ``dpo keeps TRL's own
batching; ...``) in the visitor's language, where the studio shows them next to a field.

The engine writes English (the CLI stays English); each message it builds from a template is matched back to its
template here and said again in ``lang`` with the same values: a field's own check, pydantic's
(engine.config.schema.errors.MESSAGES, ``the key ...`` where a mapping's key is at fault) and the sections' validators'
(a run's name, a search range, a sweep's search space and base file, and the form's where a box cannot be read:
catalog.check_words), a rule across fields (the config's, early stopping's, what this machine cannot run, and each
method's own: catalog.rule_words), a dataset's warning (``translate_warning``) and the refusal of data the method does
not train on (``translate_misfit``). Values stay as written (method names, counts, field paths, a parser's own error),
except what a method trains on, which is words of the engine's too, and a ``{problem}``, another of these messages
that a message holds (``pattern: {problem}``), said again in turn. A message built otherwise (a dataset's error,
trackio's own refusal of a project name) stays as the engine wrote it.
"""

from __future__ import annotations

from studio.i18n import catalog
from studio.i18n.catalog import key, say_again, template_pattern, text

# A value that is itself one of the engine's messages (``pattern: {problem}``).
NESTED = "problem"
# Values that may run over several lines: a parser's own error (PyYAML's names the line and column on lines of its
# own), and a message that holds one (``{problem} (in {path})``, a sweep's base file that is not YAML).
MULTILINE = ((NESTED, r"(?s:.+?)"), ("error", r"(?s:.+?)"))


def _turn(words: str) -> int:
    """When a template is tried: one that adds words after another message first (``{problem} (in {path})``: a
    template that ends with a value would read those words as part of it, ``must be > 0.0 (in run.yaml)``); one that
    holds no other message next; one that holds another message after words of its own last, so that a message of a
    template of its own (``pattern: a regex reward needs it``) is read as that one."""
    held = "{" + NESTED + "}"
    if words.startswith(held):
        return 0
    return 2 if held in words else 1


# Every template's pattern and key, declared in use at import: a field's own checks (pydantic's, then the sections'),
# then the rules across fields, in the turns above.
_TEMPLATES = [
    (template_pattern(words, MULTILINE), key(name))
    for name, words in sorted(
        {**catalog.problem_words(), **catalog.check_words(), **catalog.rule_words()}.items(),
        key=lambda named: _turn(named[1]),
    )
    if name not in ("problem.unknown_key", "problem.suggestion")
]
# What a method trains on, which a rule names ({trains_on}): words the engine wrote, said again too.
_TRAINS_ON = [key(name) for name in catalog.trains_on_words()]
UNKNOWN, SUGGESTION = key("problem.unknown_key"), key("problem.suggestion")
_SUGGESTED = template_pattern(" " + catalog.english()[SUGGESTION])


def translate_problem(message: str, lang: str) -> str:
    """``message`` in ``lang`` when it is one of the engine's templated messages; as it is otherwise."""
    if lang == catalog.SOURCE:
        return message
    for pattern, name in _TEMPLATES:
        found = pattern.fullmatch(message)
        if not found:
            continue
        values = found.groupdict()
        if NESTED in values:
            inner = translate_problem(values[NESTED], lang)
            if inner == values[NESTED]:  # not a message of the engine's: no template of this shape says it
                continue
            values[NESTED] = inner
        if "trains_on" in values:
            values["trains_on"] = say_again(values["trains_on"], _TRAINS_ON, lang)
        return text(name, lang, **values)
    unknown = catalog.english()[UNKNOWN]
    if message.startswith(unknown):
        rest = message[len(unknown) :]
        found = _SUGGESTED.fullmatch(rest)
        if not rest or found:
            suggestion = text(SUGGESTION, lang, **found.groupdict()) if found else ""
            return text(UNKNOWN, lang) + (f" {suggestion}" if suggestion else "")
    return translate_misfit(message, lang)


def translate_problems(errors: dict[str, str], lang: str) -> dict[str, str]:
    """Field path -> message, each message in ``lang`` (see ``translate_problem``)."""
    return {where: translate_problem(message, lang) for where, message in errors.items()}


# The dataset check's warnings (engine.data.warnings): each template's pattern and key, declared in use at import.
# Counts are numbers and the label may be "" (training rows): a warning about the eval file (``eval file: ...``)
# is then not read as one whose count is "eval file: 3".
_NUMBER = r"[\d,]+"
_SHAPES = (("count", _NUMBER), ("total", _NUMBER), ("whole", _NUMBER), ("max_length", _NUMBER), ("label", ".*?"))
_WARNINGS = [(template_pattern(words, _SHAPES), key(name)) for name, words in catalog.warning_words().items()]
EVAL_LABEL, EVAL_FILE = key("warning.eval_label"), key("warning.eval_file")


def translate_warning(message: str, lang: str) -> str:
    """A dataset warning in ``lang`` when the engine built it from one of its templates; one about the eval file
    or a dataset of a list (``<what>: <warning>``) keeps what it names and says the rest in ``lang``."""
    if lang == catalog.SOURCE:
        return message
    for pattern, name in _WARNINGS:
        found = pattern.fullmatch(message)
        if found and name not in (EVAL_LABEL, EVAL_FILE):
            values = found.groupdict()
            if values.get("label") == catalog.english()[EVAL_LABEL]:
                values["label"] = text(EVAL_LABEL, lang)
            return text(name, lang, **values)
    about, colon, rest = message.partition(": ")
    if colon and rest:
        translated = translate_warning(rest, lang)
        if translated != rest:
            named = text(EVAL_FILE, lang) if about == catalog.english()[EVAL_FILE] else about
            return f"{named}: {translated}"
    return message


# The refusal of data that the method does not train on (engine.training.method_data), and its parts.
MISFIT = key("misfit.message")
_ADVICE = [key(name) for name in catalog.misfit_words() if name.startswith("misfit.advice.")]
_FORMATS = [key(name) for name in catalog.misfit_words() if name.startswith("misfit.format.")]
_MODALITY = [key(name) for name in catalog.misfit_words() if name.startswith("misfit.modality.")]


def translate_misfit(message: str, lang: str) -> str:
    """The refusal of data of another method in ``lang``, its advice and the data's kind too; as it is otherwise."""

    def said_parts(values: dict[str, str]) -> dict[str, str]:
        if "what" not in values:  # a modality refusal: its values are names
            return values
        return {
            **values,
            "what": say_again(values["what"], _FORMATS, lang),
            "advice": say_again(values["advice"], _ADVICE, lang),
        }

    return say_again(message, [MISFIT, *_MODALITY], lang, said_parts)
