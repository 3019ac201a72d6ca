"""What the Evaluate tab shows for one result (engine.evaluate.evaluations): metric cards and predictions vs
references; for a preference run, its preference accuracy and reward margin and the pairs as each model ranked them;
for a GRPO run, each reward's mean and the weighted reward base (or starting run) → tuned, and the completions.

Pure functions of a result dict, tested without Gradio. Every word is in ``lang`` (English by default): the cards,
the captions, the table's headers and title; numbers, metric names, reward names and the model's texts stay as they
are, and so does what the engine wrote in a result (a baseline's note).
"""

from __future__ import annotations

import html
import math
import time
from typing import Any

import pandas as pd

from engine.api import SCORING_PREFERENCE, SCORING_REWARDS, is_unpaired, scoring_of
from studio.i18n.catalog import SOURCE, key, text

# The tables' columns, by their English names (what the frames are built and filtered with); the page gets them in
# its language (``COLUMN_WORDS``), "#" as it is.
PREDICTION_COLUMNS = ["#", "Prompt", "Reference", "Base model", "Fine-tuned"]
PAIR_COLUMNS = ["#", "Prompt", "Chosen", "Rejected", "Base model", "Fine-tuned", "Margin"]
ANSWER_COLUMNS = ["#", "Prompt", "Answer", "Label", "Base model", "Fine-tuned", "Reward"]
REWARD_COLUMNS = ["#", "Prompt", "Reference", "Base model", "Fine-tuned", "Base reward", "Tuned reward"]
# A run that started from another run is compared with that run, not with the base model.
FROM_START_COLUMNS = {"Base model": "Starting run", "Base reward": "Start reward"}
COLUMN_WORDS = {
    column: key(f"evaluate.column.{column.lower().replace(' ', '_').replace('-', '_')}")
    for column in {*PREDICTION_COLUMNS, *PAIR_COLUMNS, *ANSWER_COLUMNS, *REWARD_COLUMNS, *FROM_START_COLUMNS.values()}
    if column != "#"
}
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
    "completions": (
        ["number", "str", "str", "html", "html", "number", "number"],
        ["5%", "21%", "12%", "23%", "23%", "8%", "8%"],
    ),
}
FILTERS = ("All rows", "Fine-tuned wrong", "Fixed by tuning", "Broken by tuning")  # the filter's values
FILTER_WORDS = dict(zip(FILTERS, ("all", "wrong", "fixed", "broken"), strict=True))  # evaluate.filter.<word>
DATA_LABELS = {"eval": key("evaluate.data.eval"), "train": key("evaluate.data.train")}
DATA_FILE, DATA_UNKNOWN = key("evaluate.data.file"), key("evaluate.data.unknown")
ROWS, WEIGHTS, WHEN = key("evaluate.caption.rows"), key("evaluate.caption.weights"), key("evaluate.caption.when")
BASE, START = key("evaluate.card.base"), key("evaluate.card.start")  # what the tuned model is compared with
EMPTY, EMPTY_ANSWER = key("evaluate.empty"), key("evaluate.empty_answer")
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
    for name in ("unpaired", "paired", "dropped", "from_start", "from_base", "greedy", "skipped")
}
DESIRABLE, UNDESIRABLE = key("evaluate.label.desirable"), key("evaluate.label.undesirable")


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def _card(title: str, base: Any, tuned: Any, fmt: str, lower_is_better: bool, base_label: str = "base") -> str:
    """One metric as base → tuned, the tuned value coloured by whether it improved; ``title`` is HTML,
    ``base_label`` names what the tuned model is compared with."""
    if not (_finite(base) and _finite(tuned)):
        shown = "—" if not _finite(tuned) else format(tuned, fmt)
        return f'<div class="ts-stat ts-eval-card"><span>{title}</span><b>{shown}</b></div>'
    better = tuned < base if lower_is_better else tuned > base
    trend = "ts-better" if better else ("ts-same" if tuned == base else "ts-worse")
    return (
        f'<div class="ts-stat ts-eval-card"><span>{title}</span>'
        f"<b><small>{html.escape(base_label)}</small> {format(base, fmt)} <i>→</i> "
        f'<em class="{trend}">{format(tuned, fmt)}</em></b></div>'
    )


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
    base, tuned = result.get("base") or {}, result.get("tuned") or {}
    vs = text(BASE, lang)
    cards = [_card(_title("preference_accuracy", lang), base.get("accuracy"), tuned.get("accuracy"), ".0%", False, vs)]
    if tuned.get("reward_accuracy") is not None:
        cards.append(_card(_title("reward_accuracy", lang), None, tuned.get("reward_accuracy"), ".0%", False))
    cards.append(_card(_title("mean_margin", lang), None, tuned.get("mean_margin"), ".4f", False))
    cards.append(_card(_title("pairs", lang), None, tuned.get("pairs"), "d", False))
    return cards


