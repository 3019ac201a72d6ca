"""Vision-language fine-tuning beyond LLaVA: tiny random Qwen2-VL, Qwen2.5-VL, Gemma 3, Idefics3 and SmolVLM
(tests/helpers/tiny_vlms.py, built once per module), each with its processor and its family's own chat template:
the modality and model class, where the vision tower and projector are, what LoRA and full fine-tuning train, the
check's token counts against TRL's collator, and a row cut inside its image. Training, Evaluate, the merged export
and QLoRA of the same families: test_vision_families_training.py.

Without torchvision (the studio does not install it) each family's processor is loaded without its video processor
(engine.training.vision.images_only_processor), SmolVLM's too.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from engine.config import RunConfig
from engine.training.check import check_run
from engine.training.methods.base import IMAGE_TEXT_TO_TEXT
from engine.training.modality import is_vision_model, model_kind, model_modality
from engine.training.modeling import load_model, load_tokenizer, make_trainable
from engine.training.vision import LANGUAGE, PROJECTOR, TOWER, VisionParts, vision_parts
from tests.helpers.tiny_vlms import FAMILIES, IMAGE_TOKENS
from tests.helpers.vision_families import (
    COLOURS,
    CPU,
    NAMES,
    assert_lora_trains,
    family_config,
    part_names,
)

pytestmark = pytest.mark.integration


def requires_grad_by_part(model: Any, parts: VisionParts) -> dict[str, set[bool]]:
    """For each part, the requires_grad values its parameters have."""
    own = part_names(parts)
    found: dict[str, set[bool]] = {}
    for name, param in model.named_parameters():
        found.setdefault(own(name), set()).add(param.requires_grad)
    return found


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


@pytest.mark.parametrize("name", NAMES)
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


@pytest.mark.parametrize("name", NAMES)
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
