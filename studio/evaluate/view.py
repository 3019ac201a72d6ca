"""What the Evaluate tab shows for one result (engine.evaluate.evaluations): metric cards and predictions vs
references; for a preference run, its preference accuracy and reward margin and the pairs as each model ranked them.

Pure functions of a result dict, tested without Gradio.
"""

from __future__ import annotations

import html
import math
import time
from typing import Any

import pandas as pd

from engine.evaluate.evaluations import SCORING_PREFERENCE, is_unpaired, scoring_of

PREDICTION_COLUMNS = ["#", "Prompt", "Reference", "Base model", "Fine-tuned"]
PAIR_COLUMNS = ["#", "Prompt", "Chosen", "Rejected", "Base model", "Fine-tuned", "Margin"]
ANSWER_COLUMNS = ["#", "Prompt", "Answer", "Label", "Base model", "Fine-tuned", "Reward"]
# The table's column kinds and widths, by what it lists (the tab hands them to its gr.Dataframe).
TABLE_LAYOUTS = {
    "predictions": (["number", "str", "str", "html", "html"], ["5%", "30%", "20%", "22.5%", "22.5%"]),
    "pairs": (
        ["number", "str", "str", "str", "html", "html", "number"],
        ["5%", "25%", "15%", "15%", "15%", "15%", "10%"],
    ),
    "answers": (
        ["number", "str", "str", "str", "html", "html", "number"],
        ["5%", "28%", "20%", "10%", "13%", "14%", "10%"],
    ),
}
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


def _cards_html(cards: list[str], note: str) -> str:
    """Cards in one row (as many columns as cards), and the caption with ``note`` after it."""
    style = f' style="grid-template-columns: repeat({len(cards)}, minmax(0, 1fr))"' if len(cards) != 3 else ""
    return (
        f'<div class="ts-eval-cards"{style}>{"".join(cards)}</div>'
        f'<div class="ts-eval-caption">{html.escape(note)}</div>'
    )


def _preference_cards(result: dict[str, Any]) -> list[str]:
    """Preference accuracy base → tuned, the tuned model's reward accuracy (methods with a reference), the mean
    margin and the number of pairs."""
    base, tuned = result.get("base") or {}, result.get("tuned") or {}
    cards = [_card("Preference accuracy", base.get("accuracy"), tuned.get("accuracy"), ".0%", False)]
    if tuned.get("reward_accuracy") is not None:
        cards.append(_card("Reward accuracy", None, tuned.get("reward_accuracy"), ".0%", False))
    cards.append(_card("Mean margin", None, tuned.get("mean_margin"), ".4f", False))
    cards.append(_card("Pairs", None, tuned.get("pairs"), "d", False))
    return cards


def _unpaired_cards(result: dict[str, Any]) -> list[str]:
    """A kto result: per-token log-probability of desirable and undesirable answers base → tuned, the share of
    desirable answers above the undesirable median, the mean margin."""
    base, tuned = result.get("base") or {}, result.get("tuned") or {}
    return [
        _card("Desirable log-prob / token", base.get("desirable_logp"), tuned.get("desirable_logp"), ".3f", False),
        _card("Undesirable log-prob / token", base.get("undesirable_logp"), tuned.get("undesirable_logp"), ".3f", True),
        _card("Desirable above median", None, tuned.get("reward_accuracy"), ".0%", False),
        _card("Mean margin", None, tuned.get("mean_margin"), ".4f", False),
    ]


def _preference_note(result: dict[str, Any]) -> str:
    """How the preference numbers were taken, after the caption."""
    dropped = (result.get("data") or {}).get("dropped")
    parts = [caption(result), f"{result.get('method', '?')}, beta {result.get('beta', '?')}"]
    if is_unpaired(result):
        parts.append("reward = beta × (log-prob tuned − base)")
    else:
        parts.append("accuracy ranks by mean log-prob per token; margin = beta × log-ratio gap")
    if dropped:
        parts.append(f"{dropped} rows left out (no answer token within max_length)")
    return " · ".join(parts)


def metrics_html(result: dict[str, Any] | None) -> str:
    """The metric cards (eval loss, perplexity, exact match: base → fine-tuned; or the preference scores) and a
    caption."""
    if not result:
        return '<div class="ts-empty">No evaluation of this run yet: pick the data and press Evaluate.</div>'
    if scoring_of(result) == SCORING_PREFERENCE:
        cards = _unpaired_cards(result) if is_unpaired(result) else _preference_cards(result)
        return _cards_html(cards, _preference_note(result))
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


