"""What the Evaluate tab shows above its table for one result (engine.evaluate.evaluations): metric cards, base (or
the starting run, with the base model before it) → tuned, and a caption saying which data, how many rows, which
weights and when. For an answers
run eval loss, perplexity and exact match; for a preference run its preference accuracy and reward margin (kto: the
log-probabilities of desirable and undesirable answers); for a rewards run each reward's mean and the weighted
reward. The table below them is studio.evaluate.tables.

Pure functions of a result dict, tested without Gradio. Every word is in ``lang`` (English by default); numbers,
metric names and reward names stay as they are, and so does what the engine wrote in a result (a baseline's note).
"""

from __future__ import annotations

import html
import math
import time
from typing import Any

from engine.api import SCORING_PREFERENCE, SCORING_REWARDS, is_unpaired, scoring_of
from studio.i18n.catalog import SOURCE, key, text

DATA_LABELS = {"eval": key("evaluate.data.eval"), "train": key("evaluate.data.train")}
DATA_FILE, DATA_UNKNOWN = key("evaluate.data.file"), key("evaluate.data.unknown")
ROWS, WEIGHTS, WHEN = key("evaluate.caption.rows"), key("evaluate.caption.weights"), key("evaluate.caption.when")
BASE, START = key("evaluate.card.base"), key("evaluate.card.start")  # what the tuned model is compared with
EMPTY = key("evaluate.empty")
CARD = {
    name: key(f"evaluate.card.{name}")
    for name in (
        "preference_accuracy",
        "reward_accuracy",
        "mean_margin",
        "pairs",
        "desirable_logp",
        "undesirable_logp",
        "desirable_above",
        "reward",
        "exact_match",
        "eval_loss",
        "perplexity",
        "no_reference",
    )
}
NOTE = {
    name: key(f"evaluate.note.{name}")
    for name in (
        "unpaired",
        "unpaired_start",
        "paired",
        "scored",
        "dropped",
        "from_start",
        "from_base",
        "greedy",
        "skipped",
    )
}
RAW_BASE = "raw_base"  # a result's arm of the raw base model, beside a starting run's (engine.evaluate.models)


def finite(value: Any) -> bool:
    """Whether ``value`` is a number to show (not None, NaN or infinite)."""
    return isinstance(value, (int, float)) and math.isfinite(value)


def _card(
    title: str,
    base: Any,
    tuned: Any,
    fmt: str,
    lower_is_better: bool,
    base_label: str = "base",
    before: tuple[str, Any] | None = None,
) -> str:
    """One metric as base → tuned, the tuned value coloured by whether it improved; ``title`` is HTML,
    ``base_label`` names what the tuned model is compared with. ``before`` (label, value): the raw base model's
    value, shown first when the comparison is with a starting run (``base label value · start value → tuned``)."""
    if not (finite(base) and finite(tuned)):
        shown = "—" if not finite(tuned) else format(tuned, fmt)
        return f'<div class="ts-stat ts-eval-card"><span>{title}</span><b>{shown}</b></div>'
    better = tuned < base if lower_is_better else tuned > base
    trend = "ts-better" if better else ("ts-same" if tuned == base else "ts-worse")
    first = ""
    if before is not None and finite(before[1]):
        first = f"<small>{html.escape(before[0])}</small> {format(before[1], fmt)} <i>·</i> "
    return (
        f'<div class="ts-stat ts-eval-card"><span>{title}</span>'
        f"<b>{first}<small>{html.escape(base_label)}</small> {format(base, fmt)} <i>→</i> "
        f'<em class="{trend}">{format(tuned, fmt)}</em></b></div>'
    )


class Arms:
    """What a result's cards compare: the baseline's summary and label (the base model, or the run the tuned one
    started from), the tuned summary, and the raw base model's summary shown before a starting run's (else None)."""

    def __init__(self, result: dict[str, Any], lang: str = SOURCE):
        self.base, self.tuned = result.get("base") or {}, result.get("tuned") or {}
        self.label = text(START if from_start(result) else BASE, lang)
        self.raw = result.get(RAW_BASE) if from_start(result) else None
        self.raw_label = text(BASE, lang)

    def card(self, title: str, name: str, fmt: str, lower_is_better: bool = False, group: str | None = None) -> str:
        """The card of metric ``name`` (in the summaries' ``group``, e.g. "rewards", when given)."""

        def value(summary: dict[str, Any]) -> Any:
            return (summary.get(group) or {}).get(name) if group else summary.get(name)

        before = (self.raw_label, value(self.raw)) if self.raw else None
        return _card(title, value(self.base), value(self.tuned), fmt, lower_is_better, self.label, before)


