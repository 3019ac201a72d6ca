"""The model's shape as GGUF metadata (``<arch>.block_count``, ``<arch>.attention.head_count``, ...).

llama.cpp builds its compute graph from these keys alone, so each comes from the Hugging Face config the way
llama.cpp's converter reads it; the family's extras (Gemma 2's soft-capping) come from its ``extra_hparams``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from engine.export.gguf.architectures import LLAMA3_ROPE, Family, rope_parameters


def head_dim(config: dict[str, Any]) -> int:
    """The width of one attention head (explicit in newer configs, else hidden size / heads)."""
    return config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]


def add_hparams(writer: Any, config: dict[str, Any], family: Family, file_type: int) -> None:
    """Write the architecture's hyperparameters into ``writer`` (a gguf.GGUFWriter)."""
    heads = config["num_attention_heads"]
    writer.add_block_count(config["num_hidden_layers"])
    writer.add_context_length(config.get("max_position_embeddings", 2048))
    writer.add_embedding_length(config["hidden_size"])
    writer.add_feed_forward_length(config["intermediate_size"])
    writer.add_head_count(heads)
    writer.add_head_count_kv(config.get("num_key_value_heads") or heads)
    writer.add_layer_norm_rms_eps(config.get("rms_norm_eps", 1e-6))
    writer.add_key_length(head_dim(config))
    writer.add_value_length(head_dim(config))
    writer.add_rope_dimension_count(head_dim(config))
    writer.add_vocab_size(config["vocab_size"])
    rope = rope_parameters(config)
    if rope.get("rope_theta") is not None:
        writer.add_rope_freq_base(float(rope["rope_theta"]))
    if rope.get("rope_type", rope.get("type")) == "linear":
        import gguf

        writer.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        writer.add_rope_scaling_factor(float(rope["factor"]))
    for key, method in family.extra_hparams:
        if config.get(key) is not None:
            getattr(writer, method)(config[key])
    writer.add_file_type(file_type)


def llama3_rope_factors(config: dict[str, Any]) -> np.ndarray | None:
    """Llama 3.1's rope scaling as llama.cpp reads it (``rope_freqs.weight``: each frequency is divided by its
    factor), or None for a model without it.

    Frequencies whose wavelength is shorter than ``original context / high_freq_factor`` keep their value, those
    longer than ``original context / low_freq_factor`` are divided by ``factor``, and those between are blended
    (transformers' ``_compute_llama3_parameters`` is the definition).
    """
    rope = rope_parameters(config)
    if rope.get("rope_type", rope.get("type")) != LLAMA3_ROPE:
        return None
    dim = head_dim(config)
    freqs = 1.0 / (float(rope.get("rope_theta", 10000.0)) ** (np.arange(0, dim, 2, dtype=np.float64) / dim))
    factor, low, high = rope.get("factor", 8.0), rope.get("low_freq_factor", 1.0), rope.get("high_freq_factor", 4.0)
    context = rope.get("original_max_position_embeddings", 8192)
    wavelengths = 2 * math.pi / freqs
    with np.errstate(divide="ignore", invalid="ignore"):  # high == low leaves no band to blend
        smooth = (context / wavelengths - low) / (high - low)
        blended = 1.0 / ((1 - smooth) / factor + smooth)
    factors = np.where(wavelengths < context / high, 1.0, np.where(wavelengths > context / low, factor, blended))
    return factors.astype(np.float32)
