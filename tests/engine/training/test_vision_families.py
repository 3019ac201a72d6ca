"""Vision-language fine-tuning beyond LLaVA: tiny random Qwen2-VL, Qwen2.5-VL, Gemma 3, Idefics3 and SmolVLM
(tests/helpers/tiny_vlms.py, built once per module), each with its processor and its family's own chat template,
go through what a run does: the modality and model class, where the vision tower and projector are, what LoRA and
full fine-tuning train, the check's token counts against TRL's collator, a row cut inside its image, a few
training steps (the adapter, the projector and the processor saved), Evaluate and the merged export of the result,
and QLoRA with the image side kept in full precision (LLaVA, the demo VLM, too).

SmolVLM's processor needs num2words, which the studio does not install: its model-side tests run, its
processor-side ones are skipped with that reason.
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
from engine.config import RunConfig, parse_config
from engine.store.paths import PROJECT_ROOT
from engine.training.check import check_run
from engine.training.hardware import Hardware
from engine.training.methods.base import IMAGE_TEXT_TO_TEXT
from engine.training.modality import is_vision_model, model_kind, model_modality
from engine.training.modeling import load_model, load_tokenizer, make_trainable
from engine.training.vision import LANGUAGE, PROJECTOR, TOWER, VisionParts, vision_parts
from tests.engine.training.test_preference_training import train_events
from tests.helpers.tiny_vlms import FAMILIES, IMAGE_TOKENS, build_tiny_vlm

pytestmark = pytest.mark.integration

CPU = Hardware(gpu_count=0, bf16_supported=False)
DEMO_VLM = PROJECT_ROOT / "assets" / "demo-vlm"
NAMES = list(FAMILIES)
# The families whose processor can be built here (SmolVLM's needs num2words).
WITH_PROCESSOR = [
    pytest.param(name, marks=pytest.mark.skip(reason=FAMILIES[name].missing())) if FAMILIES[name].missing() else name
    for name in NAMES
]
COLOURS = {"red": (220, 30, 30), "green": (30, 200, 60), "blue": (30, 60, 220), "yellow": (230, 220, 40)}
QUESTION = "What colour is it?"
# A first exchange long enough that the image of the turn after it starts past every short row's end.
LONG_ANSWER = "Red, orange, yellow, green, blue, indigo and violet: the colours of the rainbow, in order."


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """The folder of family ``name`` (built on first use in the module), or the demo VLM for ``llava``."""
    root = tmp_path_factory.mktemp("tiny-vlms")
    return lambda name: DEMO_VLM if name == "llava" else build_tiny_vlm(name, root / name)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Four 32 x 32 single-colour images and their rows (train.jsonl); with_long.jsonl puts before them a row of two
    exchanges whose image comes in the second question."""
    from PIL import Image

    folder = tmp_path_factory.mktemp("colours")
    rows = []
    for colour, rgb in COLOURS.items():
        Image.new("RGB", (32, 32), rgb).save(folder / f"{colour}.png")
        rows.append(_row([], colour))
    (folder / "train.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    late_image = _row([("Name the colours you know.", LONG_ANSWER)], "red")
    (folder / "with_long.jsonl").write_text("".join(json.dumps(row) + "\n" for row in [late_image, *rows]))
    return folder


def _row(before: list[tuple[str, str]], colour: str) -> dict[str, Any]:
    """A vision row (the engine's LLaMA-Factory shape): text-only exchanges ``before``, then the image's question."""
    messages = [
        message
        for question, answer in before
        for message in ({"role": "user", "content": question}, {"role": "assistant", "content": answer})
    ]
    messages += [
        {"role": "user", "content": f"<image>{QUESTION}"},
        {"role": "assistant", "content": colour},
    ]
    return {"messages": messages, "images": [f"{colour}.png"]}


def family_config(path: Path, data: Path | None = None, **sections: dict[str, Any]) -> RunConfig:
    """A run of the model at ``path`` (LoRA r 4 on peft's default targets, the vision section's defaults) on
    ``data``; sections given are merged in."""
    values: dict[str, Any] = {
        "name": "family",
        "model": {"name_or_path": str(path)},
        "adapter": {"r": 4, "dropout": 0.0},
        "train": {
            "max_steps": 2,
            "per_device_batch_size": 2,
            "learning_rate": 1e-3,
            "max_length": 128,
            "logging_steps": 1,
            "save_strategy": "no",
        },
        "launch": {"threads_per_process": 1},  # no CPU-share callback changing this process's threads
    }
    if data is not None:
        values["data"] = {"path": str(data)}
    for section, more in sections.items():
        values.setdefault(section, {}).update(more)
    return parse_config(values)


def part_names(parts: VisionParts) -> Callable[[str], str]:
    """The part of a parameter or module name of the model or of the peft model around it (its names prefixed)."""
    return lambda name: parts.part_of(name.removeprefix("base_model.model."))


def requires_grad_by_part(model: Any, parts: VisionParts) -> dict[str, set[bool]]:
    """For each part, the requires_grad values its parameters have."""
    own = part_names(parts)
    found: dict[str, set[bool]] = {}
    for name, param in model.named_parameters():
        found.setdefault(own(name), set()).add(param.requires_grad)
    return found


def assert_lora_trains(model: Any, parts: VisionParts, trained: set[str]) -> None:
    """The peft ``model`` trains parameters in the ``trained`` parts only; in the projector exactly peft's full copy
    (modules_to_save), its original frozen beside it."""
    own = part_names(parts)
    names = {name: param.requires_grad for name, param in model.named_parameters()}
    assert {own(name) for name, grad in names.items() if grad} == trained
    projector = [name for name in names if own(name) == PROJECTOR]
    copies = {name for name in projector if ".modules_to_save." in name}
    assert copies and {name for name in projector if names[name]} == copies


# -- 1, 2: modality, class, parts ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_the_family_loads_as_a_vision_model_with_its_parts(name: str, model_dir: Callable[[str], Path]):
    family = FAMILIES[name]
    config = family_config(model_dir(name))
    assert model_modality(str(model_dir(name))) == "vision" and is_vision_model(config)
    assert model_kind(config) == IMAGE_TEXT_TO_TEXT
    model = load_model(config, CPU)
    assert type(model).__name__ == family.model_class
    parts = vision_parts(model)
    assert parts == VisionParts(family.tower, family.projector)
    # every part holds weights; the tower's and the projector's are the modules of those names
    counts: dict[str, int] = {}
    for param_name, param in model.named_parameters():
        counts[parts.part_of(param_name)] = counts.get(parts.part_of(param_name), 0) + param.numel()
    projector = sum(param.numel() for param in model.get_submodule(family.projector).parameters())
    tower = sum(param.numel() for param in model.get_submodule(family.tower).parameters())
    assert counts[PROJECTOR] == projector > 0
    assert counts[TOWER] == tower - (projector if family.projector.startswith(family.tower + ".") else 0) > 0
    assert counts[LANGUAGE] > counts[TOWER]


# -- 3: LoRA --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_lora_by_default_adapts_the_language_model_and_trains_the_projector(
    name: str, model_dir: Callable[[str], Path]
):
    """target_modules auto (peft has no default for a vision-language type): the language model's query and value
    projections get LoRA, the projector trains in full beside the adapter, the tower is frozen and untouched."""
    family = FAMILIES[name]
    config = family_config(model_dir(name))
    model = make_trainable(load_model(config, CPU), config, CPU)
    parts = vision_parts(model.get_base_model())
    own = part_names(parts)
    assert_lora_trains(model, parts, {LANGUAGE, PROJECTOR})
    lora_layers = [module_name for module_name, _ in model.named_modules() if module_name.endswith(".lora_A")]
    assert {own(layer) for layer in lora_layers} == {LANGUAGE}
    assert {layer.split(".")[-2] for layer in lora_layers} == {"q_proj", "v_proj"}
    assert model.peft_config["default"].modules_to_save == [family.projector]
    trained_outside_lora = {
        param_name
        for param_name, param in model.named_parameters()
        if param.requires_grad and "lora_" not in param_name
    }
    assert trained_outside_lora and all(".modules_to_save." in param_name for param_name in trained_outside_lora)
    assert {own(param_name) for param_name in trained_outside_lora} == {PROJECTOR}


