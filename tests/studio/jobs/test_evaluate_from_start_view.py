"""What the Evaluate tab shows for a run that started from another run (SFT → DPO): the tuned model against the
starting run (what this run's training changed), with the base model shown first on every card and in a column of
its own in the table (studio.evaluate.cards and .tables)."""

from __future__ import annotations

import copy
import html as markup

from studio.evaluate import cards, tables
from studio.evaluate import tab as evaluate_tab
from studio.i18n.catalog import text


def pair(row: int, raw: tuple[float, float], start: tuple[float, float], tuned: tuple[float, float]) -> dict:
    """A listed pair (4 tokens per answer); each model's ranking follows from its log-likelihoods."""
    entry = {"row": row, "prompt": f"date {row}?", "chosen": "May 6", "rejected": "6 May"}
    entry |= {"chosen_tokens": 4, "rejected_tokens": 4}
    for side, (chosen, rejected) in (("raw_base", raw), ("base", start), ("tuned", tuned)):
        entry |= {
            f"{side}_chosen_logp": chosen,
            f"{side}_rejected_logp": rejected,
            f"{side}_correct": chosen > rejected,
        }
    entry["margin"] = 0.1 * ((tuned[0] - start[0]) - (tuned[1] - start[1]))
    entry["reward_correct"] = entry["margin"] > 0
    return entry


PAIRS = [
    pair(3, (-8.0, -4.0), (-2.0, -4.0), (-1.0, -6.0)),  # the SFT start already ranks it right
    pair(7, (-8.0, -4.0), (-5.0, -4.0), (-2.0, -6.0)),  # fixed by DPO
]
PREFERENCE = {
    "scoring": "preference",
    "method": "dpo",
    "baseline": "sft",
    "beta": 0.1,
    "data": {"choice": "eval", "rows": 2, "format": "preference", "dropped": 0},
    "weights": "adapter",
    "seconds": 2,
    "created_at": 0,
    "raw_base": {"accuracy": 0.0, "chosen_logp": -2.0, "rejected_logp": -1.0, "pairs": 2},
    "base": {"accuracy": 0.5, "chosen_logp": -0.875, "rejected_logp": -1.0, "pairs": 2},
    "tuned": {
        "accuracy": 1.0,
        "chosen_logp": -0.375,
        "rejected_logp": -1.5,
        "pairs": 2,
        "reward_accuracy": 1.0,
        "mean_margin": 0.3,
    },
    "pairs": PAIRS,
}


def test_the_cards_compare_with_the_start_and_show_the_base_first():
    shown = cards.metrics_html(PREFERENCE)
    assert '<small>base</small> 0% <i>·</i> <small>start</small> 50% <i>→</i> <em class="ts-better">100%</em>' in shown
    assert "start = sft" in shown and "base = the base model" in shown
    # A result compared with the base model alone reads as before: base → tuned, no third value.
    plain = copy.deepcopy(PREFERENCE)
    del plain["baseline"], plain["raw_base"]
    shown = cards.metrics_html(plain)
    assert '<small>base</small> 50% <i>→</i> <em class="ts-better">100%</em>' in shown and "<i>·</i>" not in shown
    assert "start =" not in shown


def test_the_pairs_list_the_base_model_in_a_third_column():
    frame = tables.predictions_frame(PREFERENCE)
    assert list(frame.columns) == [
        "#",
        "Prompt",
        "Chosen",
        "Rejected",
        "Base model",
        "Starting run",
        "Fine-tuned",
        "Margin",
    ]
    first = frame.iloc[0]
    assert first["Base model"] == '<span class="ts-wrong">✗</span> -2.000 vs -1.000'
    assert first["Starting run"] == '<span class="ts-right">✓</span> -0.500 vs -1.000'
    assert first["Fine-tuned"].startswith('<span class="ts-right">✓</span> -0.250 vs -1.500')
    # "Fixed by tuning" is what this run fixed: the pair the start already ranked right is not among them.
    fixed = tables.predictions_frame(PREFERENCE, "Fixed by tuning")
    assert list(fixed["#"]) == [7]
    datatype, widths = tables.table_layout(PREFERENCE)
    assert len(datatype) == len(widths) == len(frame.columns)
    _, table, _ = evaluate_tab.result_view(PREFERENCE, lang="ja")
    assert table.datatype == datatype and table.value["headers"][4:7] == [
        text("evaluate.column.base_model", "ja"),
        text("evaluate.column.starting_run", "ja"),
        text("evaluate.column.fine_tuned", "ja"),
    ]


ANSWERS = {
    "scoring": "answers",
    "baseline": "sft, checkpoint 30",
    "data": {"choice": "eval", "rows": 1, "format": "conversational"},
    "weights": "model",
    "seconds": 4,
    "created_at": 0,
    "max_new_tokens": 12,
    "raw_base": {"eval_loss": 3.2, "perplexity": 24.5, "exact_match": 0.0, "loss_tokens": 4, "scored_rows": 1},
    "base": {"eval_loss": 1.1, "perplexity": 3.0, "exact_match": 0.0, "loss_tokens": 4, "scored_rows": 1},
    "tuned": {"eval_loss": 0.4, "perplexity": 1.49, "exact_match": 1.0, "loss_tokens": 4, "scored_rows": 1},
    "predictions": [
        {
            "prompt": "1999-05-06?",
            "reference": "May 6",
            "raw_base": "The date",
            "raw_base_correct": False,
            "base": "May 7",
            "base_correct": False,
            "tuned": "May 6",
            "tuned_correct": True,
        }
    ],
}


