"""Evaluate a preference run: a tiny DPO run trained for real, scored through the real ``python -m engine evaluate``
job, its numbers checked against the pairs it lists and against the base model loaded with plain transformers;
and the plain scoring function on kto rows."""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from engine.config import parse_config
from engine.evaluate import evaluations
from engine.evaluate.preference import score_pairs
from engine.runs import jobs
from engine.store.paths import PROJECT_ROOT

pytestmark = pytest.mark.integration

DEMO_MODEL = PROJECT_ROOT / "assets" / "demo-model"
DEMO_PREFERENCE = PROJECT_ROOT / "assets" / "datasets" / "demo_preference.jsonl"
EVAL_ROWS = 16


def engine_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m engine ARGS`` in the foreground, offline."""
    return subprocess.run(
        [sys.executable, "-m", "engine", *args],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ, HF_HUB_OFFLINE="1"),
    )


@pytest.fixture(scope="module")
def dpo_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A DPO run (LoRA) trained for 20 steps on the bundled preference set, with 16 pairs held out."""
    root = tmp_path_factory.mktemp("dpo-eval")
    config = parse_config(
        {
            "name": "dpo-eval",
            "method": "dpo",
            "data": {"path": str(DEMO_PREFERENCE), "max_samples": 48, "eval_size": EVAL_ROWS},
            "train": {"max_steps": 20, "learning_rate": 3e-3, "per_device_batch_size": 4, "max_length": 64},
        }
    )
    (root / "config.yaml").write_text(config.to_yaml())
    result = engine_cli("train", str(root / "config.yaml"), "--run-dir", str(root / "run"))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return root / "run"


def file_row(number: int) -> dict:
    """Row ``number`` (1-based) of the bundled preference file, already in canonical form."""
    return json.loads(DEMO_PREFERENCE.read_text().splitlines()[number - 1])


def plain_logp(model, tokenizer, prompt: list[dict], answer: list[dict]) -> float:
    """The answer's summed log-probability given the prompt, one row, no padding: the reference computation."""
    prompt_ids = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=True, return_dict=True)
    full_ids = tokenizer.apply_chat_template(prompt + answer, tokenize=True, return_dict=True)["input_ids"]
    start = len(prompt_ids["input_ids"])
    assert full_ids[:start] == prompt_ids["input_ids"]  # the demo template renders the prompt as a prefix
    with torch.inference_mode():
        logits = model(input_ids=torch.tensor([full_ids])).logits[0].float()
    logps = torch.log_softmax(logits[:-1], dim=-1)
    return sum(float(logps[t - 1, full_ids[t]]) for t in range(start, len(full_ids)))