def _mark(correct: bool | None) -> str:
    if correct is None:
        return ""
    return '<span class="ts-right">✓</span> ' if correct else '<span class="ts-wrong">✗</span> '


def _per_token(total: Any, tokens: Any) -> str:
    return f"{total / tokens:.3f}" if _finite(total) and tokens else "—"


def _ranking(pair: dict[str, Any], side: str) -> str:
    """One model's view of a pair: ✓ when it ranks chosen first, and both answers' log-prob per token."""
    chosen = _per_token(pair.get(f"{side}_chosen_logp"), pair.get("chosen_tokens"))
    rejected = _per_token(pair.get(f"{side}_rejected_logp"), pair.get("rejected_tokens"))
    return f"{_mark(pair.get(f'{side}_correct'))}{chosen} vs {rejected}"


def _rounded(value: Any) -> float | None:
    return round(value, 4) if _finite(value) else None


def pairs_frame(result: dict[str, Any] | None, which: str = FILTERS[0]) -> pd.DataFrame:
    """A preference result's pairs: each model's log-prob per token of chosen vs rejected, marked ✓ when it
    ranks chosen first, and the margin; filtered by ``which``."""
    rows = [
        [
            pair.get("row"),
            html.escape(pair.get("prompt", "")),
            html.escape(pair.get("chosen", "")),
            html.escape(pair.get("rejected", "")),
            _ranking(pair, "base"),
            _ranking(pair, "tuned"),
            _rounded(pair.get("margin")),
        ]
        for pair in (result or {}).get("pairs") or []
        if _keep(pair, which)
    ]
    return pd.DataFrame(rows, columns=PAIR_COLUMNS)


def answers_frame(result: dict[str, Any] | None, which: str = FILTERS[0]) -> pd.DataFrame:
    """A kto result's answers: each model's log-prob per token, the tuned one marked ✓ when its reward sits on
    the right side of the other label's median, and the reward; filtered by ``which``."""
    rows = [
        [
            answer.get("row"),
            html.escape(answer.get("prompt", "")),
            html.escape(answer.get("completion", "")),
            "desirable" if answer.get("label") else "undesirable",
            _per_token(answer.get("base_logp"), answer.get("tokens")),
            _mark(answer.get("tuned_correct")) + _per_token(answer.get("tuned_logp"), answer.get("tokens")),
            _rounded(answer.get("reward")),
        ]
        for answer in (result or {}).get("answers") or []
        if _keep(answer, which)
    ]
    return pd.DataFrame(rows, columns=ANSWER_COLUMNS)


def listed_kind(result: dict[str, Any] | None) -> str:
    """What a result lists: "predictions" (answers scoring), "pairs" or "answers" (kto)."""
    if scoring_of(result) != SCORING_PREFERENCE:
        return "predictions"
    return "answers" if is_unpaired(result) else "pairs"


def table_layout(result: dict[str, Any] | None) -> tuple[list[str], list[str]]:
    """The table's column kinds and widths for what the result lists."""
    return TABLE_LAYOUTS[listed_kind(result)]


def predictions_frame(result: dict[str, Any] | None, which: str = FILTERS[0]) -> pd.DataFrame:
    """Predictions beside references, each answer marked right (✓) or wrong (✗), filtered by ``which``; for a
    preference result its pairs (pairs_frame) or kto answers (answers_frame)."""
    kind = listed_kind(result)
    if kind == "pairs":
        return pairs_frame(result, which)
    if kind == "answers":
        return answers_frame(result, which)
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


LIST_TITLES = {
    "predictions": ("Predictions vs references", "rows"),
    "pairs": ("Pairs: log-prob per token, chosen vs rejected (✓ chosen ranked first)", "pairs"),
    "answers": ("Answers: log-prob per token (✓ reward on the right side of the other label's median)", "answers"),
}


def predictions_label(result: dict[str, Any] | None, shown: int) -> str:
    """The table's title: what it lists, and how many rows it shows out of all."""
    kind = listed_kind(result)
    title, unit = LIST_TITLES[kind]
    total = len((result or {}).get(kind) or [])
    return f"{title} ({shown} of {total} {unit})" if total else title
