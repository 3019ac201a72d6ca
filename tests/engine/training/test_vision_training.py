"""Vision-language fine-tuning on the bundled demo VLM (a LLaVA: CLIP vision tower, projector, the demo LLaMA):
the check counts what TRL's collator will train, the vision tower stays frozen unless asked, a text model refuses
images and the VLM refuses text, LLaMA-Factory's mllm_demo.json trains, and a stopped run resumes to the
uninterrupted run's losses."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import torch

from engine import runs
from engine.config import ConfigError, RunConfig, parse_config
from engine.store.paths import PROJECT_ROOT
from engine.training.check import check_run
from engine.training.hardware import Hardware
from engine.training.modality import is_vision_model, model_modality
from engine.training.modeling import load_model, load_tokenizer, make_trainable
from engine.training.vision import LANGUAGE, PROJECTOR, TOWER, vision_parts
from tests.engine.training.test_preference_training import train_cli, train_events
from tests.helpers.images_inside import images_inside, write_image_parquet
from tests.helpers.run_progress import stop_then_resume

pytestmark = pytest.mark.integration

DEMO_VLM = PROJECT_ROOT / "assets" / "demo-vlm"
DEMO_MODEL = PROJECT_ROOT / "assets" / "demo-model"
TRAIN = "assets/datasets/demo_vlm_train.jsonl"
SHARED = (PROJECT_ROOT / "../shared/datasets").resolve()
CPU = Hardware(gpu_count=0, bf16_supported=False)


def vlm_config(**sections: dict[str, Any]) -> RunConfig:
    """A few quick steps of the demo VLM on the shapes task; sections given are merged in."""
    data: dict[str, Any] = {
        "name": "vision",
        "model": {"name_or_path": str(DEMO_VLM)},
        "adapter": {"r": 8, "target_modules": "all-linear", "dropout": 0.0},
        "data": {"path": TRAIN, "max_samples": 32},
        "train": {
            "max_steps": 6,
            "per_device_batch_size": 4,
            "learning_rate": 2e-3,
            "max_length": 64,
            "save_steps": 3,
            "logging_steps": 1,
        },
        "launch": {"threads_per_process": 1},  # resumed losses are compared bit for bit
    }
    for section, values in sections.items():
        data.setdefault(section, {}).update(values)
    return parse_config(data)


def test_the_modality_comes_from_the_config_file():
    assert model_modality(str(DEMO_VLM)) == "vision" and model_modality(str(DEMO_MODEL)) == "text"
    assert model_modality("no-such-org/no-such-model") is None  # offline: not known
    assert is_vision_model(vlm_config())


def test_the_check_counts_the_tokens_trls_collator_trains():
    """The report's token and loss-token counts equal the labels TRL's own collator builds for the same rows."""
    from trl.trainer.sft_trainer import DataCollatorForVisionLanguageModeling

    from engine.data.vision_sets import prepare_vision_datasets

    config = vlm_config(data={"max_samples": 12})
    report = check_run(config).data
    assert report.format == "vision" and report.num_rows == 12 and report.num_images == 12
    processor = load_tokenizer(config)
    train = prepare_vision_datasets(config, processor).train
    collator = DataCollatorForVisionLanguageModeling(processor, max_length=64, assistant_only_loss=True)
    batch = collator([train[index] for index in range(len(train))])
    assert report.num_tokens == int(batch["attention_mask"].sum())
    assert report.num_loss_tokens == int((batch["labels"] != -100).sum())
    answers = [processor.tokenizer.decode(row[row != -100]) for row in batch["labels"]]
    assert all(answer.endswith(processor.tokenizer.eos_token) for answer in answers)  # the answer and its end
    assert not any("<image>" in answer or "What" in answer for answer in answers)  # no prompt, no image tokens


@pytest.mark.parametrize(
    ("adapter", "vision", "trained"),
    [
        ({"method": "lora"}, {}, {LANGUAGE, PROJECTOR}),
        ({"method": "lora"}, {"train_vision_tower": True, "train_projector": False}, {LANGUAGE, TOWER}),
        ({"method": "full"}, {}, {LANGUAGE, PROJECTOR}),
        ({"method": "full"}, {"train_language_model": False}, {PROJECTOR}),
    ],
)
def test_only_the_chosen_parts_train(adapter: dict, vision: dict, trained: set[str]):
    config = vlm_config(adapter=adapter, vision=vision)
    model = make_trainable(load_model(config, CPU), config, CPU)
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    parts = vision_parts(base)
    assert parts.tower == "model.vision_tower" and parts.projector == "model.multi_modal_projector"
    own = lambda name: parts.part_of(name.replace("base_model.model.", ""))  # noqa: E731 - the base's names
    assert {own(name) for name, param in model.named_parameters() if param.requires_grad} == trained
    if adapter["method"] == "lora":  # LoRA on the trained tower and language model; the projector in full
        lora_layers = [name for name, _ in model.named_modules() if name.endswith("lora_A")]
        assert {own(name) for name in lora_layers} == trained - {PROJECTOR}


def test_a_text_model_refuses_images_and_the_vlm_refuses_text():
    with pytest.raises(ConfigError) as caught:
        check_run(vlm_config(model={"name_or_path": str(DEMO_MODEL)}))
    message = caught.value.by_field()["model.name_or_path"]
    assert message.startswith(f"{PROJECT_ROOT / TRAIN} is vision-language data (conversations with images), and ")
    assert f"{DEMO_MODEL} reads text only" in message
    with pytest.raises(ConfigError) as caught:
        check_run(vlm_config(data={"path": "assets/datasets/demo_sft_train.jsonl"}))
    assert caught.value.by_field()["data.path"].startswith(f"{DEMO_VLM} is a vision-language model, and ")


@pytest.mark.skipif(not SHARED.is_dir(), reason="shared datasets not present")
def test_llama_factory_mllm_demo_trains_on_the_demo_vlm(tmp_path: Path):
    config = vlm_config(
        data={"path": str(SHARED / "mllm_demo.json"), "max_samples": None},
        train={"max_steps": 3, "per_device_batch_size": 2, "max_length": 256, "save_steps": 3},
    )
    run_dir, result = train_cli(config, tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    losses = [event["loss"] for event in train_events(run_dir)]
    assert len(losses) == 3 and all(math.isfinite(loss) for loss in losses)
    assert (run_dir / "adapter" / "adapter_model.safetensors").is_file()
    assert (run_dir / "adapter" / "processor_config.json").is_file()  # the processor travels with the result


def test_a_dataset_holding_its_images_trains_as_its_files_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The bundled set as a hub dataset stores it (Parquet, each image's bytes inside) trains to the losses of the
    JSON lines that name the same images by path: the worker reads the images the check wrote out."""
    monkeypatch.setenv("STUDIO_IMAGE_CACHE", str(tmp_path / "image-cache"))
    rows = [json.loads(line) for line in (PROJECT_ROOT / TRAIN).read_text(encoding="utf-8").splitlines()[:16]]
    parquet = write_image_parquet(images_inside(rows, (PROJECT_ROOT / TRAIN).parent), tmp_path / "train.parquet")
    short = {"max_steps": 2, "save_steps": 2}
    losses = []
    for name, path in (("paths", TRAIN), ("held", str(parquet))):
        run_dir, result = train_cli(vlm_config(data={"path": path, "max_samples": 16}, train=short), tmp_path / name)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        losses.append([event["loss"] for event in train_events(run_dir)])
    assert len(losses[0]) == 2 and all(math.isfinite(loss) for loss in losses[0])
    assert losses[1] == losses[0]


