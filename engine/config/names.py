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


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot be used as a name, in words for the field's error; None when it can."""
    if not name.strip():
        return "give a name"
    if len(name) > MAX_NAME_CHARS:
        return f"too long: {len(name)} characters, at most {MAX_NAME_CHARS}"
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:  # a lone surrogate: no file name can hold it
        return "must be valid Unicode text"
    if size > MAX_NAME_BYTES:
        return f"too long for a file name: at most {MAX_NAME_BYTES} bytes as UTF-8"
    if any(unicodedata.category(char) in ("Cc", "Zl", "Zp") for char in name):
        return "no control characters allowed (such as a NUL byte, a tab or a line break)"
    if any(char in BIDI_CONTROLS for char in name):
        return "no direction marks allowed (such as a right-to-left override): they change how a name reads"
    if any(separator in name for separator in PATH_SEPARATORS):
        return "no / or \\ allowed: it names one file or folder"
    return None


def check_name(name: str) -> str:
    """``name`` stripped of surrounding blanks; ValueError with the reason when it cannot be used."""
    problem = name_problem(name)
    if problem:
        raise ValueError(problem)
    return name.strip()
