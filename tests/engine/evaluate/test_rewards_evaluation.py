"""Evaluate a GRPO run: an SFT run, then a GRPO run that starts from it, both trained for real on the demo model;
the GRPO run scored by its own reward functions through ``python -m engine evaluate``, every number checked
against the completions it lists, and those completions against the models loaded with plain peft."""

from __future__ import annotations

import json
import shutil
import statistics
import textwrap
from pathlib import Path
from typing import Any

import pytest

from engine.config import load_config, parse_config, save_config
from engine.evaluate import evaluations
from engine.evaluate.worker import evaluate
from engine.store.paths import PROJECT_ROOT
from tests.engine.evaluate.test_preference_evaluation import engine_cli
from tests.helpers.engine_cli import run_train

pytestmark = pytest.mark.integration

DEMO_MODEL = PROJECT_ROOT / "assets" / "demo-model"
DEMO_SFT = PROJECT_ROOT / "assets" / "datasets" / "demo_sft_train.jsonl"
ADAPTER = {"r": 8, "alpha": 16, "dropout": 0.0}
EVAL_ROWS, MAX_COMPLETION = 6, 12
WEIGHTS = {"exact_match": 2.0, "length": 0.5, "even_rows": 0.25}
# A custom reward that reads a column (ts_row) and the token ids, and has no opinion (None) on odd rows.
EVEN_ROWS = """
def even_rows(prompts, completions, completion_ids, ts_row, **kwargs):
    return [None if row % 2 else len(ids) / 10 for row, ids in zip(ts_row, completion_ids)]
"""


def trained(root: Path, name: str, config: dict[str, Any]) -> Path:
    """``python -m engine train`` of ``config`` into ``root/runs/name``."""
    path = root / f"{name}.yaml"
    path.write_text(parse_config({"name": name, **config}).to_yaml())
    result = run_train(path, root / "runs" / name)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return root / "runs" / name


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("grpo-eval")


@pytest.fixture(scope="module")
def sft_run(root: Path) -> Path:
    """The demo task learnt a little (LoRA): enough that greedy answers move from prose towards dates."""
    data = {"path": str(DEMO_SFT), "max_samples": 320}
    train = {"max_steps": 40, "per_device_batch_size": 8, "learning_rate": 3e-3, "max_length": 64}
    return trained(root, "sft", {"data": data, "adapter": ADAPTER, "train": train})


@pytest.fixture(scope="module")
def grpo_run(root: Path, sft_run: Path) -> Path:
    """GRPO from the SFT adapter for two steps, with a built-in reward on the reference, one on the length and a
    custom one, each weighted; six prompts held out."""
    reward_file = root / "rewards.py"
    reward_file.write_text(textwrap.dedent(EVEN_ROWS))
    rewards = [
        {"kind": "exact_match", "weight": WEIGHTS["exact_match"]},
        {"kind": "length", "target_tokens": 4, "weight": WEIGHTS["length"]},
        {"kind": "custom", "file": str(reward_file), "function": "even_rows", "weight": WEIGHTS["even_rows"]},
    ]
    config = {
        "method": "grpo",
        "model": {"init_from": str(sft_run)},
        "data": {"path": str(DEMO_SFT), "max_samples": 32, "eval_size": EVAL_ROWS},
        "adapter": ADAPTER,
        "train": {"max_steps": 2, "per_device_batch_size": 4, "learning_rate": 3e-3, "max_length": 64},
        "grpo": {"num_generations": 4, "max_completion_length": MAX_COMPLETION, "rewards": rewards},
    }
    return trained(root, "grpo", config)


def greedy(model: Any, tokenizer: Any, prompt: list[dict]) -> str:
    """One prompt answered greedily, alone (no padding): the reference the batched evaluation must match."""
    import torch

    encoded = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, return_tensors="pt", return_dict=True)
    with torch.inference_mode():
        output = model.generate(**encoded, max_new_tokens=MAX_COMPLETION, do_sample=False)
    return tokenizer.decode(output[0, encoded["input_ids"].shape[1] :], skip_special_tokens=True)


def file_prompt(number: int) -> list[dict]:
    """The prompt of row ``number`` (1-based) of the demo file."""
    return json.loads(DEMO_SFT.read_text().splitlines()[number - 1])["messages"][:-1]


