"""A vision-language model in training: its processor, its three parts (vision tower, projector, language model)
and which of them train (the run's ``vision`` section).

transformers names the parts alike across families (``vision_tower`` / ``visual`` / ``vision_model`` for the
encoder, ``multi_modal_projector`` / ``merger`` / ``connector`` for the projector); whatever is neither is the
language model, its embeddings and head included. Qwen2-VL keeps its projector (``merger``) inside its vision
tower, so a parameter belongs to the projector first.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass
from types import SimpleNamespace
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


def adapt_lora_config(lora: LoraConfig, config: RunConfig, parts: VisionParts, model: Any = None) -> LoraConfig:
    """The run's LoraConfig confined to the parts that train: LoRA stays out of a frozen vision tower (and of the
    language model when it does not train), and a trained projector trains in full, saved beside the adapter
    (its few weights gain nothing from a low-rank update). ``target_modules: auto`` becomes the language model's
    default (``default_targets``: peft keys its defaults by model type and has none for vision-language ones)."""
    if lora.target_modules is None and model is not None:
        lora.target_modules = default_targets(model)
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


# What peft targets on nearly every decoder it knows (LLaMA, Mistral, Qwen2, Gemma...): the attention's query and
# value projections. engine.training.memory_shape counts ``auto`` so too.
QUERY_VALUE = ("q_proj", "v_proj")


def default_targets(model: Any) -> str | set[str]:
    """peft's default LoRA targets for a vision-language model (``target_modules: auto``): its own model type's
    when peft has one, else its language model's (``text_config``: llama for LLaVA and Idefics3, gemma3_text for
    Gemma 3), else the query and value projections (Qwen2-VL's qwen2_vl_text is not in peft's table).

    Without this peft refuses every vision-language model whose type it does not list (``Please specify
    target_modules``), which is all of them. The run's exclusions (adapt_lora_config) keep the names out of the
    image side: a SigLIP tower has q_proj and v_proj too."""
    from peft.utils.constants import TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING as PEFT_DEFAULTS

    text_config = getattr(model.config, "text_config", None)
    for model_type in (model.config.model_type, getattr(text_config, "model_type", None)):
        targets = PEFT_DEFAULTS.get(model_type)
        if targets is not None:
            return targets if isinstance(targets, str) else set(targets)
    return set(QUERY_VALUE)


def unquantized_modules(model: Any) -> list[str]:
    """The modules a quantized (QLoRA) vision-language run leaves in full precision: the vision tower and the
    projector, besides what transformers leaves by default (the output head, tied weights).

    bitsandbytes would otherwise quantize every linear layer, image side included: the frozen tower would then see
    images through 4-bit weights it was never trained with, and the projector, trained in full, would be a 4-bit
    layer that cannot take gradients. QLoRA's saving is in the language model; the tower and projector are a small
    share. Their names are read before loading, from ``model``: a weightless (meta device) copy of the model."""
    from transformers.quantizers.base import get_keys_to_not_convert

    parts = vision_parts(model)
    image_side = [name for name in (parts.tower, parts.projector) if name]
    return sorted({*get_keys_to_not_convert(model), *image_side})


def language_model_lists(model: Any, parts: VisionParts) -> list[tuple[str, Any]]:
    """The model's ModuleLists outside its image side (the freeze method trains the last layers of the largest)."""
    import torch

    return [
        (name, module)
        for name, module in model.named_modules()
        if isinstance(module, torch.nn.ModuleList) and parts.part_of(name) == LANGUAGE
    ]


def load_processor(source: str, revision: str | None, trust_remote_code: bool) -> Any:
    """The model's processor (image processor + tokenizer + chat template), with a pad token (eos when none).

    A processor that also holds a video processor (Qwen2-VL, Qwen2.5-VL) cannot be built without torchvision, which
    the studio does not install; since the studio gives a model images only, such a processor is then loaded
    without its video processor (``images_only_processor``)."""
    from transformers import AutoProcessor

    try:
        processor = AutoProcessor.from_pretrained(source, revision=revision, trust_remote_code=trust_remote_code)
    except ImportError:
        processor = images_only_processor(source, revision, trust_remote_code)
        if processor is None:
            raise
    tokenizer = processor.tokenizer
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return processor


