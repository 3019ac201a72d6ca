"""The weights as GGUF tensors: llama.cpp's names, its row order for Q/K, its norm convention, quantized.

Reads the safetensors files of a saved model one tensor at a time (a merged model is saved first), so memory
holds one tensor beside the writer's queue, not two copies of the model.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from engine.export.gguf.architectures import Family, GgufError
from engine.export.gguf.hparams import llama3_rope_factors
from engine.export.gguf.quant_types import GGUF_TYPES

# Buffers that transformers may save but that llama.cpp computes itself.
SKIPPED_SUFFIXES = (".rotary_emb.inv_freq", ".attention.masked_bias", ".attention.bias")


def unpermute_rope_rows(weight: np.ndarray, heads: int) -> np.ndarray:
    """Reorder the rows of a Q or K projection (or its bias) from Hugging Face's rotary layout to llama.cpp's.

    Hugging Face's LLaMA applies rope to the two halves of each head (``rotate_half``); llama.cpp rotates
    neighbouring pairs. Within each head, row ``i`` of the first half and row ``i`` of the second half become
    rows ``2i`` and ``2i + 1``.
    """
    rows = weight.shape[0]
    split = weight.reshape(heads, 2, rows // heads // 2, *weight.shape[1:])
    return split.swapaxes(1, 2).reshape(weight.shape)


def _read_tensors(model_dir: Path) -> Iterator[tuple[str, Callable[[], Any]]]:
    """(name, loader) for every tensor of the model's safetensors files, in file order."""
    from safetensors import safe_open

    files = sorted(Path(model_dir).glob("*.safetensors"))
    if not files:
        raise GgufError(f"no safetensors weights in {model_dir}")
    for path in files:
        handle = safe_open(str(path), framework="pt")
        for name in handle.keys():  # noqa: SIM118 (a safetensors handle is not a dict)
            yield name, (lambda handle=handle, name=name: handle.get_tensor(name))


def quantize_tensor(data: np.ndarray, name: str, qtype_name: str) -> tuple[np.ndarray, Any]:
    """The tensor in the target type; 1-D tensors and norms in F32 (llama.cpp's kernels expect that)."""
    import gguf

    types = gguf.GGMLQuantizationType
    qtype = types[qtype_name]
    if data.ndim <= 1 or name.endswith("_norm.weight"):
        qtype = types.F32
    try:
        return gguf.quants.quantize(data, qtype), qtype
    except gguf.QuantError:  # rows not a whole number of blocks (e.g. 688 = 21.5 x 32): F16, as llama.cpp does
        return gguf.quants.quantize(data, types.F16), types.F16


def add_tensors(
    writer: Any,
    model_dir: Path,
    config: dict[str, Any],
    family: Family,
    gguf_type: str,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, int]:
    """Map, convert and queue every tensor of ``model_dir`` on ``writer``; returns how many of each type."""
    import gguf
    import torch

    layers = config["num_hidden_layers"]
    heads = config["num_attention_heads"]
    kv_heads = config.get("num_key_value_heads") or heads
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH[family.arch.upper()], layers)
    qtype_name = GGUF_TYPES[gguf_type][0]
    tensors = list(_read_tensors(model_dir))
    counts: dict[str, int] = {}
    for number, (name, load) in enumerate(tensors, start=1):
        if name.endswith(SKIPPED_SUFFIXES):
            continue
        if name == "lm_head.weight" and config.get("tie_word_embeddings"):
            continue  # llama.cpp reuses token_embd for the output when output.weight is absent
        gguf_name = names.get_name(name, try_suffixes=(".weight", ".bias"))
        if gguf_name is None:
            raise GgufError(f"the tensor {name} has no GGUF name for the {family.arch} architecture")
        data = load().to(torch.float32).numpy()
        if family.permute_qk and name.endswith(("q_proj.weight", "q_proj.bias")):
            data = unpermute_rope_rows(data, heads)
        elif family.permute_qk and name.endswith(("k_proj.weight", "k_proj.bias")):
            data = unpermute_rope_rows(data, kv_heads)
        if family.norm_shift and name.endswith("norm.weight"):
            data = data + np.float32(family.norm_shift)
        data, qtype = quantize_tensor(data, gguf_name, qtype_name)
        writer.add_tensor(gguf_name, data, raw_dtype=qtype)
        counts[qtype.name] = counts.get(qtype.name, 0) + 1
        if progress is not None:
            progress(number, len(tensors))
    factors = llama3_rope_factors(config)
    if factors is not None:  # not a tensor of the checkpoint: llama.cpp's rope reads its scaling from it
        writer.add_tensor(gguf.TENSOR_NAMES[gguf.MODEL_TENSOR.ROPE_FREQS] + ".weight", factors)
        counts["F32"] = counts.get("F32", 0) + 1
    return counts