def test_a_dpo_run_is_evaluated_on_its_held_out_pairs(dpo_run: Path):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    cli = engine_cli("evaluate", str(dpo_run))
    assert cli.returncode == 0, cli.stdout[-3000:] + cli.stderr[-3000:]
    result = evaluations.latest_evaluation(dpo_run)
    assert (result["scoring"], result["method"], result["beta"]) == ("preference", "dpo", 0.1)
    assert result["data"]["choice"] == "eval" and result["data"]["format"] == "preference"
    pairs, base, tuned = result["pairs"], result["base"], result["tuned"]
    assert len(pairs) == result["data"]["rows"] == base["pairs"] == tuned["pairs"] == EVAL_ROWS
    assert result["data"]["dropped"] == 0
    for accuracy in (base["accuracy"], tuned["accuracy"], tuned["reward_accuracy"]):
        assert 0.0 <= accuracy <= 1.0

    # Every summary number follows from the listed pairs.
    def mean_per_token(pair: dict, side: str, answer: str) -> float:
        return pair[f"{side}_{answer}_logp"] / pair[f"{answer}_tokens"]

    for pair in pairs:
        expected = 0.1 * (
            (pair["tuned_chosen_logp"] - pair["base_chosen_logp"])
            - (pair["tuned_rejected_logp"] - pair["base_rejected_logp"])
        )
        assert pair["margin"] == pytest.approx(expected, abs=1e-9)
        for side in ("base", "tuned"):
            assert pair[f"{side}_correct"] == (
                mean_per_token(pair, side, "chosen") > mean_per_token(pair, side, "rejected")
            )
        assert pair["reward_correct"] == (pair["margin"] > 0)
    assert tuned["accuracy"] == pytest.approx(sum(p["tuned_correct"] for p in pairs) / len(pairs))
    assert base["accuracy"] == pytest.approx(sum(p["base_correct"] for p in pairs) / len(pairs))
    assert tuned["reward_accuracy"] == pytest.approx(sum(p["margin"] > 0 for p in pairs) / len(pairs))
    assert tuned["mean_margin"] == pytest.approx(statistics.fmean(p["margin"] for p in pairs))
    assert tuned["chosen_logp"] == pytest.approx(statistics.fmean(mean_per_token(p, "tuned", "chosen") for p in pairs))
    print(
        f"\npreference accuracy {base['accuracy']:.0%} -> {tuned['accuracy']:.0%}, "
        f"reward accuracy {tuned['reward_accuracy']:.0%}, mean margin {tuned['mean_margin']:.4f}"
    )
    # Twenty steps of DPO move the held-out pairs the trained way (the training log's margins grow too).
    assert tuned["mean_margin"] > 0 and tuned["reward_accuracy"] > 0.5

    # The listed log-likelihoods are those of the models loaded with plain transformers / peft, one row at a time.
    pair = pairs[0]
    row = file_row(pair["row"])
    assert pair["prompt"] == row["prompt"][-1]["content"] and pair["chosen"] == row["chosen"][0]["content"]
    tokenizer = AutoTokenizer.from_pretrained(str(DEMO_MODEL))
    model = AutoModelForCausalLM.from_pretrained(str(DEMO_MODEL)).eval()
    assert plain_logp(model, tokenizer, row["prompt"], row["chosen"]) == pytest.approx(
        pair["base_chosen_logp"], abs=1e-4
    )
    assert plain_logp(model, tokenizer, row["prompt"], row["rejected"]) == pytest.approx(
        pair["base_rejected_logp"], abs=1e-4
    )
    tuned_model = PeftModel.from_pretrained(model, str(dpo_run / "adapter")).eval()
    assert plain_logp(tuned_model, tokenizer, row["prompt"], row["chosen"]) == pytest.approx(
        pair["tuned_chosen_logp"], abs=1e-4
    )
    assert evaluations.summary_text(result) == (
        f"preference {base['accuracy']:.0%} → {tuned['accuracy']:.0%}, margin {tuned['mean_margin']:.3g}"
    )
    assert evaluations.summary_text(result) in cli.stdout


def test_a_file_of_another_method_is_refused(dpo_run: Path, tmp_path: Path):
    rows = [file_row(n) for n in (1, 2)]
    kto = tmp_path / "kto.jsonl"
    kto.write_text(
        "".join(json.dumps({"prompt": r["prompt"], "completion": r["chosen"], "label": True}) + "\n" for r in rows)
    )
    refused = engine_cli("evaluate", str(dpo_run), "--data", str(kto))
    assert refused.returncode == 2
    assert "is kto data; dpo runs are evaluated on preference data" in refused.stderr


def test_a_kto_run_is_evaluated_through_the_job_on_its_unpaired_answers(tmp_path: Path):
    """KTO's held-out rows are single answers: scored by the job, listed under their rows in the file."""
    pairs = [file_row(n) for n in range(1, 25)]
    kto_file = tmp_path / "kto.jsonl"
    kto_rows = [
        {"prompt": r["prompt"], "completion": r[side], "label": side == "chosen"}
        for r in pairs
        for side in ("chosen", "rejected")
    ]
    kto_file.write_text("".join(json.dumps(row) + "\n" for row in kto_rows))
    config = parse_config(
        {
            "name": "kto-eval",
            "method": "kto",
            "data": {"path": str(kto_file), "eval_size": 8},
            "train": {"max_steps": 4, "learning_rate": 3e-3, "per_device_batch_size": 4, "max_length": 64},
        }
    )
    (tmp_path / "config.yaml").write_text(config.to_yaml())
    trained = engine_cli("train", str(tmp_path / "config.yaml"), "--run-dir", str(tmp_path / "runs" / "kto"))
    assert trained.returncode == 0, trained.stdout[-3000:] + trained.stderr[-3000:]

    job_dir = evaluations.start_evaluation(tmp_path / "runs" / "kto", workspace=tmp_path)
    status = jobs.wait(job_dir, timeout=300)
    assert status.state == "completed", status
    result = evaluations.read_evaluation(Path(status.result["path"]))
    assert (result["scoring"], result["method"], result["data"]["format"]) == ("preference", "kto", "kto")
    answers, tuned = result["answers"], result["tuned"]
    assert len(answers) == result["data"]["rows"] == tuned["answers"] == 8 and "pairs" not in result
    for answer in answers:  # each listed answer is the row of the file it names
        row = kto_rows[answer["row"] - 1]
        assert (answer["completion"], answer["label"]) == (row["completion"][0]["content"], row["label"])
        assert answer["reward"] == pytest.approx(0.1 * (answer["tuned_logp"] - answer["base_logp"]))
    desirable = [a for a in answers if a["label"]]
    undesirable = [a["reward"] for a in answers if not a["label"]]
    if desirable and undesirable:  # the held-out split decides how many of each
        median = statistics.median(undesirable)
        assert tuned["reward_accuracy"] == pytest.approx(sum(a["reward"] > median for a in desirable) / len(desirable))
    assert status.result["summary"] == evaluations.summary_text(result)
    assert status.result["summary"].startswith("desirable above median")