def _unpaired_cards(result: dict[str, Any], lang: str = SOURCE) -> list[str]:
    """A kto result: per-token log-probability of desirable and undesirable answers base → tuned, the share of
    desirable answers above the undesirable median, the mean margin."""
    base, tuned = result.get("base") or {}, result.get("tuned") or {}
    vs = text(BASE, lang)
    return [
        _card(
            _title("desirable_logp", lang), base.get("desirable_logp"), tuned.get("desirable_logp"), ".3f", False, vs
        ),
        _card(
            _title("undesirable_logp", lang),
            base.get("undesirable_logp"),
            tuned.get("undesirable_logp"),
            ".3f",
            True,
            vs,
        ),
        _card(_title("desirable_above", lang), None, tuned.get("reward_accuracy"), ".0%", False),
        _card(_title("mean_margin", lang), None, tuned.get("mean_margin"), ".4f", False),
    ]


def _preference_note(result: dict[str, Any], lang: str = SOURCE) -> str:
    """How the preference numbers were taken, after the caption."""
    dropped = (result.get("data") or {}).get("dropped")
    parts = [caption(result, lang), f"{result.get('method', '?')}, beta {result.get('beta', '?')}"]
    parts.append(text(NOTE["unpaired" if is_unpaired(result) else "paired"], lang))
    if dropped:
        parts.append(text(NOTE["dropped"], lang, count=dropped))
    return " · ".join(parts)


def from_start(result: dict[str, Any] | None) -> bool:
    """Whether a rewards result compares with the run it started from rather than the base model."""
    return (result or {}).get("baseline", "base") != "base"


def _rewards_cards(result: dict[str, Any], lang: str = SOURCE) -> list[str]:
    """The weighted reward, each reward function's mean, and exact match when the rows have references: base (or
    the starting run) → tuned."""
    base, tuned = result.get("base") or {}, result.get("tuned") or {}
    label = text(START if from_start(result) else BASE, lang)
    cards = [_card(_title("reward", lang), base.get("reward"), tuned.get("reward"), ".3g", False, label)]
    base_means, tuned_means = base.get("rewards") or {}, tuned.get("rewards") or {}
    for name, weight in (result.get("reward_weights") or {}).items():
        title = f"{html.escape(name)} <small>×{weight:g}</small>"
        # A reward with a negative weight is one GRPO pushes down: a lower mean is the better one.
        cards.append(_card(title, base_means.get(name), tuned_means.get(name), ".3g", weight < 0, label))
    if tuned.get("exact_match") is not None:
        exact = _title("exact_match", lang)
        cards.append(_card(exact, base.get("exact_match"), tuned.get("exact_match"), ".0%", False, label))
    return cards


