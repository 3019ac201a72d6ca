"""A vision-language model in training: its processor, its three parts (vision tower, projector, language model)
and which of them train (the run's ``vision`` section).

transformers names the parts alike across families (``vision_tower`` / ``visual`` / ``vision_model`` for the
encoder, ``multi_modal_projector`` / ``merger`` / ``connector`` for the projector); whatever is neither is the
language model, its embeddings and head included. Qwen2-VL keeps its projector (``merger``) inside its vision
tower, so a parameter belongs to the projector first.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from peft import LoraConfig

    from engine.config import RunConfig

VISION_TOWERS = ("vision_tower", "visual", "vision_model", "vision_encoder", "image_encoder")
PROJECTORS = ("multi_modal_projector", "merger", "connector", "mm_projector")
TOWER, PROJECTOR, LANGUAGE = "vision tower", "projector", "language model"


@dataclass(frozen=True)
class VisionParts:
    """Where a vision-language model's image side is: the module names of its vision tower and its projector."""

    tower: str | None
    projector: str | None

    def part_of(self, name: str) -> str:
        """Which part the parameter or module ``name`` belongs to."""
        if self.projector and _within(name, self.projector):
            return PROJECTOR
        if self.tower and _within(name, self.tower):
            return TOWER
        return LANGUAGE


def vision_parts(model: Any) -> VisionParts:
    """The vision tower and projector of ``model`` (the shallowest module of each known name)."""
    names = [name for name, _ in model.named_modules() if name]
    return VisionParts(_shallowest(names, VISION_TOWERS), _shallowest(names, PROJECTORS))


def trained_parts(config: RunConfig) -> set[str]:
    """The parts the run's vision section trains."""
    vision = config.vision
    chosen = {
        TOWER: vision.train_vision_tower,
        PROJECTOR: vision.train_projector,
        LANGUAGE: vision.train_language_model,
    }
    return {part for part, on in chosen.items() if on}


def set_trainable_parts(model: Any, config: RunConfig, parts: VisionParts) -> None:
    """Full fine-tuning of a vision-language model: the chosen parts train, the others stay frozen."""
    trained = trained_parts(config)
    for name, param in model.named_parameters():
        param.requires_grad_(parts.part_of(name) in trained)


def adapt_lora_config(lora: LoraConfig, config: RunConfig, parts: VisionParts) -> LoraConfig:
    """The run's LoraConfig confined to the parts that train: LoRA stays out of a frozen vision tower (and of the
    language model when it does not train), and a trained projector trains in full, saved beside the adapter
    (its few weights gain nothing from a low-rank update)."""
    trained = trained_parts(config)
    excluded = []
    if parts.tower and TOWER not in trained:
        excluded.append(_under(parts.tower))
    if parts.projector:
        excluded.append(_under(parts.projector))
    if LANGUAGE not in trained:
        image_side = [prefix for prefix in (parts.tower, parts.projector) if prefix]
        excluded.append("".join(f"(?!{_under(prefix)}$)" for prefix in image_side) + ".*")
    lora.exclude_modules = "|".join(f"(?:{pattern})" for pattern in excluded) if excluded else None
    if parts.projector and PROJECTOR in trained:
        lora.modules_to_save = [*(lora.modules_to_save or []), parts.projector]
    return lora


def language_model_lists(model: Any, parts: VisionParts) -> list[tuple[str, Any]]:
    """The model's ModuleLists outside its image side (the freeze method trains the last layers of the largest)."""
    import torch

    return [
        (name, module)
        for name, module in model.named_modules()
        if isinstance(module, torch.nn.ModuleList) and parts.part_of(name) == LANGUAGE
    ]


def load_processor(source: str, revision: str | None, trust_remote_code: bool) -> Any:
    """The model's processor (image processor + tokenizer + chat template), with a pad token (eos when none)."""
    from transformers import AutoProcessor

    processor = AutoProcessor.from_pretrained(source, revision=revision, trust_remote_code=trust_remote_code)
    tokenizer = processor.tokenizer
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return processor


def text_tokenizer(processing_class: Any) -> Any:
    """The tokenizer of a processing class: a processor's own, or the tokenizer itself."""
    return getattr(processing_class, "tokenizer", processing_class)


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _under(prefix: str) -> str:
    """A regex that fully matches ``prefix`` and every module under it."""
    return re.escape(prefix) + r"(?:\..*)?"


def _shallowest(names: list[str], wanted: tuple[str, ...]) -> str | None:
    found = [name for name in names if name.rsplit(".", 1)[-1] in wanted]
    return min(found, key=lambda name: name.count("."), default=None)