def lora_demo_model():
    """The demo model with a LoRA adapter whose weights are random (so the tuned model differs from its base)."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(str(DEMO_MODEL))
    model = get_peft_model(base, LoraConfig(r=4, target_modules="all-linear", init_lora_weights=False))
    return model.eval()


def test_score_pairs_on_kto_rows_ranks_against_the_other_labels_median():
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(DEMO_MODEL))
    pairs = [file_row(n) for n in range(1, 11)]
    rows = [{"prompt": r["prompt"], "completion": r["chosen"], "label": True} for r in pairs]
    rows += [{"prompt": r["prompt"], "completion": r["rejected"], "label": False} for r in pairs]
    scores = score_pairs(lora_demo_model(), tokenizer, None, rows, beta=0.5, batch_size=6)
    answers, tuned = scores["answers"], scores["tuned"]
    assert len(answers) == 20 and scores["dropped"] == 0 and tuned["desirable"] == 10
    assert [a["row"] for a in answers] == list(range(1, 21))
    for answer in answers:
        assert answer["reward"] == pytest.approx(0.5 * (answer["tuned_logp"] - answer["base_logp"]))
        assert answer["base_correct"] is False  # the base's log-ratio to itself is 0 for every answer
    assert any(a["base_logp"] != a["tuned_logp"] for a in answers)
    undesirable_median = statistics.median(a["reward"] for a in answers if not a["label"])
    desirable = [a for a in answers if a["label"]]
    share = sum(a["reward"] > undesirable_median for a in desirable) / len(desirable)
    assert tuned["reward_accuracy"] == pytest.approx(share)
    assert all(a["tuned_correct"] == (a["reward"] > undesirable_median) for a in desirable)
    margin = statistics.fmean(a["reward"] for a in desirable) - statistics.fmean(
        a["reward"] for a in answers if not a["label"]
    )
    assert tuned["mean_margin"] == pytest.approx(margin)
    per_token = statistics.fmean(a["base_logp"] / a["tokens"] for a in desirable)
    assert scores["base"]["desirable_logp"] == pytest.approx(per_token)


def test_score_pairs_batches_alike_and_cuts_at_max_length():
    """Padding does not change a score, and max_length cuts answers as TRL's collator does (keep_start)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(DEMO_MODEL))
    rows = [file_row(n) for n in range(1, 9)]
    model = lora_demo_model()
    one_by_one = score_pairs(model, tokenizer, None, rows, batch_size=1)["pairs"]
    batched = score_pairs(model, tokenizer, None, rows, batch_size=16)["pairs"]
    for single, together in zip(one_by_one, batched, strict=True):
        for key in ("base_chosen_logp", "base_rejected_logp", "tuned_chosen_logp", "tuned_rejected_logp"):
            assert together[key] == pytest.approx(single[key], abs=1e-4)
    prompt = tokenizer.apply_chat_template(rows[0]["prompt"], add_generation_prompt=True, return_dict=True)
    prompt_ids = prompt["input_ids"]
    cut = score_pairs(model, tokenizer, None, rows[:1], max_length=len(prompt_ids) + 1)["pairs"][0]
    assert (cut["chosen_tokens"], cut["rejected_tokens"]) == (1, 1)
    assert score_pairs(model, tokenizer, None, rows[:1], max_length=len(prompt_ids))["dropped"] == 1
    with pytest.raises(ValueError, match="needs its base_model"):
        score_pairs(AutoModelForCausalLM.from_pretrained(str(DEMO_MODEL)), tokenizer, None, rows[:1])
    assert math.isfinite(batched[0]["margin"])
