"""What the Evaluate tab shows for a preference result (studio.evaluate.cards and .tables): cards, the pair list,
its filters."""

from __future__ import annotations

import copy

from engine.evaluate import evaluations
from studio.evaluate import cards, tables
from studio.evaluate import tab as evaluate_tab


def pair(row: int, base: tuple[float, float], tuned: tuple[float, float], prompt: str = "p") -> dict:
    """A listed pair with 2 chosen and 4 rejected tokens; its marks and margin (beta 0.1) follow from the sums."""
    margin = 0.1 * ((tuned[0] - base[0]) - (tuned[1] - base[1]))
    return {
        "row": row,
        "prompt": prompt,
        "chosen": "good",
        "rejected": "bad",
        "chosen_tokens": 2,
        "rejected_tokens": 4,
        "base_chosen_logp": base[0],
        "base_rejected_logp": base[1],
        "tuned_chosen_logp": tuned[0],
        "tuned_rejected_logp": tuned[1],
        "margin": margin,
        "base_correct": base[0] / 2 > base[1] / 4,
        "tuned_correct": tuned[0] / 2 > tuned[1] / 4,
        "reward_correct": margin > 0,
    }


DPO_RESULT = {
    "scoring": "preference",
    "method": "dpo",
    "beta": 0.1,
    "data": {"choice": "eval", "rows": 3, "format": "preference", "dropped": 1},
    "weights": "adapter",
    "seconds": 2,
    "created_at": 0,
    "base": {"accuracy": 1 / 3, "chosen_logp": -3.0, "rejected_logp": -2.0, "pairs": 3},
    "tuned": {
        "accuracy": 2 / 3,
        "chosen_logp": -2.0,
        "rejected_logp": -2.5,
        "pairs": 3,
        "reward_accuracy": 2 / 3,
        "mean_margin": 0.25,
    },
    "pairs": [
        pair(7, (-6.0, -8.0), (-2.0, -12.0), prompt="a<b"),  # wrong before (-3 vs -2), right after (-1 vs -3)
        pair(2, (-2.0, -12.0), (-4.0, -6.0)),  # right before (-1 vs -3), wrong after (-2 vs -1.5)
        pair(5, (-2.0, -16.0), (-2.0, -16.0)),  # right both times, no margin
    ],
}


def test_preference_cards_show_accuracy_base_to_tuned_the_margin_and_the_pairs():
    html = cards.metrics_html(DPO_RESULT)
    for title in ("Preference accuracy", "Reward accuracy", "Mean margin", "Pairs"):
        assert f"<span>{title}</span>" in html
    assert '<small>base</small> 33% <i>→</i> <em class="ts-better">67%</em>' in html
    assert "<b>0.2500</b>" in html and "<b>3</b>" in html
    assert "repeat(4, minmax(0, 1fr))" in html  # four cards on one row
    assert "eval set · 3 rows" in html and "dpo, beta 0.1" in html and "mean log-prob per token" in html
    assert "1 rows left out" in html
    assert evaluations.summary_text(DPO_RESULT) == "preference 33% → 67%, margin 0.25"

    orpo = copy.deepcopy(DPO_RESULT) | {"method": "orpo"}
    orpo["tuned"]["reward_accuracy"] = None  # no reference: no reward ranking
    html = cards.metrics_html(orpo)
    assert "Reward accuracy" not in html and "Preference accuracy" in html and "repeat(" not in html


def test_the_pair_list_shows_each_models_ranking_and_filters_like_predictions():
    frame = tables.predictions_frame(DPO_RESULT)
    assert list(frame.columns) == tables.PAIR_COLUMNS
    assert frame.iloc[0].tolist() == [
        7,
        "a&lt;b",
        "good",
        "bad",
        '<span class="ts-wrong">✗</span> -3.000 vs -2.000',
        '<span class="ts-right">✓</span> -1.000 vs -3.000',
        0.8,
    ]
    assert frame["Margin"].tolist() == [0.8, -0.8, 0.0]
    filtered = {which: tables.predictions_frame(DPO_RESULT, which)["#"].tolist() for which in tables.FILTERS}
    assert filtered == {
        "All rows": [7, 2, 5],
        "Fine-tuned wrong": [2],
        "Fixed by tuning": [7],
        "Broken by tuning": [2],
    }
    label = tables.predictions_label(DPO_RESULT, 1)
    assert label.startswith("Pairs: log-prob per token, chosen vs rejected") and label.endswith("(1 of 3 pairs)")
    datatype, widths = tables.table_layout(DPO_RESULT)
    assert len(datatype) == len(widths) == len(tables.PAIR_COLUMNS)

    # The tab hands the pair columns to its table; an answers result keeps the predictions' columns.
    metrics, table, kept = evaluate_tab.result_view(DPO_RESULT, "Fixed by tuning")
    assert kept is DPO_RESULT and table.datatype == datatype and len(table.value["data"]) == 1
    assert table.value["headers"] == tables.PAIR_COLUMNS
    assert evaluate_tab.result_view(None)[1].datatype == ["number", "str", "str", "html", "html"]


