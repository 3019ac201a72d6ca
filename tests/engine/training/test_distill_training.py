"""On-policy distillation trains for real: a tuned run of the demo model teaches a fresh adapter on the same base
(TRL's DistillationTrainer through ``python -m engine train``), the teacher is that run's adapter merged into its
base, and the check before launch refuses a teacher that cannot teach, at its field."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch

from engine import runs
from engine.config import ConfigError, RunConfig, load_config, parse_config, save_config
from engine.evaluate import evaluations
from engine.evaluate.scoring import generate_completions
from engine.store.completions import latest_completions
from engine.store.paths import PROJECT_ROOT
from engine.store.rundir import iter_metrics
from engine.training.check import check_run
from engine.training.hardware import CPU_ONLY
from engine.training.methods import METHODS
from engine.training.methods.distill.trainer import load_teacher
from tests.engine.evaluate.test_preference_evaluation import engine_cli
from tests.engine.training.test_grpo_training import trained

pytestmark = pytest.mark.integration
DEMO_SFT = PROJECT_ROOT / "assets" / "datasets" / "demo_sft_train.jsonl"
DEMO_MODEL = PROJECT_ROOT / "assets" / "demo-model"
DEMO_VLM = PROJECT_ROOT / "assets" / "demo-vlm"
# Repeatable bit for bit whatever the machine's load, so the divergence figures compared below are the same each run.
ONE_THREAD = {"threads_per_process": 1}


def teacher_config() -> RunConfig:
    """The teacher: SFT on the demo date task, long enough to answer in the task's form (its answers then differ
    from the untrained base's, which the student starts as)."""
    return parse_config(
        {
            "name": "teacher",
            "data": {"path": str(DEMO_SFT)},
            "adapter": {"r": 8, "dropout": 0.0},
            "train": {"max_steps": 40, "per_device_batch_size": 8, "learning_rate": 5e-3, "max_length": 128},
            "launch": ONE_THREAD,
        }
    )


def distill_config(teacher: Path | str, **train: Any) -> RunConfig:
    """Distillation of ``teacher`` into a fresh adapter on the demo model, with the divergence on 8 held-out prompts
    measured before training and at the end."""
    return parse_config(
        {
            "name": "student",
            "method": "distill",
            "data": {"path": str(DEMO_SFT), "max_samples": 64, "eval_size": 8},
            "adapter": {"r": 8, "dropout": 0.0},
            "train": {
                "max_steps": 16,
                "per_device_batch_size": 4,
                "learning_rate": 3e-3,
                "max_length": 128,
                "logging_steps": 1,
                "eval_strategy": "steps",
                "eval_steps": 16,
                "eval_on_start": True,
                **train,
            },
            "distill": {"teacher": str(teacher), "max_completion_length": 16},
            "launch": ONE_THREAD,
        }
    )


@pytest.fixture(scope="module")
def teacher_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return trained(teacher_config(), tmp_path_factory.mktemp("teacher"))


