"""The model card's rows for the newest evaluation, for each way Evaluate scores a run."""

from __future__ import annotations

from engine.export.model_card import evaluation_rows

DATA = {"choice": "eval", "rows": 20}


def test_a_rewards_result_lists_each_function_against_the_run_it_started_from() -> None:
    result = {
        "scoring": "rewards",
        "baseline": "sft-start, checkpoint 30",
        "reward_weights": {"exact_match": 1.0, "length": 0.5},
        "data": DATA,
        "base": {"rewards": {"exact_match": 0.1, "length": -3.25}, "reward": -1.525, "exact_match": 0.1},
        "tuned": {"rewards": {"exact_match": 0.6, "length": None}, "reward": 0.6, "exact_match": 0.6},
    }
    rows = dict(evaluation_rows(result))
    where = "start run sft-start, checkpoint 30 → tuned (eval set, 20 rows)"
    assert rows == {
        f"weighted reward, {where}": "-1.5250 → 0.6000",
        f"reward exact_match, {where}": "0.1000 → 0.6000",
        f"exact match, {where}": "10.0% → 60.0%",
    }  # the length reward scored nothing on the tuned side: no row rather than "None"


def test_a_rewards_result_from_the_base_says_base() -> None:
    result = {"scoring": "rewards", "baseline": "base", "reward_weights": {"regex": 1.0}, "data": DATA}
    result |= {"base": {"rewards": {"regex": 0.0}, "reward": 0.0}, "tuned": {"rewards": {"regex": 1.0}, "reward": 1.0}}
    assert [name for name, _ in evaluation_rows(result)] == [
        "weighted reward, base → tuned (eval set, 20 rows)",
        "reward regex, base → tuned (eval set, 20 rows)",
    ]


def test_preference_results_paired_and_unpaired() -> None:
    paired = {
        "scoring": "preference",
        "data": DATA,
        "base": {"accuracy": 0.5},
        "tuned": {"accuracy": 0.75, "reward_accuracy": 0.8, "mean_margin": 1.23456},
        "pairs": [],
    }
    assert evaluation_rows(paired) == [
        ("preference accuracy, base → tuned (eval set, 20 rows)", "50.0% → 75.0%"),
        ("reward accuracy, tuned (eval set, 20 rows)", "80.0%"),
        ("mean reward margin, tuned (eval set, 20 rows)", "1.2346"),
    ]
    orpo = {**paired, "tuned": {"accuracy": 0.75, "reward_accuracy": None, "mean_margin": None}}
    assert [name for name, _ in evaluation_rows(orpo)] == ["preference accuracy, base → tuned (eval set, 20 rows)"]
    unpaired = {
        "scoring": "preference",
        "data": DATA,
        "answers": [],
        "tuned": {"reward_accuracy": 0.7, "mean_margin": 0.5},
    }
    assert evaluation_rows(unpaired) == [
        ("desirable answers above the median reward, tuned (eval set, 20 rows)", "70.0%"),
        ("mean reward margin, tuned (eval set, 20 rows)", "0.5000"),
    ]


def test_an_answers_result_without_references_has_no_exact_match_row() -> None:
    result = {"data": DATA, "base": {"eval_loss": 2.5, "exact_match": None}, "tuned": {"eval_loss": 1.25}}
    assert evaluation_rows(result) == [("eval loss, base → tuned (eval set, 20 rows)", "2.5000 → 1.2500")]


def test_an_answers_result_against_a_teacher_says_so() -> None:
    result = {"scoring": "answers", "references": "teacher", "data": DATA}
    result |= {"base": {"eval_loss": 4.0, "exact_match": 0.0}, "tuned": {"eval_loss": 3.5, "exact_match": 0.25}}
    assert evaluation_rows(result) == [
        ("eval loss, base → tuned (eval set, 20 rows, against the teacher's answers)", "4.0000 → 3.5000"),
        ("exact match, base → tuned (eval set, 20 rows, against the teacher's answers)", "0.0% → 25.0%"),
    ]