def images_only_processor(source: str, revision: str | None, trust_remote_code: bool) -> Any | None:
    """The model's processor without its video processor, when torchvision (which every video processor needs) is
    missing; None when torchvision is there, the processor has no video processor, or it fails to load even so (the
    first error is then the one to report).

    transformers builds, checks and saves a processor's parts from its class's ``get_attributes()``, and reads a
    video processor only when given videos (``hasattr(self, "video_processor")``), so a subclass that leaves
    ``video_processor`` out of its attributes loads the image processor and tokenizer alone. What it saves (beside a
    trained adapter or model) is the family's processor whole: its class name, and the video processor's settings
    nested in processor_config.json as transformers nests them, so it loads as the source does, with torchvision or
    without.
    """
    from transformers.utils import is_torchvision_available
    from transformers.video_processing_utils import BaseVideoProcessor

    family = None if is_torchvision_available() else _processor_class(source, revision, trust_remote_code)
    if family is None or "video_processor" not in family.get_attributes():
        return None
    try:  # the settings only (a json file; no torchvision needed): the source's, or its image processor's
        video_settings, _ = BaseVideoProcessor.get_video_processor_dict(source, revision=revision)
    except OSError:
        video_settings = None

    # A family whose __init__ requires its video processor (SmolVLM's) is given None for it; ProcessorMixin then
    # sets only the attributes left (it pairs positional arguments with get_attributes(), and the extra is unused).
    required = inspect.signature(family.__init__).parameters.get("video_processor")
    none_for_video = {"video_processor": None} if required and required.default is inspect.Parameter.empty else {}

    class ImagesOnly(family):  # type: ignore[misc, valid-type] - a class known at run time
        @classmethod
        def get_attributes(cls) -> list[str]:
            return [name for name in super().get_attributes() if name != "video_processor"]

        @property
        def video_processor(self) -> SimpleNamespace:
            """The video processor's settings alone: SmolVLM's apply_chat_template reads its frame count and rate
            even for a conversation without video (transformers reads the video processor itself only for
            videos, which the studio never gives)."""
            return SimpleNamespace(**{"num_frames": None, "fps": None, **(video_settings or {})})

        def to_dict(self) -> dict[str, Any]:
            settings = super().to_dict()
            if video_settings is not None:
                settings.setdefault("video_processor", video_settings)
            return settings

    ImagesOnly.__name__ = ImagesOnly.__qualname__ = family.__name__
    try:
        return ImagesOnly.from_pretrained(
            source, revision=revision, trust_remote_code=trust_remote_code, **none_for_video
        )
    except Exception:  # noqa: BLE001 - the caller reports the processor's first error, the real cause
        return None


def _processor_class(source: str, revision: str | None, trust_remote_code: bool) -> type | None:
    """The processor class AutoProcessor picks for ``source``: the one its processor_config.json names (a saved
    processor, beside an adapter that has no config.json), else the one transformers maps its model type to."""
    from transformers import AutoConfig, ProcessorMixin
    from transformers.models.auto.processing_auto import PROCESSOR_MAPPING, processor_class_from_name

    try:
        settings, _ = ProcessorMixin.get_processor_dict(source, revision=revision)
    except (OSError, ValueError):
        settings = {}
    named = settings.get("processor_class")
    if isinstance(named, str) and processor_class_from_name(named) is not None:
        return processor_class_from_name(named)
    try:
        return PROCESSOR_MAPPING[
            type(AutoConfig.from_pretrained(source, revision=revision, trust_remote_code=trust_remote_code))
        ]
    except (KeyError, OSError, ValueError):  # no config, or a model transformers maps to no processor
        return None


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
