"""A train.max_length to suggest when the dataset check finds many training rows cut short.

The check tokenizes every training row once (engine.data.preview.check_tokens) and keeps each row's length before
truncation; the suggestion is read from those counts: the shortest multiple of 8 that keeps all but
``TRUNCATED_SHARE`` of the rows whole, so that the panel no longer complains once it is used. It never exceeds the
model's context or the demo's cap.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.api import find_local_path
from studio.i18n.catalog import SOURCE, english, key, text

TRUNCATED_SHARE = 0.05  # more rows than this cut short and the panel suggests a longer max_length
MULTIPLE = 8  # suggestions are multiples of 8: what GPU kernels tile by, and easy numbers to read
# The config.json keys that hold a model's context length, across architectures.
_CONTEXT_KEYS = ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length", "n_ctx")
# Tokenizers without a known length say int(1e30); nothing real comes near ten million tokens.
_NO_LENGTH = 10_000_000
FIT_ROWS, FIT_CONTEXT = key("train.fit.rows"), key("train.fit.context")
# The advice's words (studio.i18n).
CUT, LIMIT, CANNOT_GROW, SUGGESTED, WHY_LIMIT, WHY_FIT, WHY_DROPPED = (
    key(f"train.length.{name}")
    for name in ("cut", "limit", "cannot_grow", "suggested", "why_limit", "why_fit", "why_dropped")
)


@dataclass(frozen=True)
class LengthAdvice:
    """What the dataset panel says when too many training rows are longer than max_length."""

    rows: int  # training rows checked
    truncated: int  # of which longer than max_length
    max_length: int  # the form's train.max_length
    suggestion: int | None  # a longer max_length to use; None when a limit leaves none
    measured: bool  # whether the suggestion comes from known lengths (False: rows of unknown length decided it)
    limit: tuple[str, int] | None = None  # (what, tokens): the limit that capped the suggestion or left none

    def markdown(self, lang: str = SOURCE) -> str:
        """One Markdown paragraph for the dataset summary, in ``lang``."""
        # The warning above the advice already gives the counts.
        share = f"{self.truncated / self.rows:.0%}"
        cut = text(CUT, lang, share=share, max_length=f"{self.max_length:,}")
        limit = ""
        if self.limit:
            what = text(self.limit[0], lang) if self.limit[0] in english() else self.limit[0]
            limit = text(LIMIT, lang, what=what, tokens=f"{self.limit[1]:,}")
        if self.suggestion is None:
            return f"{cut} {text(CANNOT_GROW, lang, limit=limit[:1].upper() + limit[1:])}"
        if self.limit:
            why = text(WHY_LIMIT, lang, limit=limit)
        elif self.measured:
            why = text(WHY_FIT, lang, share=f"{1 - TRUNCATED_SHARE:.0%}")
        else:  # a row whose prompt alone fills max_length is dropped before its full length is counted
            why = text(WHY_DROPPED, lang)
        return f"{cut} {text(SUGGESTED, lang, tokens=f'{self.suggestion:,}', why=why)}"


def rows_that_fit(
    lengths: Sequence[int], num_dropped: int, max_length: int, context: int | None, lang: str = SOURCE
) -> str:
    """Markdown for where a dataset is picked: how many training rows fit whole in ``max_length``, how many are cut
    short and how many dropped (truncation left them no loss token), and how many are longer than the model's
    ``context`` (no max_length keeps those whole with this model), in ``lang``; "" when every row fits.

    ``lengths`` and ``num_dropped`` are what the dataset check counted (engine.data.preview.check_tokens): each
    training row's tokens before truncation, and the rows dropped without a length.
    """
    rows = len(lengths) + num_dropped
    whole = sum(length <= max_length for length in lengths)
    if whole == rows:
        return ""
    counts = {"fit": f"{whole:,}", "rows": f"{rows:,}", "max_length": f"{max_length:,}"}
    line = text(FIT_ROWS, lang, **counts, cut=f"{rows - whole - num_dropped:,}", dropped=f"{num_dropped:,}")
    # A dropped row is longer than max_length; past the context too when max_length reaches it.
    over = sum(length > context for length in lengths) + (num_dropped if max_length >= context else 0) if context else 0
    if over:
        line += " " + text(FIT_CONTEXT, lang, over=f"{over:,}", context=f"{context:,}")
    return line


def round_up(tokens: int, multiple: int = MULTIPLE) -> int:
    """``tokens`` rounded up to a multiple of ``multiple`` (at least one multiple)."""
    return max(multiple, math.ceil(tokens / multiple) * multiple)


def suggest_max_length(
    lengths: Sequence[int], num_dropped: int, max_length: int, limits: Mapping[str, int | None] | None = None
) -> LengthAdvice | None:
    """Advice when more than ``TRUNCATED_SHARE`` of the training rows are longer than ``max_length``, else None.

    ``lengths``: tokens before truncation of each row that trains; ``num_dropped``: rows dropped because truncation
    left them no loss token (longer than max_length, by how much unknown). The suggestion is the row length that all
    but ``TRUNCATED_SHARE`` of the rows stay within, rounded up to a multiple of 8; the dropped rows count as the
    longest. When that row is one of them, the suggestion is the longest row counted or twice max_length, whichever
    is more, so that the next check measures more rows. ``limits`` maps a name ("the model's context", or the key
    of one: studio.train.dataset) to its tokens (None: unknown); the suggestion never exceeds the smallest, and
    there is none when it is not above max_length.
    """
    rows = len(lengths) + num_dropped
    truncated = num_dropped + sum(length > max_length for length in lengths)
    if not rows or truncated <= TRUNCATED_SHARE * rows:
        return None
    ordered = sorted(lengths)
    keep = rows - math.floor(TRUNCATED_SHARE * rows)  # rows that should fit whole
    measured = keep <= len(ordered)
    tokens = ordered[keep - 1] if measured else max([*ordered, 2 * max_length])
    suggestion = round_up(tokens)
    limit = min(((cap, name) for name, cap in (limits or {}).items() if cap), default=None)
    if limit is None or suggestion <= limit[0]:
        return LengthAdvice(rows, truncated, max_length, suggestion, measured)
    capped = limit[0] if limit[0] > max_length else None
    return LengthAdvice(rows, truncated, max_length, capped, measured, (limit[1], limit[0]))


def model_context(name_or_path: str, revision: str | None = None, tokenizer: Any = None) -> int | None:
    """The longest sequence the model takes, in tokens: from its config.json (a local folder, or the hub cache),
    else the tokenizer's ``model_max_length`` when it is a real number; None when neither says."""
    config = _read_config(name_or_path, revision)
    config = config.get("text_config", config) if isinstance(config.get("text_config"), dict) else config
    for name in _CONTEXT_KEYS:
        if isinstance(config.get(name), int) and config[name] > 0:
            return int(config[name])
    length = getattr(tokenizer, "model_max_length", None)
    return int(length) if isinstance(length, int) and 0 < length < _NO_LENGTH else None


def _read_config(name_or_path: str, revision: str | None) -> dict[str, Any]:
    """A model's config.json as a dict ({} when there is none to read without the network)."""
    local = find_local_path(name_or_path)
    path: Any = local / "config.json" if local is not None else None
    if path is None:
        try:
            from huggingface_hub import try_to_load_from_cache

            path = try_to_load_from_cache(name_or_path, "config.json", revision=revision)
        except Exception:  # not a valid repo id, an unreadable cache: the tokenizer may still say
            return {}
    try:
        config = json.loads(Path(path).read_text(encoding="utf-8")) if isinstance(path, (str, Path)) else {}
    except (OSError, ValueError):
        return {}
    return config if isinstance(config, dict) else {}