def _words(name: str, lang: str, **values: object) -> str:
    """``name``'s text in ``lang``, escaped for HTML."""
    return html.escape(text(name, lang, **values))


def _title(name: str, lang: str) -> str:
    """A card's title (HTML)."""
    return _words(CARD[name], lang)


def caption(result: dict[str, Any], lang: str = SOURCE) -> str:
    """Which data, how many rows, which weights, how long, when (in ``lang``)."""
    data = result.get("data") or {}
    choice = data.get("choice")
    where = text(DATA_LABELS[choice], lang) if choice in DATA_LABELS else (choice or text(DATA_UNKNOWN, lang))
    if choice == "file":
        where = text(DATA_FILE, lang, source=data.get("source", ""))
    when = time.strftime(text(WHEN, lang), time.localtime(result.get("created_at") or 0))
    parts = [text(ROWS, lang, where=where, rows=data.get("rows", 0))]
    parts += [text(WEIGHTS, lang, weights=result.get("weights", "?"))]
    parts += [f"{result.get('seconds', 0):.0f} s", when]
    return " · ".join(parts)


MAX_CARD_COLUMNS = 4
PENDING = key("evaluate.pending")


def pending_html(lang: str = SOURCE) -> str:
    """What the cards' place says while an evaluation runs."""
    return f'<div class="ts-empty">{_words(PENDING, lang)}</div>'


PENDING_HTML = pending_html()  # in English


def _cards_html(cards: list[str], note: str) -> str:
    """Cards in one row (as many columns as cards), and the caption with ``note`` after it."""
    columns = min(len(cards), MAX_CARD_COLUMNS)  # more cards (a reward each) wrap onto the next row
    style = f' style="grid-template-columns: repeat({columns}, minmax(0, 1fr))"' if columns != 3 else ""
    return (
        f'<div class="ts-eval-cards"{style}>{"".join(cards)}</div>'
        f'<div class="ts-eval-caption">{html.escape(note)}</div>'
    )


def _preference_cards(result: dict[str, Any], lang: str = SOURCE) -> list[str]:
    """Preference accuracy base → tuned, the tuned model's reward accuracy (methods with a reference), the mean
    margin and the number of pairs."""
    arms = Arms(result, lang)
    tuned = arms.tuned
    cards = [arms.card(_title("preference_accuracy", lang), "accuracy", ".0%")]
    if tuned.get("reward_accuracy") is not None:
        cards.append(_card(_title("reward_accuracy", lang), None, tuned.get("reward_accuracy"), ".0%", False))
    cards.append(_card(_title("mean_margin", lang), None, tuned.get("mean_margin"), ".4f", False))
    cards.append(_card(_title("pairs", lang), None, tuned.get("pairs"), "d", False))
    return cards


def _unpaired_cards(result: dict[str, Any], lang: str = SOURCE) -> list[str]:
    """A kto result: per-token log-probability of desirable and undesirable answers base → tuned, the share of
    desirable answers above the undesirable median, the mean margin."""
    arms = Arms(result, lang)
    tuned = arms.tuned
    return [
        arms.card(_title("desirable_logp", lang), "desirable_logp", ".3f"),
        arms.card(_title("undesirable_logp", lang), "undesirable_logp", ".3f", lower_is_better=True),
        _card(_title("desirable_above", lang), None, tuned.get("reward_accuracy"), ".0%", False),
        _card(_title("mean_margin", lang), None, tuned.get("mean_margin"), ".4f", False),
    ]


def _preference_note(result: dict[str, Any], lang: str = SOURCE) -> str:
    """How the preference numbers were taken, after the caption."""
    dropped = (result.get("data") or {}).get("dropped")
    method = result.get("method", "?")
    parts = [caption(result, lang), f"{method}, beta {result['beta']}" if "beta" in result else method]
    ranked_by = "scored" if result.get("score") == "reward" else "paired"
    unpaired = "unpaired_start" if from_start(result) else "unpaired"
    parts.append(text(NOTE[unpaired if is_unpaired(result) else ranked_by], lang))
    if dropped:
        parts.append(text(NOTE["dropped"], lang, count=dropped))
    return " · ".join(parts + _baseline_notes(result, lang))