@pytest.mark.parametrize("name", NAMES)
def test_lora_reaches_the_vision_tower_when_it_trains(name: str, model_dir: Callable[[str], Path]):
    config = family_config(
        model_dir(name), adapter={"target_modules": "all-linear"}, vision={"train_vision_tower": True}
    )
    model = make_trainable(load_model(config, CPU), config, CPU)
    parts = vision_parts(model.get_base_model())
    own = part_names(parts)
    lora_layers = [module_name for module_name, _ in model.named_modules() if module_name.endswith(".lora_A")]
    assert {own(layer) for layer in lora_layers} == {LANGUAGE, TOWER}  # the projector still trains in full
    assert_lora_trains(model, parts, {LANGUAGE, TOWER, PROJECTOR})


# -- 4: full fine-tuning ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("vision", "trained"),
    [
        ({}, {LANGUAGE, PROJECTOR}),
        ({"train_language_model": False}, {PROJECTOR}),
        ({"train_vision_tower": True, "train_projector": False}, {TOWER, LANGUAGE}),
    ],
    ids=["default", "projector-only", "tower-and-language"],
)
@pytest.mark.parametrize("name", NAMES)
def test_full_fine_tuning_trains_the_chosen_parts(
    name: str, vision: dict, trained: set[str], model_dir: Callable[[str], Path]
):
    config = family_config(model_dir(name), adapter={"method": "full"}, vision=vision)
    model = make_trainable(load_model(config, CPU), config, CPU)
    expected = {part: {part in trained} for part in (TOWER, PROJECTOR, LANGUAGE)}
    assert requires_grad_by_part(model, vision_parts(model)) == expected


