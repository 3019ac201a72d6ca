"""Reward modeling trains for real: TRL's RewardTrainer on the demo model and the bundled preference pairs, from the
shipped preset (fewer steps) through ``python -m engine train``; Evaluate ranks the held-out pairs by the untrained
and the trained head, a merged export loads with AutoModelForSequenceClassification and scores as Evaluate did,
and Chat refuses a model that writes no answer."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import yaml

from engine.chat.client import ChatError, ModelSpec, resolve_model
from engine.config import ConfigError, parse_config
from engine.store.paths import PROJECT_ROOT
from engine.store.rundir import iter_metrics
from tests.engine.evaluate.test_preference_evaluation import engine_cli
from tests.engine.training.test_vision_families_training import train_in_process
from tests.helpers.engine_cli import run_train

pytestmark = pytest.mark.integration
PRESET = PROJECT_ROOT / "assets" / "presets" / "demo-rm.yaml"
EVAL = PROJECT_ROOT / "assets" / "datasets" / "demo_dpo_eval.jsonl"
STEPS, EVAL_ROWS = 12, len(EVAL.read_text().splitlines())


def preset(**train: Any) -> dict[str, Any]:
    """The shipped preset, shorter: STEPS steps, one thread."""
    data = yaml.safe_load(PRESET.read_text())
    data["train"] |= {"max_steps": STEPS, "eval_steps": STEPS, "save_steps": STEPS, "logging_steps": 2, **train}
    data["launch"] = {"threads_per_process": 1}
    return data


@pytest.fixture(scope="module")
def rm_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("rm")
    (root / "config.yaml").write_text(parse_config(preset()).to_yaml())
    result = run_train(root / "config.yaml", root / "run")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return root / "run"


def test_the_score_head_learns_to_rank_the_pairs(rm_run: Path) -> None:
    train = [row for row in iter_metrics(rm_run) if "loss" in row]
    assert [row["step"] for row in train] == list(range(2, STEPS + 1, 2))
    assert all(math.isfinite(row["loss"]) for row in train)
    assert train[-1]["loss"] < train[0]["loss"] / 2
    # RewardTrainer's own metrics, which the method's charts draw
    assert all(0 <= row["accuracy"] <= 1 and math.isfinite(row["margin"]) for row in train)
    assert train[-1]["accuracy"] == 1.0 and train[-1]["margin"] > train[0]["margin"]
    adapter = json.loads((rm_run / "adapter" / "adapter_config.json").read_text())
    assert adapter["task_type"] == "SEQ_CLS"


def test_evaluate_ranks_the_pairs_by_the_untrained_and_the_trained_head(rm_run: Path) -> None:
    cli = engine_cli("evaluate", str(rm_run))
    assert cli.returncode == 0, cli.stdout[-2000:] + cli.stderr[-2000:]
    result = json.loads(next((rm_run / "evaluations").glob("*.json")).read_text())
    assert (result["scoring"], result["method"], result["score"]) == ("preference", "rm", "reward")
    pairs = result["pairs"]
    assert len(pairs) == result["data"]["rows"] == EVAL_ROWS
    for side in ("base", "tuned"):
        right = [pair[f"{side}_chosen_reward"] > pair[f"{side}_rejected_reward"] for pair in pairs]
        assert result[side]["accuracy"] == sum(right) / len(right)
        assert [pair[f"{side}_correct"] for pair in pairs] == right
    assert result["tuned"]["accuracy"] == 1.0 and result["tuned"]["accuracy"] > result["base"]["accuracy"]
    margins = [pair["tuned_chosen_reward"] - pair["tuned_rejected_reward"] for pair in pairs]
    assert result["tuned"]["mean_margin"] == pytest.approx(sum(margins) / len(margins))
    assert f"preference {result['base']['accuracy']:.0%} → 100%" in cli.stdout


def test_a_merged_export_loads_as_a_sequence_classifier_and_scores_as_evaluate_did(rm_run: Path, tmp_path: Path):
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    cli = engine_cli("export", str(rm_run), "--kind", "merged", "--workspace", str(tmp_path))
    assert cli.returncode == 0, cli.stdout[-2000:] + cli.stderr[-2000:]
    folder = next(path for path in (tmp_path / "exports").iterdir() if path.is_dir())
    model = AutoModelForSequenceClassification.from_pretrained(str(folder)).eval()
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    assert model.config.num_labels == 1 and model.config.pad_token_id == tokenizer.pad_token_id
    evaluated = json.loads(next((rm_run / "evaluations").glob("*.json")).read_text())["pairs"][0]
    row = json.loads(EVAL.read_text().splitlines()[0])
    scores = []
    for side in ("chosen", "rejected"):
        text = tokenizer.apply_chat_template(row["prompt"] + row[side], tokenize=False)
        with torch.no_grad():
            scores.append(model(**tokenizer(text, return_tensors="pt", add_special_tokens=False)).logits.item())
    assert scores == pytest.approx([evaluated["tuned_chosen_reward"], evaluated["tuned_rejected_reward"]], abs=1e-3)
    assert "AutoModelForSequenceClassification.from_pretrained" in (folder / "README.md").read_text()


def test_chat_refuses_a_reward_model(rm_run: Path) -> None:
    with pytest.raises(ChatError, match="scores answers and does not write any"):
        resolve_model(ModelSpec(run_dir=rm_run))


def test_reward_modeling_trains_on_pairs_only() -> None:
    with pytest.raises(ConfigError, match=r"train.packing: rm trains on whole pairs; packing is for sft only"):
        parse_config({**preset(), "train": {"packing": True}})


def test_a_quantized_reward_model_trains_its_head_on_a_cpu(tmp_path: Path) -> None:
    """TRL casts a quantized model's trainable parameters to bf16; the score head (trained in full beside the
    adapter) then met the CPU's float32 hidden states at the first step, until it was kept in float32 (8-bit failed
    alike)."""
    data = preset(max_steps=2, eval_strategy="no", save_strategy="no", logging_steps=1)
    data["quantization"] = {"mode": "4bit"}
    run_dir, status = train_in_process(parse_config(data), tmp_path)
    assert status.state == "completed", status.error
    losses = [event["loss"] for event in iter_metrics(run_dir) if event.get("event") == "train"]
    assert len(losses) == 2 and all(map(math.isfinite, losses)), losses
    assert (run_dir / "adapter" / "adapter_model.safetensors").is_file()