def assert_numbers_follow_from_the_listed_completions(result: dict) -> None:
    listed = result["completions"]
    assert result["reward_weights"] == WEIGHTS
    for side in ("base", "tuned"):
        summary = result[side]
        assert summary["prompts"] == len(listed) == result["data"]["rows"] == EVAL_ROWS
        for name in WEIGHTS:  # a None is left out of its reward's mean
            scored = [entry[f"{side}_rewards"][name] for entry in listed]
            given = [score for score in scored if score is not None]
            assert summary["rewards"][name] == pytest.approx(statistics.fmean(given))
        for entry in listed:
            total = sum(WEIGHTS[n] * s for n, s in entry[f"{side}_rewards"].items() if s is not None)
            assert entry[f"{side}_reward"] == pytest.approx(total)
            assert entry[f"{side}_correct"] == (entry[side].strip() == entry["reference"].strip())
            assert entry[f"{side}_rewards"]["exact_match"] == float(entry[f"{side}_correct"])
        assert summary["reward"] == pytest.approx(statistics.fmean(e[f"{side}_reward"] for e in listed))
        assert summary["exact_match"] == pytest.approx(sum(e[f"{side}_correct"] for e in listed) / len(listed))
    odd = [entry for entry in listed if entry["row"] % 2]
    assert all(entry["tuned_rewards"]["even_rows"] is None for entry in odd)


@pytest.fixture(scope="module")
def grpo_result(grpo_run: Path) -> tuple[dict, str]:
    """The GRPO run evaluated on its held-out prompts through ``python -m engine evaluate``; its output."""
    cli = engine_cli("evaluate", str(grpo_run))
    assert cli.returncode == 0, cli.stdout[-3000:] + cli.stderr[-3000:]
    return evaluations.latest_evaluation(grpo_run), cli.stdout


def test_a_grpo_run_is_scored_by_its_rewards_against_the_run_it_started_from(
    grpo_run: Path, sft_run: Path, grpo_result: tuple[dict, str]
):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    result, output = grpo_result
    assert (result["scoring"], result["method"], result["baseline"]) == ("rewards", "grpo", "sft")
    assert result["max_new_tokens"] == MAX_COMPLETION and result["data"]["skipped"] == 0
    assert result["data"]["rows"] == EVAL_ROWS and result["data"]["choice"] == "eval"
    assert_numbers_follow_from_the_listed_completions(result)
    summary = evaluations.summary_text(result)
    base, tuned = result["base"], result["tuned"]
    assert summary == (
        f"reward {base['reward']:.3g} → {tuned['reward']:.3g}, "
        f"exact match {100 * base['exact_match']:.0f}% → {100 * tuned['exact_match']:.0f}%"
    )
    assert summary in output

    # The listed rows are the file's; the "base" completions are the SFT adapter's, not the raw base's, and the
    # tuned ones the GRPO adapter's (each prompt answered alone, without padding).
    listed = result["completions"]
    tokenizer = AutoTokenizer.from_pretrained(str(DEMO_MODEL))
    model = AutoModelForCausalLM.from_pretrained(str(DEMO_MODEL)).eval()
    prompts = [file_prompt(entry["row"]) for entry in listed]
    assert [entry["prompt"] for entry in listed] == [p[-1]["content"] for p in prompts]
    raw = [greedy(model, tokenizer, prompt) for prompt in prompts]
    started = PeftModel.from_pretrained(model, str(sft_run / "adapter")).eval()
    assert [entry["base"] for entry in listed] == [greedy(started, tokenizer, p) for p in prompts]
    started.load_adapter(str(grpo_run / "adapter"), adapter_name="grpo")
    started.set_adapter("grpo")
    assert [entry["tuned"] for entry in listed] == [greedy(started, tokenizer, p) for p in prompts]
    # The three differ, so the arms cannot have been mixed up.
    assert raw != [entry["base"] for entry in listed] != [entry["tuned"] for entry in listed]
    print(f"\n{summary}; raw base {raw[0]!r}, SFT start {listed[0]['base']!r}, GRPO {listed[0]['tuned']!r}")


