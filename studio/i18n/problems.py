"""The engine's validation messages (``must be > 0``, ``unknown key (did you mean r?)``) in the visitor's language,
where the studio shows them next to a field.

The engine writes English (the CLI stays English); each message it builds from a template
(engine.schema.errors.MESSAGES) is matched back to its template here and said again in ``lang`` with the same
values. A message built otherwise (a rule across fields, a dataset's error) stays as the engine wrote it.
"""

from __future__ import annotations

from studio.i18n import catalog
from studio.i18n.catalog import key, template_pattern, text

# Every template's pattern and key, declared in use at import.
_TEMPLATES = [
    (template_pattern(words), key(name))
    for name, words in catalog.problem_words().items()
    if name not in ("problem.unknown_key", "problem.suggestion")
]
UNKNOWN, SUGGESTION = key("problem.unknown_key"), key("problem.suggestion")
_SUGGESTED = template_pattern(" " + catalog.english()[SUGGESTION])


def translate_problem(message: str, lang: str) -> str:
    """``message`` in ``lang`` when it is one of the engine's templated messages; as it is otherwise."""
    if lang == catalog.SOURCE:
        return message
    for pattern, name in _TEMPLATES:
        found = pattern.fullmatch(message)
        if found:
            return text(name, lang, **found.groupdict())
    unknown = catalog.english()[UNKNOWN]
    if message.startswith(unknown):
        rest = message[len(unknown) :]
        found = _SUGGESTED.fullmatch(rest)
        if not rest or found:
            suggestion = text(SUGGESTION, lang, **found.groupdict()) if found else ""
            return text(UNKNOWN, lang) + (f" {suggestion}" if suggestion else "")
    return message


def translate_problems(errors: dict[str, str], lang: str) -> dict[str, str]:
    """Field path -> message, each message in ``lang`` (see ``translate_problem``)."""
    return {where: translate_problem(message, lang) for where, message in errors.items()}
