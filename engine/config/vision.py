"""The vision section of a RunConfig: how a vision-language model's images are sized and which of its parts
train. Read only when the base model is a vision-language one (engine.training.modality)."""

from __future__ import annotations

from pydantic import Field

from engine.config.schema import Section

# 1,003,520 pixels (1280 x 28 x 28): Qwen2-VL's own default cap, about 1000 x 1000.
DEFAULT_MAX_PIXELS = 1_003_520
# The data check refuses larger images before decoding them (engine.data.images.MAX_DECODE_PIXELS).
MAX_IMAGE_PIXELS = 8192 * 8192


class VisionSection(Section):
    """Images and trainable parts of a vision-language model (image-text-to-text)."""

    max_pixels: int = Field(
        DEFAULT_MAX_PIXELS,
        ge=28 * 28,
        le=MAX_IMAGE_PIXELS,
        description=(
            "Images with more pixels are scaled down to this many (aspect ratio kept) before the processor sees "
            "them: fewer pixels, fewer image tokens and less memory."
        ),
    )
    train_vision_tower: bool = Field(
        False,
        description="Train the vision encoder too (LoRA on it, or its weights); off keeps it frozen, as is usual.",
    )
    train_projector: bool = Field(
        True,
        description=(
            "Train the projector that maps image features into the language model (in full; with LoRA it is saved "
            "beside the adapter)."
        ),
    )
    train_language_model: bool = Field(
        True,
        description="Train the language model (LoRA on it, or its weights); off trains the image side alone.",
    )