def test_an_answers_result_shows_the_three_models():
    shown = markup.unescape(cards.metrics_html(ANSWERS))
    assert (
        '<small>base</small> 3.2000 <i>·</i> <small>start</small> 1.1000 <i>→</i> <em class="ts-better">0.4000' in shown
    )
    assert "start = sft, checkpoint 30" in shown
    frame = tables.predictions_frame(ANSWERS)
    assert list(frame.columns) == ["#", "Prompt", "Reference", "Base model", "Starting run", "Fine-tuned"]
    assert list(frame.iloc[0])[3:] == [
        '<span class="ts-wrong">✗</span> The date',
        '<span class="ts-wrong">✗</span> May 7',
        '<span class="ts-right">✓</span> May 6',
    ]
    assert tables.table_layout(ANSWERS) == tables.THREE_ARM_LAYOUTS["predictions"]


def test_a_kto_and_a_rewards_result_from_a_start_list_the_base_model_too():
    kto = {
        "scoring": "preference",
        "method": "kto",
        "baseline": "sft",
        "beta": 0.1,
        "data": {"choice": "eval", "rows": 1, "format": "unpaired"},
        "raw_base": {"desirable_logp": -3.0, "undesirable_logp": -2.0, "answers": 1, "desirable": 1},
        "base": {"desirable_logp": -1.0, "undesirable_logp": -2.0, "answers": 1, "desirable": 1},
        "tuned": {"desirable_logp": -0.5, "undesirable_logp": -3.0, "reward_accuracy": None, "mean_margin": None},
        "answers": [
            {
                "row": 2,
                "prompt": "p",
                "completion": "May 6",
                "label": True,
                "tokens": 2,
                "raw_base_logp": -6.0,
                "base_logp": -2.0,
                "tuned_logp": -1.0,
                "reward": 0.1,
                "base_correct": None,
                "tuned_correct": None,
            }
        ],
    }
    frame = tables.predictions_frame(kto)
    assert list(frame.columns)[4:7] == ["Base model", "Starting run", "Fine-tuned"]
    assert list(frame.iloc[0])[4:6] == ["-3.000", "-1.000"]
    shown = cards.metrics_html(kto)
    assert "reward = beta × (log-prob tuned − start)" in markup.unescape(shown)
    assert "<small>base</small> -3.000 <i>·</i> <small>start</small> -1.000" in shown

    rewards = {
        "scoring": "rewards",
        "baseline": "sft",
        "max_new_tokens": 8,
        "reward_weights": {"exact_match": 1.0},
        "data": {"choice": "eval", "rows": 1, "format": "conversational"},
        "raw_base": {"rewards": {"exact_match": 0.0}, "reward": 0.0, "exact_match": 0.0, "prompts": 1},
        "base": {"rewards": {"exact_match": 0.0}, "reward": 0.0, "exact_match": 0.0, "prompts": 1},
        "tuned": {"rewards": {"exact_match": 1.0}, "reward": 1.0, "exact_match": 1.0, "prompts": 1},
        "completions": [
            {
                "row": 1,
                "prompt": "p",
                "reference": "May 6",
                **{f"{side}": answer for side, answer in (("raw_base", "x"), ("base", "May 7"), ("tuned", "May 6"))},
                **{
                    f"{side}_rewards": {"exact_match": s}
                    for side, s in (("raw_base", 0.0), ("base", 0.0), ("tuned", 1.0))
                },
                **{f"{side}_reward": s for side, s in (("raw_base", 0.0), ("base", 0.0), ("tuned", 1.0))},
                **{f"{side}_correct": s for side, s in (("raw_base", False), ("base", False), ("tuned", True))},
            }
        ],
    }
    frame = tables.predictions_frame(rewards)
    assert list(frame.columns) == [
        "#",
        "Prompt",
        "Reference",
        "Base model",
        "Starting run",
        "Fine-tuned",
        "Start reward",
        "Tuned reward",
    ]
    assert frame.iloc[0]["Base model"].startswith('<span class="ts-wrong">✗</span> x<br>')
    shown = cards.metrics_html(rewards)
    assert "<small>base</small> 0 <i>·</i> <small>start</small> 0 <i>→</i>" in shown
    assert shown.count("base = the base model") == 1 and "start = sft" in shown


def test_a_result_scored_against_a_teacher_names_its_reference_column_so():
    """A distill run is scored against its teacher's answers ("references": "teacher"): the column says so."""
    prediction = {"prompt": "date?", "reference": "May 6", "base": "6", "tuned": "May 6"}
    prediction |= {"base_correct": False, "tuned_correct": True}
    result = {"scoring": "answers", "references": "teacher", "predictions": [prediction]}
    frame = tables.predictions_frame(result)
    assert list(frame.columns) == ["#", "Prompt", "Teacher", "Base model", "Fine-tuned"]
    assert frame.iloc[0]["Teacher"] == "May 6"
    assert "教師モデル" in list(tables.predictions_frame(result, lang="ja").columns)
    del result["references"]  # a run scored against the data's own answers
    assert "Reference" in list(tables.predictions_frame(result).columns)