def test_on_a_file_exact_match_is_against_its_references_and_a_gone_start_leaves_the_base(
    grpo_run: Path, root: Path, grpo_result: tuple[dict, str]
):
    """A copy of the run whose start is gone, scored on a file whose references are the tuned answers for two
    rows (padded with spaces) and the real answers for the others; a row without a prompt is skipped."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    listed = grpo_result[0]["completions"][:4]
    references = [f"  {listed[0]['tuned']} ", listed[1]["reference"], f"{listed[2]['tuned']}\n", listed[3]["reference"]]
    rows = [
        {"messages": [*file_prompt(entry["row"]), {"role": "assistant", "content": reference}]}
        for entry, reference in zip(listed, references, strict=True)
    ]
    rows.insert(2, {"messages": [{"role": "system", "content": "Be brief."}, {"role": "assistant", "content": "ok"}]})
    data = root / "references.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))

    copy = root / "runs" / "grpo-copy"
    shutil.copytree(grpo_run, copy, ignore=shutil.ignore_patterns("evaluations", "checkpoints"))
    config = load_config(copy / "config.yaml")
    gone = {"model": config.model.model_copy(update={"init_from": str(root / "runs" / "deleted")})}
    save_config(config.model_copy(update=gone), copy / "config.yaml")
    result = evaluate(copy, data=str(data))

    assert result["baseline"] == "base" and "cannot be loaded" in result["baseline_note"]
    assert result["data"] == {
        "choice": "file",
        "source": str(data),
        "rows": 4,
        "format": "conversational",
        "skipped": 1,
    }
    scored = result["completions"]
    assert [entry["row"] for entry in scored] == [1, 2, 4, 5]  # rows of the file; row 3 has no prompt
    assert [entry["reference"] for entry in scored] == references
    assert [entry["tuned"] for entry in scored] == [entry["tuned"] for entry in listed]
    assert [entry["tuned_correct"] for entry in scored] == [True, False, True, False]
    assert result["tuned"]["exact_match"] == 0.5 == result["tuned"]["rewards"]["exact_match"]
    tokenizer = AutoTokenizer.from_pretrained(str(DEMO_MODEL))
    model = AutoModelForCausalLM.from_pretrained(str(DEMO_MODEL)).eval()
    raw = [greedy(model, tokenizer, file_prompt(entry["row"])) for entry in listed]
    assert [entry["base"] for entry in scored] == raw  # the base model itself
    base_right = [b.strip() == r.strip() for b, r in zip(raw, references, strict=True)]
    assert result["base"]["exact_match"] == sum(base_right) / 4


READS_SOLUTION = """
def solved(prompts, completions, solution, **kwargs):
    return [None if s is None else float(s in c[0]["content"]) for s, c in zip(solution, completions)]
"""


def test_rows_are_shaped_and_scored_as_training_shapes_and_scores_them(tmp_path: Path):
    """Without a model: the data's own columns reach the rewards (its answer column as the reference, of one type),
    a None is left out of its reward's mean and adds nothing to the weighted sum, a row without a prompt is
    counted."""
    from transformers import TrainerState

    from engine.data import load_rows
    from engine.data.prompts import prompt_rows
    from engine.evaluate.rewards import Arm, is_correct, score_completions
    from engine.evaluate.scoring import Completion
    from engine.training.rewards import reward_functions

    def row(question: str, worked: str, **columns: Any) -> dict:
        return {"messages": [{"role": "user", "content": question}, {"role": "assistant", "content": worked}]} | columns

    rows = [
        row("2+2?", "2+2 is 4", answer=4, solution="4"),
        row("2+3?", "2+3 is 5", answer="5"),
        {"messages": [{"role": "system", "content": "Be brief."}, {"role": "assistant", "content": "ok"}]},
    ]
    data = tmp_path / "math.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "rewards.py").write_text(textwrap.dedent(READS_SOLUTION))
    config = parse_config(
        {
            "method": "grpo",
            "data": {"path": str(data)},
            "grpo": {
                "rewards": [
                    {"kind": "exact_match", "weight": 2.0},
                    {"kind": "custom", "file": str(tmp_path / "rewards.py"), "function": "solved", "weight": -1.0},
                ]
            },
        }
    )
    loaded = load_rows(config.data, str(data))
    shaped, skipped = prompt_rows(loaded, [0, 1, 2])
    assert skipped == 1 and [r["ts_row"] for r in shaped] == [1, 2]
    assert [r["answer"] for r in shaped] == ["4", "5"]  # the data's answer column, not the worked answer; as text
    assert [r.get("solution") for r in shaped] == ["4", None]

    completions = [Completion(" 4\n", [7, 2]), Completion("6", [9, 2])]
    rewards = reward_functions(config.grpo.rewards, None)
    scores = score_completions(rewards, shaped, completions, TrainerState())
    assert scores == [{"exact_match": 1.0, "solved": 1.0}, {"exact_match": 0.0, "solved": None}]
    correct = [is_correct(c.text, r["answer"]) for c, r in zip(completions, shaped, strict=True)]
    summary = Arm(completions, scores, correct).summary({"exact_match": 2.0, "solved": -1.0})
    assert summary == {
        "rewards": {"exact_match": 0.5, "solved": 1.0},
        "reward": pytest.approx((2.0 - 1.0 + 0.0) / 2),
        "exact_match": 0.5,
        "prompts": 2,
    }
    assert is_correct("4", 4) is True and is_correct("4", None) is None