def test_a_kto_result_lists_its_answers_and_an_old_result_reads_as_answers():
    kto = {
        "scoring": "preference",
        "method": "kto",
        "beta": 0.1,
        "data": {"choice": "eval", "rows": 2, "format": "kto", "dropped": 0},
        "base": {"desirable_logp": -3.0, "undesirable_logp": -2.0, "answers": 2, "desirable": 1},
        "tuned": {
            "desirable_logp": -1.0,
            "undesirable_logp": -4.0,
            "answers": 2,
            "desirable": 1,
            "reward_accuracy": 1.0,
            "mean_margin": 0.4,
        },
        "answers": [
            {"row": 1, "prompt": "p", "completion": "yes", "label": True, "tokens": 2, "base_logp": -6.0,
             "tuned_logp": -2.0, "reward": 0.4, "base_correct": False, "tuned_correct": True},
            {"row": 2, "prompt": "q", "completion": "no", "label": False, "tokens": 1, "base_logp": -2.0,
             "tuned_logp": -4.0, "reward": -0.2, "base_correct": False, "tuned_correct": True},
        ],
    }  # fmt: skip
    html = cards.metrics_html(kto)
    assert "Desirable log-prob / token" in html and '<em class="ts-better">-1.000</em>' in html
    assert "Undesirable log-prob / token" in html and '<em class="ts-better">-4.000</em>' in html  # lower is better
    assert "Desirable above median" in html and "<b>100%</b>" in html
    frame = tables.predictions_frame(kto)
    assert list(frame.columns) == tables.ANSWER_COLUMNS
    assert frame.iloc[1].tolist() == [
        2,
        "q",
        "no",
        "undesirable",
        "-2.000",
        '<span class="ts-right">✓</span> -4.000',
        -0.2,
    ]
    assert tables.predictions_label(kto, 2).endswith("(2 of 2 answers)")
    assert evaluations.summary_text(kto) == "desirable above median 100%, margin 0.4"

    old = {"base": {"eval_loss": 2.0, "exact_match": None}, "tuned": {"eval_loss": 1.0, "exact_match": None}}
    assert evaluations.scoring_of(old) == "answers" and tables.listed_kind(old) == "predictions"
    assert evaluations.summary_text(old) == "loss 2 → 1"


def test_a_scored_result_lists_each_models_scores_and_says_how_it_ranked() -> None:
    """A reward model's result (engine.training.methods.rm.scoring): scores in place of log-probs, no beta."""
    scored_pair = {
        "row": 4,
        "prompt": "p",
        "chosen": "good",
        "rejected": "bad",
        "base_chosen_reward": -0.25,
        "base_rejected_reward": 0.5,
        "tuned_chosen_reward": 3.0,
        "tuned_rejected_reward": -1.125,
        "margin": 4.125,
        "base_correct": False,
        "tuned_correct": True,
    }
    result = {
        "scoring": "preference",
        "method": "rm",
        "score": "reward",
        "data": {"choice": "eval", "rows": 1, "format": "preference"},
        "weights": "adapter",
        "seconds": 1,
        "base": {"accuracy": 0.0, "mean_margin": -0.75, "pairs": 1},
        "tuned": {"accuracy": 1.0, "mean_margin": 4.125, "pairs": 1},
        "pairs": [scored_pair],
    }
    frame = tables.pairs_frame(result)
    assert frame.iloc[0].tolist()[4:] == [
        '<span class="ts-wrong">✗</span> -0.250 vs 0.500',
        '<span class="ts-right">✓</span> 3.000 vs -1.125',
        4.125,
    ]
    html = cards.metrics_html(result)
    assert "beta" not in html and "by the model&#x27;s score of each answer" in html
    assert "0%" in html and "100%" in html
