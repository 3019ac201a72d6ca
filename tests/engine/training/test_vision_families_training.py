"""The vision-language families of test_vision_families.py trained: a few LoRA steps saving the adapter, the trained
projector and the processor; Evaluate and the merged export of the result; QLoRA with the image side kept in full
precision (LLaVA, the demo VLM, too) and a few steps of it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from engine import runs
from engine.config import RunConfig
from engine.training.modality import model_modality
from engine.training.modeling import load_model, make_trainable
from engine.training.vision import LANGUAGE, PROJECTOR, TOWER, VisionParts, vision_parts
from tests.engine.training.test_preference_training import train_events
from tests.helpers.tiny_vlms import FAMILIES
from tests.helpers.vision_families import CPU, NAMES, QUESTION, assert_lora_trains, family_config

pytestmark = pytest.mark.integration


def train_in_process(config: RunConfig, root: Path) -> tuple[Path, Any]:
    """Train the run in this process (engine.training.recipe.run, as the worker does; no signal handlers
    installed), returning its run directory and final status."""
    from engine.training.recipe import run
    from engine.training.stopping import StopRequest

    run_dir = runs.create_run(config, run_dir=root / "run")
    run(run_dir, stop=StopRequest())
    return run_dir, runs.status(run_dir)


def saved_projector_changed(run_dir: Path, base: Path, projector: str) -> bool:
    """Whether the adapter's saved projector (modules_to_save) differs from the base model's: it was trained."""
    from safetensors.torch import load_file
    from transformers import AutoModelForImageTextToText

    saved = load_file(str(run_dir / "adapter" / "adapter_model.safetensors"))
    prefix = f"base_model.model.{projector}."
    weights = {name.removeprefix(prefix): value for name, value in saved.items() if name.startswith(prefix)}
    original = AutoModelForImageTextToText.from_pretrained(base).get_submodule(projector).state_dict()
    assert weights and set(weights) == set(original)
    return any(not torch.equal(value.to(original[name].dtype), original[name]) for name, value in weights.items())


@pytest.fixture(scope="module")
def trained_run(
    model_dir: Callable[[str], Path], data_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Callable[[str], Path]:
    """The run directory of two LoRA steps of family ``name`` on the colours (trained once in the module)."""
    done: dict[str, Path] = {}

    def trained(name: str) -> Path:
        if name not in done:
            root = tmp_path_factory.mktemp(f"run-{name}")
            run_dir, status = train_in_process(family_config(model_dir(name), data_dir / "train.jsonl"), root)
            assert (status.state, status.step) == ("completed", 2), status.error
            done[name] = run_dir
        return done[name]

    return trained


@pytest.mark.parametrize("name", NAMES)
def test_a_few_steps_train_and_save_the_adapter_with_the_processor(
    name: str, model_dir: Callable[[str], Path], trained_run: Callable[[str], Path], data_dir: Path
):
    from transformers.models.auto.processing_auto import processor_class_from_name

    from engine.data.vision_sets import with_images
    from engine.training.vision import load_processor

    family = FAMILIES[name]
    run_dir = trained_run(name)
    losses = [event["loss"] for event in train_events(run_dir)]
    assert len(losses) == 2 and all(math.isfinite(loss) and loss > 0 for loss in losses)
    adapter = run_dir / "adapter"
    config = json.loads((adapter / "adapter_config.json").read_text())
    assert config["modules_to_save"] == [family.projector] and set(config["target_modules"]) == {"q_proj", "v_proj"}
    assert saved_projector_changed(run_dir, model_dir(name), family.projector)
    # The processor travels with the result as the family's own, its template the family's original; it loads back
    # (Qwen's without torchvision too, its video processor's settings kept for an install that has it) and renders a
    # row as the base's processor does.
    settings = json.loads((adapter / "processor_config.json").read_text())
    assert settings["processor_class"] == family.processor_class
    with_video = "video_processor" in processor_class_from_name(family.processor_class).get_attributes()
    assert ("video_processor" in settings) == with_video
    assert (adapter / "chat_template.jinja").read_text() == (model_dir(name) / "chat_template.jinja").read_text()
    reloaded, base = (load_processor(str(folder), None, False) for folder in (adapter, model_dir(name)))
    assert type(reloaded).__name__ == family.processor_class
    prompt = with_images([{"role": "user", "content": f"<image>{QUESTION}"}], [str(data_dir / "red.png")], 10**6)
    rendered = [
        processor.apply_chat_template([prompt], add_generation_prompt=True, tokenize=True, return_dict=True)
        for processor in (reloaded, base)
    ]
    assert rendered[0]["input_ids"] == rendered[1]["input_ids"]


@pytest.mark.parametrize("name", NAMES)
def test_evaluate_and_the_merged_export_read_the_trained_family(
    name: str, model_dir: Callable[[str], Path], trained_run: Callable[[str], Path], tmp_path: Path
):
    """Evaluate scores the run's rows with base and tuned model (the tuned loss differs: LoRA and the projector
    moved), and the merged export holds the family's model, with the trained projector and LoRA merged in, and its
    processor."""
    from safetensors.torch import load_file
    from transformers import AutoModelForImageTextToText

    from engine.evaluate.worker import evaluate
    from engine.export.exports import plan_export
    from engine.export.worker import export
    from engine.runs.jobs import Progress
    from engine.training.vision import load_processor

    family = FAMILIES[name]
    run_dir = trained_run(name)
    evaluation = evaluate(run_dir, "train", max_new_tokens=4)
    assert evaluation["data"]["format"] == "vision" and evaluation["data"]["rows"] == 4
    base_loss, tuned_loss = (evaluation[arm]["eval_loss"] for arm in ("base", "tuned"))
    assert math.isfinite(tuned_loss) and tuned_loss != base_loss
    assert [row["prompt"].startswith("<image>") for row in evaluation["predictions"]] == [True] * 4

    folder = Path(export(plan_export(run_dir, kind="merged", workspace=tmp_path), Progress(None))["path"])
    assert model_modality(str(folder)) == "vision"
    assert type(load_processor(str(folder), None, False)).__name__ == family.processor_class
    merged = AutoModelForImageTextToText.from_pretrained(str(folder))
    original = AutoModelForImageTextToText.from_pretrained(str(model_dir(name)))
    assert type(merged).__name__ == family.model_class
    saved = load_file(str(run_dir / "adapter" / "adapter_model.safetensors"))
    prefix = f"base_model.model.{family.projector}."
    projector = merged.get_submodule(family.projector).state_dict()
    assert all(
        torch.equal(projector[key.removeprefix(prefix)], value)
        for key, value in saved.items()
        if key.startswith(prefix)
    )
    query = next(
        key
        for key, _ in original.named_parameters()
        if key.endswith("q_proj.weight") and vision_parts(original).part_of(key) == LANGUAGE
    )
    assert not torch.equal(merged.get_parameter(query), original.get_parameter(query))  # the LoRA update, merged
    tower = next(key for key, _ in original.named_parameters() if vision_parts(original).part_of(key) == TOWER)
    assert torch.equal(merged.get_parameter(tower), original.get_parameter(tower))  # the frozen tower, as it was


# -- 7: QLoRA -------------------------------------------------------------------------------------------------------


QUANTIZED = ["llava", *NAMES]


@pytest.mark.parametrize("name", QUANTIZED)
def test_qlora_quantizes_the_language_model_and_keeps_the_image_side_in_full_precision(
    name: str, model_dir: Callable[[str], Path]
):
    config = family_config(model_dir(name), quantization={"mode": "4bit"})
    model = load_model(config, CPU)
    parts = vision_parts(model)
    kinds: dict[str, set[str]] = {}
    for param_name, param in model.named_parameters():
        kinds.setdefault(parts.part_of(param_name), set()).add(type(param).__name__)
    assert kinds == {TOWER: {"Parameter"}, PROJECTOR: {"Parameter"}, LANGUAGE: {"Parameter", "Params4bit"}}
    image_side = family_part(model, parts, TOWER) + family_part(model, parts, PROJECTOR)
    assert {param.dtype for param in image_side} == {torch.float32}
    # every linear layer of the language model is 4-bit but the output head, as transformers leaves it
    language_linears = {
        module_name: type(module).__name__
        for module_name, module in model.named_modules()
        if type(module).__name__ in ("Linear", "Linear4bit") and parts.part_of(module_name) == LANGUAGE
    }
    assert {module_name for module_name, kind in language_linears.items() if kind == "Linear"} == {"lm_head"}
    assert len(language_linears) > 1
    assert_lora_trains(make_trainable(model, config, CPU), parts, {LANGUAGE, PROJECTOR})


def family_part(model: Any, parts: VisionParts, part: str) -> list[Any]:
    """The parameters of ``model`` in ``part``."""
    return [param for name, param in model.named_parameters() if parts.part_of(name) == part]


@pytest.mark.parametrize("name", ["llava", "qwen2_vl"])
def test_qlora_trains_a_few_steps(name: str, model_dir: Callable[[str], Path], data_dir: Path, tmp_path: Path):
    config = family_config(model_dir(name), data_dir / "train.jsonl", quantization={"mode": "4bit"})
    run_dir, status = train_in_process(config, tmp_path)
    assert (status.state, status.step) == ("completed", 2), status.error
    losses = [event["loss"] for event in train_events(run_dir)]
    assert len(losses) == 2 and all(math.isfinite(loss) and loss > 0 for loss in losses)
    projector = "model.multi_modal_projector" if name == "llava" else FAMILIES[name].projector
    assert saved_projector_changed(run_dir, model_dir(name), projector)