def _rewards_note(result: dict[str, Any], lang: str = SOURCE) -> str:
    """What the rewards numbers compare and how they were taken, after the caption (the engine's note on the
    baseline as it wrote it)."""
    baseline = result.get("baseline", "base")
    compared = (
        text(NOTE["from_start"], lang, baseline=baseline) if from_start(result) else text(NOTE["from_base"], lang)
    )
    greedy = text(NOTE["greedy"], lang, tokens=result.get("max_new_tokens", "?"))
    parts = [caption(result, lang), compared, greedy]
    skipped = (result.get("data") or {}).get("skipped")
    if skipped:
        parts.append(text(NOTE["skipped"], lang, count=skipped))
    if result.get("baseline_note"):
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
    base, tuned = result.get("base") or {}, result.get("tuned") or {}
    vs = text(BASE, lang)
    cards = [
        _card(_title("eval_loss", lang), base.get("eval_loss"), tuned.get("eval_loss"), ".4f", True, vs),
        _card(_title("perplexity", lang), base.get("perplexity"), tuned.get("perplexity"), ".2f", True, vs),
    ]
    exact = _title("exact_match", lang)
    if tuned.get("exact_match") is not None:
        cards.append(_card(exact, base.get("exact_match"), tuned.get("exact_match"), ".0%", False, vs))
    else:
        cards.append(
            f'<div class="ts-stat ts-eval-card"><span>{exact}</span><b>{_title("no_reference", lang)}</b></div>'
        )
    return (
        f'<div class="ts-eval-cards">{"".join(cards)}</div>'
        f'<div class="ts-eval-caption">{html.escape(caption(result, lang))}</div>'
    )


def _empty(lang: str) -> str:
    return f"<i>{_words(EMPTY_ANSWER, lang)}</i>"


def _answer(answer: str, correct: bool, lang: str = SOURCE) -> str:
    mark = '<span class="ts-right">✓</span>' if correct else '<span class="ts-wrong">✗</span>'
    return f"{mark} {html.escape(answer) or _empty(lang)}"


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


def headed(frame: pd.DataFrame, lang: str = SOURCE) -> pd.DataFrame:
    """``frame`` with its columns named in ``lang``."""
    if lang == SOURCE:
        return frame
    return frame.rename(columns={name: text(words, lang) for name, words in COLUMN_WORDS.items()})


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


def answers_frame(result: dict[str, Any] | None, which: str = FILTERS[0], lang: str = SOURCE) -> pd.DataFrame:
    """A kto result's answers: each model's log-prob per token, the tuned one marked ✓ when its reward sits on
    the right side of the other label's median, and the reward; filtered by ``which``."""
    rows = [
        [
            answer.get("row"),
            html.escape(answer.get("prompt", "")),
            html.escape(answer.get("completion", "")),
            text(DESIRABLE if answer.get("label") else UNDESIRABLE, lang),
            _per_token(answer.get("base_logp"), answer.get("tokens")),
            _mark(answer.get("tuned_correct")) + _per_token(answer.get("tuned_logp"), answer.get("tokens")),
            _rounded(answer.get("reward")),
        ]
        for answer in (result or {}).get("answers") or []
        if _keep(answer, which)
    ]
    return pd.DataFrame(rows, columns=ANSWER_COLUMNS)


def _number(value: Any) -> str:
    return format(value, ".3g") if _finite(value) else "—"


def _rewarded(entry: dict[str, Any], side: str, lang: str = SOURCE) -> str:
    """One model's completion: ✓ or ✗ against the reference (when there is one), the text, and each reward's
    score under it."""
    completion = html.escape(entry.get(side) or "") or _empty(lang)
    scores = " · ".join(
        f"{html.escape(name)} {_number(score)}" for name, score in (entry.get(f"{side}_rewards") or {}).items()
    )
    return f"{_mark(entry.get(f'{side}_correct'))}{completion}<br><small>{scores}</small>"