# -- 5: the check counts what TRL's collator trains ---------------------------------------------------------------


def trl_batch(config: RunConfig) -> tuple[Any, dict[str, Any]]:
    """The run's processor and the batch TRL's vision collator builds of its prepared training rows, with the chat
    template SFTTrainer gives it (TRL's training version of the family's, which marks the answers)."""
    from trl.chat_template_utils import get_training_chat_template
    from trl.trainer.sft_trainer import DataCollatorForVisionLanguageModeling

    from engine.data.vision_sets import prepare_vision_datasets

    processor = load_tokenizer(config)
    train = prepare_vision_datasets(config, processor).train
    collator = DataCollatorForVisionLanguageModeling(
        processor,
        max_length=config.train.max_length,
        assistant_only_loss=True,
        chat_template=get_training_chat_template(processor),
    )
    return processor, collator([train[index] for index in range(len(train))])


@pytest.mark.parametrize("name", WITH_PROCESSOR)
def test_the_check_counts_the_tokens_trls_collator_trains(name: str, model_dir: Callable[[str], Path], data_dir: Path):
    family = FAMILIES[name]
    config = family_config(model_dir(name), data_dir / "train.jsonl")
    report = check_run(config).data
    assert (report.format, report.num_rows, report.num_images) == ("vision", 4, 4)
    processor, batch = trl_batch(config)
    assert type(processor).__name__ == family.processor_class
    assert report.num_tokens == int(batch["attention_mask"].sum())
    assert report.num_loss_tokens == int((batch["labels"] != -100).sum())
    tokenizer = processor.tokenizer
    answers = [tokenizer.decode(labels[labels != -100]) for labels in batch["labels"]]
    # the answer and the end of its turn, nothing of the prompt
    assert [answer.strip().removesuffix(tokenizer.eos_token).strip() for answer in answers] == list(COLOURS)
    image_token = tokenizer.convert_tokens_to_ids(family.image_token)
    assert [int((ids == image_token).sum()) for ids in batch["input_ids"]] == [IMAGE_TOKENS] * 4
    assert not (batch["labels"] == image_token).any()


@pytest.mark.parametrize("name", WITH_PROCESSOR)
def test_a_row_cut_among_its_image_tokens_is_dropped(name: str, model_dir: Callable[[str], Path], data_dir: Path):
    """max_length falls inside the image of a row's second question: the check drops that row (the processor would
    refuse its cut image tokens in the collator), the four short rows stay and collate."""
    from trl.chat_template_utils import get_training_chat_template

    from engine.data.vision_sets import with_images

    family = FAMILIES[name]
    config = family_config(model_dir(name), data_dir / "with_long.jsonl")
    processor = load_tokenizer(config)
    long_row = json.loads((data_dir / "with_long.jsonl").read_text().splitlines()[0])
    ids = processor.apply_chat_template(
        [with_images(long_row["messages"], [str(data_dir / "red.png")], config.vision.max_pixels)],
        chat_template=get_training_chat_template(processor),
        tokenize=True,
        return_dict=True,
        processor_kwargs={"add_special_tokens": False},
    )["input_ids"][0]
    cut = list(ids).index(processor.tokenizer.convert_tokens_to_ids(family.image_token)) + 2
    # dropped for its image, not for want of an answer: the first answer is whole before the cut
    assert "in order." in processor.tokenizer.decode(ids[:cut])
    config = family_config(model_dir(name), data_dir / "with_long.jsonl", train={"max_length": cut})
    report = check_run(config).data
    assert report.num_rows == 4 and report.num_images == 4
    assert any(line.startswith(f"1 of 5 rows are dropped: max_length {cut}") for line in report.warnings)
    _, batch = trl_batch(config)
    assert report.num_tokens == int(batch["attention_mask"].sum())  # the short rows fit: nothing else was cut
    assert report.num_loss_tokens == int((batch["labels"] != -100).sum())


# -- 6: a few training steps --------------------------------------------------------------------------------------


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


@pytest.mark.parametrize("name", WITH_PROCESSOR)
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


@pytest.mark.parametrize("name", WITH_PROCESSOR)
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
