"""The one rule for names a person types that become file or directory names: a run's name (its run id), a
saved config's name and an export's name. Standard library only, so every writer of such a file can use it."""

from __future__ import annotations

import unicodedata

MAX_NAME_CHARS = 120
# A file name may take 255 bytes; the rest is left for what is added around a name (a run id's time stamp, an
# export's ".zip" or its ".partial-…" while it is written).
MAX_NAME_BYTES = 200
PATH_SEPARATORS = ("/", "\\")
# Unicode's bidirectional controls (embeddings, overrides, isolates, marks): invisible, they make a name read in
# another order than it is written ("evil\u202egpj.exe" shows as "evilexe.jpg"), in a run list as in a file name.
BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")

# What each of name_problem's refusals says, by name: English with ``{placeholders}`` for the counts, the one
# definition of each message (the studio says it again in the visitor's language: studio.i18n.problems, keys
# ``check.<name>``). A sweep's name is held to a shorter length with the same words (engine.sweeps.config).
NAME_MESSAGES = {
    "name_blank": "give a name",
    "name_too_long": "too long: {length} characters, at most {limit}",
    "name_not_unicode": "must be valid Unicode text",
    "name_too_many_bytes": "too long for a file name: at most {limit} bytes as UTF-8",
    "name_control_characters": "no control characters allowed (such as a NUL byte, a tab or a line break)",
    "name_direction_marks": "no direction marks allowed (such as a right-to-left override): they change how a name "
    "reads",
    "name_path_separator": "no / or \\ allowed: it names one file or folder",
}


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot be used as a name, in words for the field's error; None when it can."""
    if not name.strip():
        return NAME_MESSAGES["name_blank"]
    if len(name) > MAX_NAME_CHARS:
        return NAME_MESSAGES["name_too_long"].format(length=len(name), limit=MAX_NAME_CHARS)
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:  # a lone surrogate: no file name can hold it
        return NAME_MESSAGES["name_not_unicode"]
    if size > MAX_NAME_BYTES:
        return NAME_MESSAGES["name_too_many_bytes"].format(limit=MAX_NAME_BYTES)
    if any(unicodedata.category(char) in ("Cc", "Zl", "Zp") for char in name):
        return NAME_MESSAGES["name_control_characters"]
    if any(char in BIDI_CONTROLS for char in name):
        return NAME_MESSAGES["name_direction_marks"]
    if any(separator in name for separator in PATH_SEPARATORS):
        return NAME_MESSAGES["name_path_separator"]
    return None


def check_name(name: str) -> str:
    """``name`` stripped of surrounding blanks; ValueError with the reason when it cannot be used."""
    problem = name_problem(name)
    if problem:
        raise ValueError(problem)
    return name.strip()