def _keep_rewarded(entry: dict[str, Any], which: str) -> bool:
    """The filters on a completion: by exact match where the row has a reference, else by the weighted reward
    ("wrong": tuning did not raise it, "fixed": it rose, "broken": it fell)."""
    if entry.get("tuned_correct") is not None:
        return _keep(entry, which)
    before, after = entry.get("base_reward") or 0.0, entry.get("tuned_reward") or 0.0
    if which == "Fine-tuned wrong":
        return after <= before
    if which == "Fixed by tuning":
        return after > before
    if which == "Broken by tuning":
        return after < before
    return True


def completions_frame(result: dict[str, Any] | None, which: str = FILTERS[0], lang: str = SOURCE) -> pd.DataFrame:
    """A rewards result's completions: the prompt, its reference, each model's answer (✓ when it equals the
    reference) with its reward scores, and each model's weighted reward; filtered by ``which``."""
    rows = [
        [
            entry.get("row"),
            html.escape(entry.get("prompt") or ""),
            html.escape("" if entry.get("reference") is None else str(entry["reference"])),
            _rewarded(entry, "base", lang),
            _rewarded(entry, "tuned", lang),
            _rounded(entry.get("base_reward")),
            _rounded(entry.get("tuned_reward")),
        ]
        for entry in (result or {}).get("completions") or []
        if _keep_rewarded(entry, which)
    ]
    frame = pd.DataFrame(rows, columns=REWARD_COLUMNS)
    return frame.rename(columns=FROM_START_COLUMNS) if from_start(result) else frame


def listed_kind(result: dict[str, Any] | None) -> str:
    """What a result lists: "predictions" (answers scoring), "pairs" or "answers" (kto), "completions" (rewards)."""
    if scoring_of(result) == SCORING_REWARDS:
        return "completions"
    if scoring_of(result) != SCORING_PREFERENCE:
        return "predictions"
    return "answers" if is_unpaired(result) else "pairs"


def table_layout(result: dict[str, Any] | None) -> tuple[list[str], list[str]]:
    """The table's column kinds and widths for what the result lists."""
    return TABLE_LAYOUTS[listed_kind(result)]


def predictions_frame(result: dict[str, Any] | None, which: str = FILTERS[0], lang: str = SOURCE) -> pd.DataFrame:
    """Predictions beside references, each answer marked right (✓) or wrong (✗), filtered by ``which``; for a
    preference result its pairs (pairs_frame) or kto answers (answers_frame); for a rewards result its completions
    (completions_frame). Its headers and words are in ``lang``."""
    kind = listed_kind(result)
    if kind == "completions":
        return headed(completions_frame(result, which, lang), lang)
    if kind == "pairs":
        return headed(pairs_frame(result, which), lang)
    if kind == "answers":
        return headed(answers_frame(result, which, lang), lang)
    rows = [
        [
            number,
            html.escape(row.get("prompt", "")),
            html.escape(row.get("reference", "")),
            _answer(row.get("base", ""), bool(row.get("base_correct")), lang),
            _answer(row.get("tuned", ""), bool(row.get("tuned_correct")), lang),
        ]
        for number, row in enumerate((result or {}).get("predictions") or [], start=1)
        if _keep(row, which)
    ]
    return headed(pd.DataFrame(rows, columns=PREDICTION_COLUMNS), lang)


# The table's title (a key) and the key of its count ("3 of 10 rows"), by what it lists.
LIST_TITLES = {
    kind: (key(f"evaluate.list.{kind}"), key(f"evaluate.shown.{kind}"))
    for kind in ("predictions", "pairs", "answers", "completions")
}


COUNTED = key("evaluate.list.counted")  # "{title} ({count})"


def predictions_label(result: dict[str, Any] | None, shown: int, lang: str = SOURCE) -> str:
    """The table's title in ``lang``: what it lists, and how many rows it shows out of all."""
    kind = listed_kind(result)
    title, count = LIST_TITLES[kind]
    total = len((result or {}).get(kind) or [])
    title = text(title, lang)
    return text(COUNTED, lang, title=title, count=text(count, lang, shown=shown, total=total)) if total else title