def from_start(result: dict[str, Any] | None) -> bool:
    """Whether a result compares with the run it started from rather than the base model."""
    return (result or {}).get("baseline", "base") != "base"


def _baseline_notes(result: dict[str, Any], lang: str) -> list[str]:
    """What "start" and "base" stand for where a result compares with the run it started from (and the engine's
    note on a start that could not be loaded, as it wrote it); nothing for a plain comparison with the base."""
    parts = []
    if from_start(result):
        parts.append(text(NOTE["from_start"], lang, baseline=result["baseline"]))
        if result.get(RAW_BASE):
            parts.append(text(NOTE["from_base"], lang))
    if result.get("baseline_note"):
        parts.append(result["baseline_note"])
    return parts


def _rewards_cards(result: dict[str, Any], lang: str = SOURCE) -> list[str]:
    """The weighted reward, each reward function's mean, and exact match when the rows have references: base (or
    the starting run) → tuned."""
    arms = Arms(result, lang)
    cards = [arms.card(_title("reward", lang), "reward", ".3g")]
    for name, weight in (result.get("reward_weights") or {}).items():
        title = f"{html.escape(name)} <small>×{weight:g}</small>"
        # A reward with a negative weight is one GRPO pushes down: a lower mean is the better one.
        cards.append(arms.card(title, name, ".3g", weight < 0, group="rewards"))
    if arms.tuned.get("exact_match") is not None:
        cards.append(arms.card(_title("exact_match", lang), "exact_match", ".0%"))
    return cards


def _rewards_note(result: dict[str, Any], lang: str = SOURCE) -> str:
    """What the rewards numbers compare and how they were taken, after the caption (the engine's note on the
    baseline as it wrote it)."""
    compared = _baseline_notes(result, lang) if from_start(result) else [text(NOTE["from_base"], lang)]
    greedy = text(NOTE["greedy"], lang, tokens=result.get("max_new_tokens", "?"))
    parts = [caption(result, lang), *compared, greedy]
    skipped = (result.get("data") or {}).get("skipped")
    if skipped:
        parts.append(text(NOTE["skipped"], lang, count=skipped))
    if result.get("baseline_note") and not from_start(result):
        parts.append(result["baseline_note"])
    return " · ".join(parts)


def empty_html(lang: str = SOURCE) -> str:
    """What the cards' place says before a run has an evaluation."""
    return f'<div class="ts-empty">{_words(EMPTY, lang)}</div>'


def metrics_html(result: dict[str, Any] | None, lang: str = SOURCE) -> str:
    """The metric cards (eval loss, perplexity, exact match: base → fine-tuned; or the preference scores; or the
    rewards) and a caption, in ``lang``."""
    if not result:
        return empty_html(lang)
    if scoring_of(result) == SCORING_REWARDS:
        return _cards_html(_rewards_cards(result, lang), _rewards_note(result, lang))
    if scoring_of(result) == SCORING_PREFERENCE:
        cards = _unpaired_cards(result, lang) if is_unpaired(result) else _preference_cards(result, lang)
        return _cards_html(cards, _preference_note(result, lang))
    arms = Arms(result, lang)
    cards = [
        arms.card(_title("eval_loss", lang), "eval_loss", ".4f", lower_is_better=True),
        arms.card(_title("perplexity", lang), "perplexity", ".2f", lower_is_better=True),
    ]
    exact = _title("exact_match", lang)
    if arms.tuned.get("exact_match") is not None:
        cards.append(arms.card(exact, "exact_match", ".0%"))
    else:
        cards.append(
            f'<div class="ts-stat ts-eval-card"><span>{exact}</span><b>{_title("no_reference", lang)}</b></div>'
        )
    note = " · ".join([caption(result, lang), *_baseline_notes(result, lang)])
    return f'<div class="ts-eval-cards">{"".join(cards)}</div><div class="ts-eval-caption">{html.escape(note)}</div>'