@pytest.fixture(scope="module")
def student_run(teacher_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return trained(distill_config(teacher_run), tmp_path_factory.mktemp("student"))


def test_a_tuned_run_teaches_a_fresh_adapter_and_the_divergence_falls(student_run: Path):
    run_dir = student_run
    assert runs.status(run_dir).state == "completed"
    events = list(iter_metrics(run_dir))
    train = [event for event in events if event["event"] == "train"]
    assert [event["step"] for event in train] == list(range(1, 17))
    for chart in METHODS["distill"].charts:  # every chart the Monitor offers for distill gets finite points
        assert all(math.isfinite(event[chart.key]) for event in train), chart.key
    assert all(math.isfinite(event["loss"]) and event["loss"] >= 0 for event in train)
    divergence = [event["eval_loss"] for event in events if "eval_loss" in event]
    print("divergence on held-out prompts, before and after:", divergence)
    assert len(divergence) == 2 and divergence[1] < 0.8 * divergence[0], divergence
    assert (run_dir / "adapter" / "adapter_model.safetensors").is_file()
    samples = latest_completions(run_dir)
    prompts = {row["messages"][0]["content"] for row in map(json.loads, DEMO_SFT.read_text().splitlines())}
    assert samples and all(sample["prompt"] in prompts for sample in samples), samples[:2]
    assert all(sample["rewards"] == {} and sample["reward"] is None for sample in samples)


def test_evaluate_scores_both_models_against_the_teachers_own_answers(teacher_run: Path, student_run: Path):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    cli = engine_cli("evaluate", str(student_run))
    assert cli.returncode == 0, cli.stdout[-3000:] + cli.stderr[-3000:]
    result = evaluations.latest_evaluation(student_run)
    assert (result["scoring"], result["references"]) == ("answers", "teacher")
    assert result["data"]["choice"] == "eval" and result["data"]["rows"] == 8
    # The references are the teacher's greedy answers, as plain transformers and peft give them.
    plain = PeftModel.from_pretrained(
        AutoModelForCausalLM.from_pretrained(DEMO_MODEL, dtype=torch.float32), teacher_run / "adapter"
    )
    prompts = [[{"role": "user", "content": row["prompt"]}] for row in result["predictions"]]
    answers = generate_completions(plain, AutoTokenizer.from_pretrained(DEMO_MODEL), prompts, max_new_tokens=16)
    assert [row["reference"] for row in result["predictions"]] == [answer.text.strip() for answer in answers]
    print("loss on the teacher's answers, base and tuned:", result["base"]["eval_loss"], result["tuned"]["eval_loss"])
    assert result["tuned"]["eval_loss"] < result["base"]["eval_loss"]
    assert result["tuned"]["exact_match"] >= result["base"]["exact_match"]


def test_evaluate_says_so_when_the_teacher_is_gone(student_run: Path, tmp_path: Path):
    moved, gone = tmp_path / "student", tmp_path / "deleted-teacher"
    shutil.copytree(student_run, moved)
    config = load_config(moved / "config.yaml")
    save_config(
        config.model_copy(update={"distill": config.distill.model_copy(update={"teacher": str(gone)})}),
        moved / "config.yaml",
    )
    cli = engine_cli("evaluate", str(moved))
    assert cli.returncode == 2, cli.stdout[-3000:] + cli.stderr[-3000:]
    assert cli.stderr.splitlines()[-1] == (
        f"error: distill.teacher: no model directory or run at '{gone}', and it is no hub id (org/name)"
    )


def test_the_teacher_is_the_runs_adapter_merged_into_its_base(teacher_run: Path):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    ids = torch.tensor([[1, 20, 30, 40, 50, 60]])
    with torch.no_grad():
        expected = PeftModel.from_pretrained(
            AutoModelForCausalLM.from_pretrained(DEMO_MODEL, dtype=torch.float32), teacher_run / "adapter"
        )(ids).logits
        base = AutoModelForCausalLM.from_pretrained(DEMO_MODEL, dtype=torch.float32)(ids).logits
        teacher = load_teacher(distill_config(teacher_run), CPU_ONLY)
        assert not any(parameter.requires_grad for parameter in teacher.parameters())
        assert not teacher.training
        got = teacher(ids).logits
    assert torch.allclose(got, expected, atol=1e-4)
    assert not torch.allclose(got, base, atol=1e-2)  # the adapter changed the teacher: not the bare base


def test_the_memory_estimate_holds_the_teachers_weights_beside_the_models(teacher_run: Path):
    report = check_run(distill_config(teacher_run))
    teacher = load_teacher(distill_config(teacher_run), CPU_ONLY)
    loaded = sum(parameter.numel() * parameter.element_size() for parameter in teacher.parameters())
    assert report.memory is not None and report.memory.frozen == pytest.approx(loaded, rel=0.01)
    assert "frozen" in report.memory.summary()
    said = f"teacher: teacher's adapter ({teacher_run / 'adapter'}), merged into its base {DEMO_MODEL}"
    assert said in report.lines()
    alone = check_run(distill_config(teacher_run).model_copy(update={"method": "sft"})).memory  # no teacher
    assert alone is not None and alone.frozen == 0
    assert report.memory.total - alone.total == pytest.approx(loaded, rel=0.05)


def test_a_checkpoint_of_a_run_teaches_as_its_weights_then_were(teacher_run: Path, tmp_path: Path):
    with pytest.raises(ConfigError) as refused:
        check_run(distill_config(f"{teacher_run}/checkpoints/checkpoint-7"))
    assert refused.value.by_field()["distill.teacher"].startswith("teacher has no checkpoint 7 (checkpoints: ")


@pytest.mark.parametrize(
    ("teacher", "said"),
    [
        (DEMO_VLM, "the teacher's tokenizer is not the model's: 1,296 tokens against 1,295, 1 of them (token and id)"),
        ("/nowhere/teacher", "no model directory or run at '/nowhere/teacher', and it is no hub id (org/name)"),
        (DEMO_MODEL, "the teacher is the model that trains, which has nothing to learn from itself"),
    ],
)
def test_the_check_refuses_a_teacher_that_cannot_teach_at_its_field(teacher: Path | str, said: str):
    with pytest.raises(ConfigError) as refused:
        check_run(distill_config(teacher))
    assert refused.value.by_field()["distill.teacher"].startswith(said), refused.value
