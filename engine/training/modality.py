"""Whether a base model reads images (a vision-language, image-text-to-text model) or text alone, from its
config.json, without importing transformers or torch: the studio, the data check and the launch ask it.

A vision-language config nests the configs of its parts: ``vision_config`` beside ``text_config`` (LLaVA,
Qwen2-VL and 2.5-VL, Gemma 3, Idefics3 / SmolVLM, PaliGemma, Mllama all write it so).
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.store.paths import resolve_model_source

if TYPE_CHECKING:
    from engine.config import RunConfig
    from engine.training.methods.base import ModelKind

VISION, TEXT = "vision", "text"


def model_modality(name_or_path: str, revision: str | None = None) -> str | None:
    """``vision`` for a vision-language model, ``text`` for a language model, None when its config cannot be read
    (a hub id offline that is not in the local cache)."""
    model_config = _config_json(resolve_model_source(name_or_path), revision)
    if model_config is None:
        return None
    return VISION if isinstance(model_config.get("vision_config"), dict) else TEXT


def is_vision_model(config: RunConfig) -> bool:
    """Whether the run's base model is a vision-language one (an unreadable config counts as text: the model's own
    loading then says what is wrong)."""
    return model_modality(config.model.name_or_path, config.model.revision) == VISION


def _config_json(source: str, revision: str | None) -> dict[str, Any] | None:
    path = Path(source)
    file = path / "config.json" if path.is_dir() else _hub_config_file(source, revision)
    if file is None:
        return None
    try:
        value = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def model_kind(config: RunConfig) -> ModelKind:
    """What the run loads and trains: its method's kind (engine.training.methods), which for a language model on a
    vision-language base is the image-text-to-text kind (its auto class loads the vision tower too)."""
    from engine.training.methods import method_of
    from engine.training.methods.base import CAUSAL_LM, IMAGE_TEXT_TO_TEXT

    kind = method_of(config).model
    return IMAGE_TEXT_TO_TEXT if kind == CAUSAL_LM and is_vision_model(config) else kind


@lru_cache(maxsize=64)
def _hub_config_file(repo_id: str, revision: str | None) -> Path | None:
    """The hub model's config.json (downloaded once, or from the local cache offline); None when unreachable."""
    try:
        from huggingface_hub import hf_hub_download

        return Path(hf_hub_download(repo_id, "config.json", revision=revision))
    except Exception:  # noqa: BLE001 - offline, unknown repo, gated: the modality is just not known
        return None
