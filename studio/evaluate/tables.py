"""The Evaluate tab's table for one result (engine.evaluate.evaluations): predictions beside references, each
answer marked right or wrong; a preference run's pairs as each model ranked them (kto: its answers); a rewards run's
completions with each reward's score; filtered by what tuning changed, with its title and column layout.

Pure functions of a result dict, tested without Gradio. Every word is in ``lang`` (English by default): the
headers, the title, the labels; numbers, reward names and the model's texts stay as they are.
"""

from __future__ import annotations

import html
from typing import Any

import pandas as pd

from engine.api import SCORING_PREFERENCE, SCORING_REWARDS, is_unpaired, scoring_of
from studio.evaluate.cards import RAW_BASE, finite, from_start
from studio.i18n.catalog import SOURCE, key, text

# The tables' columns, by their English names (what the frames are built and filtered with); the page gets them in
# its language (``COLUMN_WORDS``), "#" as it is.
PREDICTION_COLUMNS = ["#", "Prompt", "Reference", "Base model", "Fine-tuned"]
PAIR_COLUMNS = ["#", "Prompt", "Chosen", "Rejected", "Base model", "Fine-tuned", "Margin"]
ANSWER_COLUMNS = ["#", "Prompt", "Answer", "Label", "Base model", "Fine-tuned", "Reward"]
REWARD_COLUMNS = ["#", "Prompt", "Reference", "Base model", "Fine-tuned", "Base reward", "Tuned reward"]
# A run that started from another run is compared with that run, not with the base model; the base model's column
# then comes before the starting run's, where the result has it (RAW_BASE).
FROM_START_COLUMNS = {"Base model": "Starting run", "Base reward": "Start reward"}
BEFORE_START = "Base model"
# Where a result's references come from, when not from the data (``"references"``): a distill run is scored against
# its teacher's answers, which its Reference column then names.
REFERENCE_COLUMNS = {"teacher": "Teacher"}
COLUMN_WORDS = {
    column: key(f"evaluate.column.{column.lower().replace(' ', '_').replace('-', '_')}")
    for column in {
        *PREDICTION_COLUMNS,
        *PAIR_COLUMNS,
        *ANSWER_COLUMNS,
        *REWARD_COLUMNS,
        *FROM_START_COLUMNS.values(),
        *REFERENCE_COLUMNS.values(),
    }
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
# With the base model's column beside the starting run's: the widths of the model columns shrink to make room.
THREE_ARM_LAYOUTS = {
    "predictions": (["number", "str", "str", "html", "html", "html"], ["5%", "25%", "15%", "18%", "18%", "19%"]),
    "pairs": (
        ["number", "str", "str", "str", "html", "html", "html", "number"],
        ["5%", "20%", "12%", "12%", "13%", "13%", "15%", "10%"],
    ),
    "answers": (
        ["number", "str", "str", "str", "html", "html", "html", "number"],
        ["5%", "24%", "17%", "9%", "11%", "12%", "12%", "10%"],
    ),
    "completions": (
        ["number", "str", "str", "html", "html", "html", "number", "number"],
        ["5%", "17%", "10%", "19%", "19%", "19%", "6%", "5%"],
    ),
}
FILTERS = ("All rows", "Fine-tuned wrong", "Fixed by tuning", "Broken by tuning")  # the filter's values
FILTER_WORDS = dict(zip(FILTERS, ("all", "wrong", "fixed", "broken"), strict=True))  # evaluate.filter.<word>
EMPTY_ANSWER = key("evaluate.empty_answer")
DESIRABLE, UNDESIRABLE = key("evaluate.label.desirable"), key("evaluate.label.undesirable")


def _empty(lang: str) -> str:
    return f"<i>{html.escape(text(EMPTY_ANSWER, lang))}</i>"


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
    return f"{total / tokens:.3f}" if finite(total) and tokens else "—"


def _ranking(pair: dict[str, Any], side: str) -> str:
    """One model's view of a pair: ✓ when it ranks chosen first, and both answers' log-prob per token (or, from a
    model that scores answers, a reward model, both answers' scores)."""
    if f"{side}_chosen_reward" in pair:
        chosen, rejected = (_score(pair.get(f"{side}_{answer}_reward")) for answer in ("chosen", "rejected"))
    else:
        chosen = _per_token(pair.get(f"{side}_chosen_logp"), pair.get("chosen_tokens"))
        rejected = _per_token(pair.get(f"{side}_rejected_logp"), pair.get("rejected_tokens"))
    return f"{_mark(pair.get(f'{side}_correct'))}{chosen} vs {rejected}"


def _score(value: Any) -> str:
    return f"{value:.3f}" if finite(value) else "—"


def _rounded(value: Any) -> float | None:
    return round(value, 4) if finite(value) else None


def has_raw_base(result: dict[str, Any] | None) -> bool:
    """Whether a result lists the raw base model beside the run it started from (a third model column)."""
    return from_start(result) and bool((result or {}).get(RAW_BASE))


def _three_arms(result: dict[str, Any] | None, rows: list[list[Any]], columns: list[str], raw: list[Any]) -> Any:
    """The frame of ``rows`` under ``columns``; for a result that compares with its starting run, the baseline's
    columns renamed for it and, where the result has the raw base, its column (``raw``: one cell per row) before
    the starting run's."""
    if not from_start(result):
        return pd.DataFrame(rows, columns=columns)
    at = columns.index(BEFORE_START)
    renamed = [FROM_START_COLUMNS.get(column, column) for column in columns]
    if not has_raw_base(result):
        return pd.DataFrame(rows, columns=renamed)
    widened = [row[:at] + [cell] + row[at:] for row, cell in zip(rows, raw, strict=True)]
    return pd.DataFrame(widened, columns=renamed[:at] + [BEFORE_START] + renamed[at:])


def headed(frame: pd.DataFrame, lang: str = SOURCE) -> pd.DataFrame:
    """``frame`` with its columns named in ``lang``."""
    if lang == SOURCE:
        return frame
    return frame.rename(columns={name: text(words, lang) for name, words in COLUMN_WORDS.items()})


def pairs_frame(result: dict[str, Any] | None, which: str = FILTERS[0]) -> pd.DataFrame:
    """A preference result's pairs: each model's log-prob per token (or score) of chosen vs rejected, marked ✓
    when it ranks chosen first, and the margin; filtered by ``which``."""
    kept = [pair for pair in (result or {}).get("pairs") or [] if _keep(pair, which)]
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
        for pair in kept
    ]
    return _three_arms(result, rows, PAIR_COLUMNS, [_ranking(pair, RAW_BASE) for pair in kept])


