"""What the Evaluate tab shows for a rewards result (a GRPO run, studio.evaluate.cards and .tables): cards, the
completions, their filters, and the run list's summary line."""

from __future__ import annotations

import copy

from engine.evaluate import evaluations
from studio.evaluate import cards, tables
from studio.evaluate import tab as evaluate_tab

WEIGHTS = {"exact_match": 2.0, "length": 0.5}


def completion(row: int, reference: str | None, base: str, tuned: str, length: tuple[float, float]) -> dict:
    """A listed completion; correctness, the exact_match scores and the weighted rewards follow from the texts."""
    entry = {"row": row, "prompt": f"date {row}?", "reference": reference, "base": base, "tuned": tuned}
    for side, text, length_score in (("base", base, length[0]), ("tuned", tuned, length[1])):
        correct = None if reference is None else text.strip() == reference.strip()
        scores = {"exact_match": None if correct is None else float(correct), "length": length_score}
        entry |= {
            f"{side}_rewards": scores,
            f"{side}_reward": sum(WEIGHTS[n] * s for n, s in scores.items() if s is not None),
            f"{side}_correct": correct,
        }
    return entry


COMPLETIONS = [
    completion(4, "May 6", "The code 2037", " May 6", (-2.0, -0.5)),  # fixed by tuning
    completion(9, "June 1", "June 1", "June 2", (-0.5, -0.5)),  # broken by tuning
    completion(12, "July 4", "a<b", "July 9", (-2.0, -0.5)),  # wrong both times
]
RESULT = {
    "scoring": "rewards",
    "method": "grpo",
    "baseline": "sft",
    "max_new_tokens": 16,
    "reward_weights": WEIGHTS,
    "data": {"choice": "eval", "rows": 3, "format": "conversational", "skipped": 1},
    "weights": "adapter",
    "seconds": 3,
    "created_at": 0,
    "base": {"rewards": {"exact_match": 1 / 3, "length": -1.5}, "reward": -0.0833, "exact_match": 1 / 3, "prompts": 3},
    "tuned": {"rewards": {"exact_match": 1 / 3, "length": -0.5}, "reward": 0.4167, "exact_match": 1 / 3, "prompts": 3},
    "completions": COMPLETIONS,
}


def test_reward_cards_show_the_weighted_reward_each_function_and_exact_match_from_the_start():
    html = cards.metrics_html(RESULT)
    assert "<span>Reward (weighted sum)</span>" in html
    assert '<small>start</small> -0.0833 <i>→</i> <em class="ts-better">0.417</em>' in html
    assert "<span>exact_match <small>×2</small></span>" in html and "<span>length <small>×0.5</small></span>" in html
    assert '<small>start</small> -1.5 <i>→</i> <em class="ts-better">-0.5</em>' in html
    assert "<span>Exact match</span>" in html and '33% <i>→</i> <em class="ts-same">33%</em>' in html
    assert "repeat(4, minmax(0, 1fr))" in html  # four cards on one row
    assert "eval set · 3 rows" in html and "start = sft" in html and "up to 16 new tokens" in html
    assert "1 rows left out (no prompt)" in html
    assert evaluations.summary_text(RESULT) == "reward -0.0833 → 0.417, exact match 33% → 33%"

    # From the base model, without references, and with more rewards than fit on a row.
    plain = copy.deepcopy(RESULT) | {"baseline": "base"}
    plain["tuned"]["exact_match"] = plain["base"]["exact_match"] = None
    plain["reward_weights"] = {**WEIGHTS, "a": 1.0, "b": 1.0, "c": -1.0}
    plain["base"]["rewards"]["c"], plain["tuned"]["rewards"]["c"] = 3.0, 1.0  # pushed down, as its weight asks
    html = cards.metrics_html(plain)
    assert "<small>base</small>" in html and "<small>start</small>" not in html and "base = the base model" in html
    assert (
        "Exact match" not in html
        and "repeat(4, minmax(0, 1fr))" in html
        and "<span>c <small>×-1</small></span>" in html
    )
    assert '3 <i>→</i> <em class="ts-better">1</em>' in html
    assert evaluations.summary_text(plain) == "reward -0.0833 → 0.417"


def test_the_completions_list_both_answers_with_their_rewards_and_filter_like_predictions():
    frame = tables.predictions_frame(RESULT)
    assert list(frame.columns) == [
        "#",
        "Prompt",
        "Reference",
        "Starting run",
        "Fine-tuned",
        "Start reward",
        "Tuned reward",
    ]
    assert frame.iloc[2].tolist() == [
        12,
        "date 12?",
        "July 4",
        '<span class="ts-wrong">✗</span> a&lt;b<br><small>exact_match 0 · length -2</small>',
        '<span class="ts-wrong">✗</span> July 9<br><small>exact_match 0 · length -0.5</small>',
        -1.0,
        -0.25,
    ]
    assert frame.iloc[0, 4].startswith('<span class="ts-right">✓</span>  May 6<br>')
    filtered = {which: tables.predictions_frame(RESULT, which)["#"].tolist() for which in tables.FILTERS}
    assert filtered == {
        "All rows": [4, 9, 12],
        "Fine-tuned wrong": [9, 12],
        "Fixed by tuning": [4],
        "Broken by tuning": [9],
    }
    label = tables.predictions_label(RESULT, 1)
    assert label.startswith("Completions: greedy answers and their rewards") and label.endswith("(1 of 3 prompts)")

    # Without a reference a row is filtered by its reward, and the base model's columns keep their names.
    unreferenced = copy.deepcopy(RESULT) | {"baseline": "base"}
    unreferenced["completions"] = [
        completion(1, None, "x", "y", (-2.0, -0.5)),
        completion(2, None, "x", "y", (-0.5, -2.0)),
    ]
    frame = tables.predictions_frame(unreferenced)
    assert list(frame.columns) == tables.REWARD_COLUMNS
    assert frame.iloc[0, 3] == "x<br><small>exact_match — · length -2</small>"
    assert tables.predictions_frame(unreferenced, "Fixed by tuning")["#"].tolist() == [1]
    assert tables.predictions_frame(unreferenced, "Broken by tuning")["#"].tolist() == [2]

    # The tab hands the completion columns to its table.
    datatype, widths = tables.table_layout(RESULT)
    assert len(datatype) == len(widths) == len(tables.REWARD_COLUMNS)
    metrics, table, kept = evaluate_tab.result_view(RESULT, "Broken by tuning")
    assert kept is RESULT and table.datatype == datatype and len(table.value["data"]) == 1
    assert "Reward (weighted sum)" in metrics
