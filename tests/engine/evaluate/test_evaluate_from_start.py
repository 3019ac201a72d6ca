"""Evaluate a run that started from another run (SFT, then DPO from it; SFT, then a full fine-tune from it): the tuned
model is compared with the weights it started from, not the raw base (which would credit the second run with what
the first learnt), and the raw base is scored beside them. Every run trained for real on the demo model, every
evaluation through ``python -m engine evaluate``, and the listed numbers checked against the models loaded with
plain transformers / peft."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engine.config import parse_config
from engine.evaluate import evaluations
from engine.store.paths import PROJECT_ROOT
from tests.engine.evaluate.test_preference_evaluation import engine_cli, plain_logp
from tests.helpers.engine_cli import run_train

pytestmark = pytest.mark.integration

DEMO_MODEL = PROJECT_ROOT / "assets" / "demo-model"
DEMO_SFT = PROJECT_ROOT / "assets" / "datasets" / "demo_sft_train.jsonl"
DEMO_PREFERENCE = PROJECT_ROOT / "assets" / "datasets" / "demo_preference.jsonl"
ADAPTER = {"r": 8, "alpha": 16, "dropout": 0.0}
EVAL_ROWS = 8


def trained(root: Path, name: str, config: dict[str, Any]) -> Path:
    """``python -m engine train`` of ``config`` into ``root/runs/name``."""
    path = root / f"{name}.yaml"
    path.write_text(parse_config({"name": name, **config}).to_yaml())
    result = run_train(path, root / "runs" / name)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return root / "runs" / name


def evaluated(run_dir: Path) -> tuple[dict[str, Any], str]:
    cli = engine_cli("evaluate", str(run_dir), "--max-rows", str(EVAL_ROWS))
    assert cli.returncode == 0, cli.stdout[-3000:] + cli.stderr[-3000:]
    return evaluations.latest_evaluation(run_dir), cli.stdout


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("from-start")


@pytest.fixture(scope="module")
def sft_run(root: Path) -> Path:
    """The demo task learnt a little (LoRA), with a few rows held out."""
    data = {"path": str(DEMO_SFT), "max_samples": 200, "eval_size": EVAL_ROWS}
    train = {"max_steps": 30, "per_device_batch_size": 8, "learning_rate": 3e-3, "max_length": 64}
    return trained(root, "sft", {"data": data, "adapter": ADAPTER, "train": train})


def file_row(path: Path, number: int) -> dict[str, Any]:
    return json.loads(path.read_text().splitlines()[number - 1])


def test_a_dpo_run_from_an_sft_run_is_compared_with_it_and_the_base_shows_beside(root: Path, sft_run: Path):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    data = {"path": str(DEMO_PREFERENCE), "max_samples": 40, "eval_size": EVAL_ROWS}
    train = {"max_steps": 6, "per_device_batch_size": 4, "learning_rate": 3e-3, "max_length": 64}
    config = {"method": "dpo", "model": {"init_from": str(sft_run)}, "data": data, "adapter": ADAPTER, "train": train}
    dpo_run = trained(root, "dpo", config)
    result, output = evaluated(dpo_run)
    assert (result["scoring"], result["baseline"]) == ("preference", "sft") and "baseline_note" not in result
    pairs, start, raw, tuned = result["pairs"], result["base"], result["raw_base"], result["tuned"]
    assert len(pairs) == EVAL_ROWS == raw["pairs"] == start["pairs"] == tuned["pairs"]
    for pair in pairs:  # the margin is against the start (DPO's reference), the raw base only listed beside
        expected = 0.1 * (
            (pair["tuned_chosen_logp"] - pair["base_chosen_logp"])
            - (pair["tuned_rejected_logp"] - pair["base_rejected_logp"])
        )
        assert pair["margin"] == pytest.approx(expected, abs=1e-9)
        per_token = {
            answer: pair[f"raw_base_{answer}_logp"] / pair[f"{answer}_tokens"] for answer in ("chosen", "rejected")
        }
        assert pair["raw_base_correct"] == (per_token["chosen"] > per_token["rejected"])
    assert raw["accuracy"] == pytest.approx(sum(p["raw_base_correct"] for p in pairs) / len(pairs))
    assert start["accuracy"] == pytest.approx(sum(p["base_correct"] for p in pairs) / len(pairs))
    assert evaluations.summary_text(result) in output

    # The three arms are the raw base, the SFT adapter and the DPO adapter, each loaded with plain peft.
    pair = pairs[0]
    row = file_row(DEMO_PREFERENCE, pair["row"])
    tokenizer = AutoTokenizer.from_pretrained(str(DEMO_MODEL))
    model = AutoModelForCausalLM.from_pretrained(str(DEMO_MODEL)).eval()
    chosen = plain_logp(model, tokenizer, row["prompt"], row["chosen"])
    assert chosen == pytest.approx(pair["raw_base_chosen_logp"], abs=1e-4)
    started = PeftModel.from_pretrained(model, str(sft_run / "adapter")).eval()
    assert plain_logp(started, tokenizer, row["prompt"], row["chosen"]) == pytest.approx(
        pair["base_chosen_logp"], abs=1e-4
    )
    started.load_adapter(str(dpo_run / "adapter"), adapter_name="dpo")
    started.set_adapter("dpo")
    assert plain_logp(started, tokenizer, row["prompt"], row["chosen"]) == pytest.approx(
        pair["tuned_chosen_logp"], abs=1e-4
    )
    # The SFT start moved the answers: crediting DPO with the base → tuned change would have been wrong.
    assert pair["raw_base_chosen_logp"] != pytest.approx(pair["base_chosen_logp"], abs=1e-3)


def test_a_full_run_from_an_sft_adapter_is_compared_with_the_merged_start(root: Path, sft_run: Path):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    data = {"path": str(DEMO_SFT), "max_samples": 64, "eval_size": EVAL_ROWS}
    train = {"max_steps": 4, "per_device_batch_size": 8, "learning_rate": 1e-4, "max_length": 64}
    config = {"model": {"init_from": str(sft_run)}, "data": data, "adapter": {"method": "full"}, "train": train}
    full_run = trained(root, "full", config)
    result, _ = evaluated(full_run)
    assert (result["scoring"], result["baseline"]) == ("answers", "sft")
    raw, start, tuned = result["raw_base"], result["base"], result["tuned"]
    predictions = result["predictions"]
    assert (
        len(predictions) == EVAL_ROWS
        and raw["scored_rows"] == start["scored_rows"] == tuned["scored_rows"] == EVAL_ROWS
    )
    assert raw["exact_match"] == pytest.approx(sum(p["raw_base_correct"] for p in predictions) / len(predictions))
    assert start["exact_match"] == pytest.approx(sum(p["base_correct"] for p in predictions) / len(predictions))
    # The start learnt the task a little: its loss is below the raw base's, which is what the second run began at.
    assert start["eval_loss"] < raw["eval_loss"]

    # The raw arm is the plain base, the start arm the SFT adapter merged into it (greedy answers, one at a time).
    tokenizer = AutoTokenizer.from_pretrained(str(DEMO_MODEL))
    model = AutoModelForCausalLM.from_pretrained(str(DEMO_MODEL)).eval()
    prompt = [{"role": "user", "content": predictions[0]["prompt"]}]
    assert greedy(model, tokenizer, prompt, result["max_new_tokens"]) == predictions[0]["raw_base"]
    merged = PeftModel.from_pretrained(model, str(sft_run / "adapter")).merge_and_unload().eval()
    assert greedy(merged, tokenizer, prompt, result["max_new_tokens"]) == predictions[0]["base"]


def greedy(model: Any, tokenizer: Any, prompt: list[dict], tokens: int) -> str:
    """One prompt answered greedily, alone (no padding), stripped as the evaluation strips its predictions."""
    import torch

    encoded = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, return_tensors="pt", return_dict=True)
    with torch.inference_mode():
        output = model.generate(**encoded, max_new_tokens=tokens, do_sample=False)
    return tokenizer.decode(output[0, encoded["input_ids"].shape[1] :], skip_special_tokens=True).strip()