def test_stop_and_resume_reproduce_the_uninterrupted_losses(tmp_path: Path):
    reference, result = train_cli(vlm_config(), tmp_path / "reference")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    expected = {event["step"]: event["loss"] for event in train_events(reference)}
    assert sorted(expected) == [1, 2, 3, 4, 5, 6] and expected[6] < expected[1]
    run_dir = runs.create_run(vlm_config(), run_dir=tmp_path / "run")
    stop_then_resume(run_dir, 6)
    assert {event["step"]: event["loss"] for event in train_events(run_dir)} == expected  # step by step
    assert torch.equal(*(_adapter(folder) for folder in (reference, run_dir)))


def _adapter(run_dir: Path) -> torch.Tensor:
    from safetensors.torch import load_file

    weights = load_file(str(run_dir / "adapter" / "adapter_model.safetensors"))
    return torch.cat([weights[name].flatten() for name in sorted(weights)])


def test_the_vision_section_binds_a_vision_run_only():
    """LoRA with nothing LoRA can adapt is refused at its field for the VLM; a text model's run ignores the section."""
    frozen = {"train_language_model": False, "train_vision_tower": False}
    with pytest.raises(ConfigError) as caught:
        check_run(vlm_config(vision=frozen))
    assert caught.value.by_field()["vision.train_language_model"].startswith("LoRA needs the language model")
    text_run = parse_config({"model": {"name_or_path": str(DEMO_MODEL)}, "vision": frozen})
    assert check_run(text_run).data.format == "conversational"