def answers_frame(result: dict[str, Any] | None, which: str = FILTERS[0], lang: str = SOURCE) -> pd.DataFrame:
    """A kto result's answers: each model's log-prob per token, the tuned one marked ✓ when its reward sits on
    the right side of the other label's median, and the reward; filtered by ``which``."""
    kept = [answer for answer in (result or {}).get("answers") or [] if _keep(answer, which)]
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
        for answer in kept
    ]
    raw = [_per_token(answer.get(f"{RAW_BASE}_logp"), answer.get("tokens")) for answer in kept]
    return _three_arms(result, rows, ANSWER_COLUMNS, raw)


def _number(value: Any) -> str:
    return format(value, ".3g") if finite(value) else "—"


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
    kept = [entry for entry in (result or {}).get("completions") or [] if _keep_rewarded(entry, which)]
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
        for entry in kept
    ]
    return _three_arms(result, rows, REWARD_COLUMNS, [_rewarded(entry, RAW_BASE, lang) for entry in kept])


def listed_kind(result: dict[str, Any] | None) -> str:
    """What a result lists: "predictions" (answers scoring), "pairs" or "answers" (kto), "completions" (rewards)."""
    if scoring_of(result) == SCORING_REWARDS:
        return "completions"
    if scoring_of(result) != SCORING_PREFERENCE:
        return "predictions"
    return "answers" if is_unpaired(result) else "pairs"


def table_layout(result: dict[str, Any] | None) -> tuple[list[str], list[str]]:
    """The table's column kinds and widths for what the result lists (and whether it lists the base model beside
    the run it started from)."""
    return (THREE_ARM_LAYOUTS if has_raw_base(result) else TABLE_LAYOUTS)[listed_kind(result)]


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
    kept = [(n, row) for n, row in enumerate((result or {}).get("predictions") or [], start=1) if _keep(row, which)]
    rows = [
        [
            number,
            html.escape(row.get("prompt", "")),
            html.escape(row.get("reference", "")),
            _answer(row.get("base", ""), bool(row.get("base_correct")), lang),
            _answer(row.get("tuned", ""), bool(row.get("tuned_correct")), lang),
        ]
        for number, row in kept
    ]
    raw = [_answer(row.get(RAW_BASE, ""), bool(row.get(f"{RAW_BASE}_correct")), lang) for _, row in kept]
    named = REFERENCE_COLUMNS.get((result or {}).get("references", ""), "Reference")
    columns = [named if column == "Reference" else column for column in PREDICTION_COLUMNS]
    return headed(_three_arms(result, rows, columns, raw), lang)


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
