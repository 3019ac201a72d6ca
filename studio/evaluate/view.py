"""What the Evaluate tab shows for one result (engine.evaluate.evaluations): metric cards and predictions vs references.

Pure functions of a result dict, tested without Gradio.
"""

from __future__ import annotations

import html
import math
import time
from typing import Any

import pandas as pd

PREDICTION_COLUMNS = ["#", "Prompt", "Reference", "Base model", "Fine-tuned"]
FILTERS = ("All rows", "Fine-tuned wrong", "Fixed by tuning", "Broken by tuning")
DATA_LABELS = {"eval": "eval set", "train": "training set", "file": "file"}


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def _card(title: str, base: Any, tuned: Any, fmt: str, lower_is_better: bool) -> str:
    """One metric as base → tuned, the tuned value coloured by whether it improved."""
    if not (_finite(base) and _finite(tuned)):
        shown = "—" if not _finite(tuned) else format(tuned, fmt)
        return f'<div class="ts-stat ts-eval-card"><span>{title}</span><b>{shown}</b></div>'
    better = tuned < base if lower_is_better else tuned > base
    trend = "ts-better" if better else ("ts-same" if tuned == base else "ts-worse")
    return (
        f'<div class="ts-stat ts-eval-card"><span>{title}</span>'
        f"<b><small>base</small> {format(base, fmt)} <i>→</i> "
        f'<em class="{trend}">{format(tuned, fmt)}</em></b></div>'
    )


def caption(result: dict[str, Any]) -> str:
    """Which data, how many rows, which weights, how long, when."""
    data = result.get("data") or {}
    where = DATA_LABELS.get(data.get("choice"), data.get("choice") or "data")
    if data.get("choice") == "file":
        where = f"file {data.get('source', '')}"
    when = time.strftime("%b %d %H:%M", time.localtime(result.get("created_at") or 0))
    parts = [f"{where} · {data.get('rows', 0)} rows", f"weights: {result.get('weights', '?')}"]
    parts += [f"{result.get('seconds', 0):.0f} s", when]
    return " · ".join(parts)


PENDING_HTML = '<div class="ts-empty">Evaluating… the scores of this evaluation appear here when it ends.</div>'


def metrics_html(result: dict[str, Any] | None) -> str:
    """The metric cards (eval loss, perplexity, exact match: base → fine-tuned) and a caption."""
    if not result:
        return '<div class="ts-empty">No evaluation of this run yet: pick the data and press Evaluate.</div>'
    base, tuned = result.get("base") or {}, result.get("tuned") or {}
    cards = [
        _card("Eval loss", base.get("eval_loss"), tuned.get("eval_loss"), ".4f", lower_is_better=True),
        _card("Perplexity", base.get("perplexity"), tuned.get("perplexity"), ".2f", lower_is_better=True),
    ]
    if tuned.get("exact_match") is not None:
        cards.append(_card("Exact match", base.get("exact_match"), tuned.get("exact_match"), ".0%", False))
    else:
        cards.append(
            '<div class="ts-stat ts-eval-card"><span>Exact match</span><b>n/a (no reference answers)</b></div>'
        )
    return (
        f'<div class="ts-eval-cards">{"".join(cards)}</div>'
        f'<div class="ts-eval-caption">{html.escape(caption(result))}</div>'
    )


def _answer(text: str, correct: bool) -> str:
    mark = '<span class="ts-right">✓</span>' if correct else '<span class="ts-wrong">✗</span>'
    return f"{mark} {html.escape(text) or '<i>(empty)</i>'}"


def _keep(row: dict[str, Any], which: str) -> bool:
    base, tuned = row.get("base_correct"), row.get("tuned_correct")
    if which == "Fine-tuned wrong":
        return not tuned
    if which == "Fixed by tuning":
        return tuned and not base
    if which == "Broken by tuning":
        return base and not tuned
    return True


def predictions_frame(result: dict[str, Any] | None, which: str = FILTERS[0]) -> pd.DataFrame:
    """Predictions beside references, each answer marked right (✓) or wrong (✗), filtered by ``which``."""
    rows = [
        [
            number,
            html.escape(row.get("prompt", "")),
            html.escape(row.get("reference", "")),
            _answer(row.get("base", ""), bool(row.get("base_correct"))),
            _answer(row.get("tuned", ""), bool(row.get("tuned_correct"))),
        ]
        for number, row in enumerate((result or {}).get("predictions") or [], start=1)
        if _keep(row, which)
    ]
    return pd.DataFrame(rows, columns=PREDICTION_COLUMNS)


def predictions_label(result: dict[str, Any] | None, shown: int) -> str:
    """The table's title: how many rows it shows out of all."""
    total = len((result or {}).get("predictions") or [])
    return f"Predictions vs references ({shown} of {total} rows)" if total else "Predictions vs references"
