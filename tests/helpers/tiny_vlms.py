"""Tiny random vision-language models of the families transformers has, each written to a folder as the hub ships
one: config.json and weights, the tokenizer with the family's image tokens, the image processor's
preprocessor_config.json, the processor's own settings (processor_config.json) and the family's chat template.

Nothing is downloaded: the tokenizer is the demo model's (assets/demo-model) with the family's special tokens added,
the chat template is the family's original as TRL ships it (``trl.chat_template_utils``; the engine then swaps in
TRL's training version with ``{% generation %}`` markers, as it does for the real model), and the weights are random.
Each model has one or two layers of width 64 or less and reads small images (32 x 32 or 56 x 56 pixels, 4 image
tokens each), so loading, checking and a few training steps take seconds on a CPU.

The image processors are written under their hub names (``Qwen2VLImageProcessor``, ...): without torchvision
transformers loads their PIL versions, as it does for a real checkpoint on this studio's install.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.store.paths import PROJECT_ROOT

DEMO_TOKENIZER = PROJECT_ROOT / "assets" / "demo-model"
IMAGE_TOKENS = 4  # the image tokens every tiny family gives one image (after its processor's resize)


@dataclass(frozen=True)
class Family:
    """A vision-language family as the tests expect to find it once loaded."""

    name: str
    model_class: str  # the class AutoModelForImageTextToText loads
    processor_class: str  # the class AutoProcessor loads
    tower: str  # the module names of the vision tower and the projector (engine.training.vision.vision_parts)
    projector: str
    image_token: str  # the token the processor repeats once per image token
    build: Callable[[Path], None]


def tokenizer_with(tokens: list[str], named: dict[str, str] | None = None, eos: str | None = None) -> Any:
    """The demo model's tokenizer with ``tokens`` added as special tokens; ``named``: special tokens the family's
    processor reads as tokenizer attributes (Gemma 3's ``boi_token``...); ``eos``: the family's end of turn."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(DEMO_TOKENIZER, extra_special_tokens=named or {})
    for loading_detail in ("is_local", "local_files_only"):  # how it was loaded here, not what it is
        tokenizer.init_kwargs.pop(loading_detail, None)
    tokenizer.add_tokens(tokens, special_tokens=True)
    if eos is not None:
        tokenizer.eos_token = eos
    return tokenizer


def save_vlm(
    folder: Path,
    model: Any,
    tokenizer: Any,
    image_processor: Any,
    processor_class: str,
    chat_template: str,
    processor_settings: dict[str, Any] | None = None,
) -> None:
    """Write the model, tokenizer, image processor, processor settings and chat template as a hub repository holds
    them (the processor is not built here: some need torchvision for a video processor, which the engine copes
    without)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("bos_token_id", "eos_token_id", "pad_token_id"):
        setattr(model.generation_config, name, getattr(tokenizer, name))
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    image_processor.save_pretrained(folder)
    # The hub names the default (torchvision) image processor; transformers falls back to its PIL version.
    preprocessor = json.loads((folder / "preprocessor_config.json").read_text())
    preprocessor["image_processor_type"] = preprocessor["image_processor_type"].removesuffix("Pil")
    preprocessor["processor_class"] = processor_class
    (folder / "preprocessor_config.json").write_text(json.dumps(preprocessor, indent=2))
    processor = {"processor_class": processor_class, **(processor_settings or {})}
    (folder / "processor_config.json").write_text(json.dumps(processor, indent=2))
    (folder / "chat_template.jinja").write_text(chat_template)


def _seeded() -> None:
    import torch

    torch.manual_seed(0)


# ---------------------------------------------------------------------------------------------------------------
# Qwen2-VL and Qwen2.5-VL: the vision tower ``model.visual`` holds its projector (``merger``); images are cut into
# 14-pixel patches, 2 x 2 of which merge into one token: a 56 x 56 image is 4 tokens.
# ---------------------------------------------------------------------------------------------------------------

QWEN_TOKENS = ["<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>"]
QWEN_IMAGE_SIDE = 56


def tiny_text(tokenizer: Any, **extra: Any) -> dict[str, Any]:
    """The language model every tiny family shares (one layer of width 64), sized to ``tokenizer``, with
    ``extra`` fields of the family's own."""
    return {
        "vocab_size": len(tokenizer),
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "max_position_embeddings": 512,
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "pad_token_id": tokenizer.pad_token_id,
        **extra,
    }


def _qwen_text(tokenizer: Any) -> dict[str, Any]:
    # head_dim 32: the multimodal rotary sections (time, height, width) split its 16 frequencies
    rope = {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [4, 6, 6]}
    return tiny_text(tokenizer, rope_parameters=rope)


def _qwen_ids(tokenizer: Any) -> dict[str, int]:
    ids = tokenizer.convert_tokens_to_ids
    return {
        "image_token_id": ids("<|image_pad|>"),
        "video_token_id": ids("<|video_pad|>"),
        "vision_start_token_id": ids("<|vision_start|>"),
        "vision_end_token_id": ids("<|vision_end|>"),
    }


def _qwen_image_processor() -> Any:
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    pixels = QWEN_IMAGE_SIDE * QWEN_IMAGE_SIDE  # every image is resized to 56 x 56: 4 x 4 patches, 4 tokens
    return Qwen2VLImageProcessorPil(
        size={"shortest_edge": pixels, "longest_edge": pixels}, patch_size=14, merge_size=2, temporal_patch_size=2
    )


def build_qwen2_vl(folder: Path) -> None:
    """A tiny Qwen2-VL (one text layer, one vision block) with its processor files."""
    from transformers import Qwen2VLConfig, Qwen2VLForConditionalGeneration
    from trl.chat_template_utils import qwen2_5_vl_chat_template  # Qwen2-VL's is byte-identical

    tokenizer = tokenizer_with(QWEN_TOKENS, eos="<|im_end|>")
    vision = {"depth": 1, "embed_dim": 32, "hidden_size": 64, "num_heads": 2, "mlp_ratio": 2, "patch_size": 14}
    config = Qwen2VLConfig(text_config=_qwen_text(tokenizer), vision_config=vision, **_qwen_ids(tokenizer))
    _seeded()
    model = Qwen2VLForConditionalGeneration(config)
    save_vlm(folder, model, tokenizer, _qwen_image_processor(), "Qwen2VLProcessor", qwen2_5_vl_chat_template)


def build_qwen2_5_vl(folder: Path) -> None:
    """A tiny Qwen2.5-VL (one text layer, one vision block) with its processor files."""
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration
    from trl.chat_template_utils import qwen2_5_vl_chat_template

    tokenizer = tokenizer_with(QWEN_TOKENS, eos="<|im_end|>")
    vision = {
        "depth": 1,
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_heads": 2,
        "out_hidden_size": 64,
        "patch_size": 14,
        "window_size": 56,
        "fullatt_block_indexes": [0],
    }
    config = Qwen2_5_VLConfig(text_config=_qwen_text(tokenizer), vision_config=vision, **_qwen_ids(tokenizer))
    _seeded()
    model = Qwen2_5_VLForConditionalGeneration(config)
    save_vlm(folder, model, tokenizer, _qwen_image_processor(), "Qwen2_5_VLProcessor", qwen2_5_vl_chat_template)


# ---------------------------------------------------------------------------------------------------------------
# Gemma 3: a SigLIP tower (``model.vision_tower``) and a projector (``model.multi_modal_projector``) that pools the
# 4 x 4 patches of a 32 x 32 image into 2 x 2 = 4 soft tokens between <start_of_image> and <end_of_image>.
# ---------------------------------------------------------------------------------------------------------------

GEMMA_NAMED = {"boi_token": "<start_of_image>", "eoi_token": "<end_of_image>", "image_token": "<image_soft_token>"}


def build_gemma3(folder: Path) -> None:
    """A tiny Gemma 3 (Gemma3ForConditionalGeneration: one text layer, one SigLIP layer) with its processor files."""
    from transformers import Gemma3Config, Gemma3ForConditionalGeneration
    from transformers.models.gemma3.image_processing_pil_gemma3 import Gemma3ImageProcessorPil
    from trl.chat_template_utils import gemma3_chat_template

    tokenizer = tokenizer_with(["<start_of_turn>", "<end_of_turn>"], named=GEMMA_NAMED, eos="<end_of_turn>")
    text = tiny_text(tokenizer, head_dim=32, query_pre_attn_scalar=32, sliding_window=64)
    vision = {
        "model_type": "siglip_vision_model",
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "image_size": 32,
        "patch_size": 8,
    }
    config = Gemma3Config(
        text_config=text,
        vision_config=vision,
        mm_tokens_per_image=IMAGE_TOKENS,
        boi_token_index=tokenizer.boi_token_id,
        eoi_token_index=tokenizer.eoi_token_id,
        image_token_index=tokenizer.image_token_id,
    )
    _seeded()
    model = Gemma3ForConditionalGeneration(config)
    image_processor = Gemma3ImageProcessorPil(size={"height": 32, "width": 32})
    settings = {"image_seq_length": IMAGE_TOKENS}
    save_vlm(folder, model, tokenizer, image_processor, "Gemma3Processor", gemma3_chat_template, settings)


# ---------------------------------------------------------------------------------------------------------------
# Idefics3 (and SmolVLM, its successor): a SigLIP-like tower (``model.vision_model``) and a connector
# (``model.connector``) that shuffles 2 x 2 patches into one token: a 32 x 32 image of 8-pixel patches is 4 tokens.
# The image is not split into tiles (do_image_splitting off), so it is one global image.
# ---------------------------------------------------------------------------------------------------------------

IDEFICS_TOKENS = [
    "<|begin_of_text|>",
    "<fake_token_around_image>",
    "<image>",
    "<global-img>",
    "<end_of_utterance>",
    *(f"<row_{row}_col_{col}>" for row in range(1, 7) for col in range(1, 7)),
]


def _idefics_parts(tokenizer: Any) -> tuple[dict[str, Any], dict[str, Any], Any]:
    from transformers.models.idefics3.image_processing_pil_idefics3 import Idefics3ImageProcessorPil

    text = tiny_text(tokenizer, model_type="llama")
    vision = {
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "image_size": 32,
        "patch_size": 8,
    }
    image_processor = Idefics3ImageProcessorPil(
        size={"longest_edge": 32}, max_image_size={"longest_edge": 32}, do_image_splitting=False
    )
    return text, vision, image_processor


def _idefics_model(tokenizer: Any, config_class: Any, model_class: Any) -> tuple[Any, Any]:
    """A tiny model of the Idefics3 architecture (Idefics3, SmolVLM: same config fields) and its image processor."""
    text, vision, image_processor = _idefics_parts(tokenizer)
    config = config_class(
        text_config=text,
        vision_config=vision,
        scale_factor=2,
        image_token_id=tokenizer.convert_tokens_to_ids("<image>"),
        pad_token_id=tokenizer.pad_token_id,
    )
    _seeded()
    return model_class(config), image_processor


def build_idefics3(folder: Path) -> None:
    """A tiny Idefics3 (one text layer, one vision layer) with its processor files."""
    from transformers import Idefics3Config, Idefics3ForConditionalGeneration
    from trl.chat_template_utils import idefics3_chat_template

    tokenizer = tokenizer_with(IDEFICS_TOKENS, eos="<end_of_utterance>")
    model, image_processor = _idefics_model(tokenizer, Idefics3Config, Idefics3ForConditionalGeneration)
    settings = {"image_seq_len": IMAGE_TOKENS}
    save_vlm(folder, model, tokenizer, image_processor, "Idefics3Processor", idefics3_chat_template, settings)


def build_smolvlm(folder: Path) -> None:
    """A tiny SmolVLM (one text layer, one vision layer) with its processor files."""
    from transformers import SmolVLMConfig, SmolVLMForConditionalGeneration
    from transformers.models.smolvlm.image_processing_pil_smolvlm import SmolVLMImageProcessorPil
    from trl.chat_template_utils import smolvlm_chat_template

    tokenizer = tokenizer_with(["<|im_start|>", *IDEFICS_TOKENS], eos="<end_of_utterance>")
    model, _ = _idefics_model(tokenizer, SmolVLMConfig, SmolVLMForConditionalGeneration)
    image_processor = SmolVLMImageProcessorPil(
        size={"longest_edge": 32}, max_image_size={"longest_edge": 32}, do_image_splitting=False
    )
    settings = {"image_seq_len": IMAGE_TOKENS}
    save_vlm(folder, model, tokenizer, image_processor, "SmolVLMProcessor", smolvlm_chat_template, settings)


FAMILIES = {
    family.name: family
    for family in (
        Family(
            "qwen2_vl",
            "Qwen2VLForConditionalGeneration",
            "Qwen2VLProcessor",
            "model.visual",
            "model.visual.merger",
            "<|image_pad|>",
            build_qwen2_vl,
        ),
        Family(
            "qwen2_5_vl",
            "Qwen2_5_VLForConditionalGeneration",
            "Qwen2_5_VLProcessor",
            "model.visual",
            "model.visual.merger",
            "<|image_pad|>",
            build_qwen2_5_vl,
        ),
        Family(
            "gemma3",
            "Gemma3ForConditionalGeneration",
            "Gemma3Processor",
            "model.vision_tower",
            "model.multi_modal_projector",
            "<image_soft_token>",
            build_gemma3,
        ),
        Family(
            "idefics3",
            "Idefics3ForConditionalGeneration",
            "Idefics3Processor",
            "model.vision_model",
            "model.connector",
            "<image>",
            build_idefics3,
        ),
        Family(
            "smolvlm",
            "SmolVLMForConditionalGeneration",
            "SmolVLMProcessor",
            "model.vision_model",
            "model.connector",
            "<image>",
            build_smolvlm,
        ),
    )
}


def build_tiny_vlm(name: str, folder: Path) -> Path:
    """Build family ``name`` into ``folder`` (once: a folder holding a config.json is reused) and return it."""
    if not (folder / "config.json").is_file():
        FAMILIES[name].build(folder)
    return folder
