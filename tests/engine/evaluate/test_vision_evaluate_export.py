"""Evaluate and Export of a vision-language run (the demo VLM on the shapes task): Evaluate's loss on the held-out
rows with images is the trainer's own eval_loss, and the merged export, loaded with plain transformers
(AutoModelForImageTextToText + AutoProcessor), answers every held-out image as the run's adapter did in
Evaluate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml

from engine.evaluate.worker import evaluate
from engine.export.exports import plan_export
from engine.export.worker import export
from engine.runs.jobs import Progress
from engine.store.paths import PROJECT_ROOT
from engine.store.rundir import iter_metrics
from tests.helpers.engine_cli import run_train

pytestmark = pytest.mark.integration

EVAL_ROWS = 24


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 40-step LoRA run of the demo VLM, evaluated once at the end on 24 held-out rows in one batch."""
    root = tmp_path_factory.mktemp("vision-run")
    eval_file = root / "eval.jsonl"
    source = PROJECT_ROOT / "assets" / "datasets" / "demo_vlm_eval.jsonl"
    rows = [json.loads(line) for line in source.read_text().splitlines()[:EVAL_ROWS]]
    for row in rows:  # the file moves: its image paths become absolute
        row["images"] = [str(source.parent / path) for path in row["images"]]
    eval_file.write_text("".join(json.dumps(row) + "\n" for row in rows))
    config = {
        "model": {"name_or_path": "assets/demo-vlm"},
        "adapter": {"r": 16, "alpha": 32, "dropout": 0.0, "target_modules": "all-linear"},
        "data": {"path": "assets/datasets/demo_vlm_train.jsonl", "eval_path": str(eval_file)},
        "train": {
            "max_steps": 40,
            "per_device_batch_size": 8,
            "learning_rate": 0.002,
            "max_length": 64,
            "logging_steps": 10,
            "save_steps": 40,
            "eval_strategy": "steps",
            "eval_steps": 40,
            "eval_batch_size": EVAL_ROWS,
        },
    }
    (root / "config.yaml").write_text(yaml.safe_dump(config))
    result = run_train(root / "config.yaml", root / "runs" / "vision")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return root / "runs" / "vision"


@pytest.fixture(scope="module")
def evaluation(run_dir: Path) -> dict:
    return evaluate(run_dir, "eval")


def test_evaluate_scores_the_images_rows_with_the_trainers_loss(run_dir: Path, evaluation: dict):
    trainer_loss = [event["eval_loss"] for event in iter_metrics(run_dir) if "eval_loss" in event][-1]
    assert evaluation["data"]["format"] == "vision" and evaluation["data"]["rows"] == EVAL_ROWS
    assert evaluation["tuned"]["eval_loss"] == pytest.approx(trainer_loss, rel=1e-4)
    assert evaluation["tuned"]["eval_loss"] < evaluation["base"]["eval_loss"]
    predictions = evaluation["predictions"]
    assert len(predictions) == EVAL_ROWS and all(row["prompt"].startswith("<image>") for row in predictions)
    correct = sum(row["tuned_correct"] for row in predictions) / EVAL_ROWS
    assert evaluation["tuned"]["exact_match"] == pytest.approx(correct)


def test_the_merged_export_answers_each_image_as_the_run_did(run_dir: Path, evaluation: dict, tmp_path: Path):
    from transformers import AutoModelForImageTextToText, AutoProcessor

    from engine.config import load_config
    from engine.data import load_rows
    from engine.data.vision_sets import with_images
    from engine.training.modality import model_modality

    result = export(plan_export(run_dir, kind="merged", workspace=tmp_path), Progress(None))
    folder = Path(result["path"])
    assert model_modality(str(folder)) == "vision"
    model = AutoModelForImageTextToText.from_pretrained(str(folder)).eval()
    processor = AutoProcessor.from_pretrained(str(folder))
    rows = load_rows(load_config(run_dir / "config.yaml").data, str(run_dir.parents[1] / "eval.jsonl")).rows
    answers = []
    for row in rows:
        prompt = with_images(row["messages"][:-1], row["images"], 1_003_520)
        inputs = processor.apply_chat_template(
            [prompt], add_generation_prompt=True, tokenize=True, return_dict=True, return_tensors="pt"
        )
        with torch.inference_mode():
            output = model.generate(**inputs, max_new_tokens=8, do_sample=False)
        new = output[0, inputs["input_ids"].shape[1] :]
        answers.append(processor.tokenizer.decode(new, skip_special_tokens=True).strip())
    assert answers == [row["tuned"] for row in evaluation["predictions"]]
    assert len(set(answers)) > 1  # the answers depend on the image


def test_gguf_and_lm_eval_benchmarks_refuse_a_vision_run_by_name(run_dir: Path):
    from engine.evaluate.benchmarks.results import BenchmarkRequest, check_request
    from engine.evaluate.benchmarks.tasks import BenchmarkError
    from engine.export.exports import ExportError

    with pytest.raises(
        ExportError, match="GGUF export does not support the architecture LlavaForConditionalGeneration"
    ):
        plan_export(run_dir, kind="gguf")
    with pytest.raises(BenchmarkError, match="is a vision-language run, and benchmarks .* score text models"):
        check_request(run_dir, BenchmarkRequest())
