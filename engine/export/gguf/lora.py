"""A LoRA adapter alone as a GGUF adapter file, for llama.cpp's ``--lora`` (and Ollama's ``ADAPTER``).

llama.cpp's adapter format: ``general.type = "adapter"``, ``adapter.type = "lora"``, ``adapter.lora.alpha``, and
for each adapted weight of the base ``<gguf name>.lora_a`` (rank x inputs) and ``<gguf name>.lora_b`` (outputs x
rank). llama.cpp scales the update by alpha / rank, as peft does; an rsLoRA adapter (alpha / sqrt(rank)) is
written with the alpha that gives the same scale. The base must be loaded from a GGUF file of the same model.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from engine.export.gguf.architectures import Family, GgufError, check_lora_adapter
from engine.export.gguf.quant_types import GGUF_TYPES


def lora_alpha(config: dict[str, Any]) -> float:
    """The alpha llama.cpp needs to scale the update as peft does."""
    alpha, rank = float(config["lora_alpha"]), int(config["r"])
    return alpha * math.sqrt(rank) if config.get("use_rslora") else alpha


def write_lora_gguf(adapter_dir: Path, base: dict[str, Any], family: Family, out_path: Path, gguf_type: str) -> int:
    """Write the adapter in ``adapter_dir`` (on a base with config ``base``) to ``out_path``; returns the
    number of adapted weights."""
    import gguf
    import torch
    from safetensors.torch import load_file

    from engine.export.gguf.tensors import quantize_tensor, unpermute_rope_rows

    config = check_lora_adapter(adapter_dir)
    tensors = load_file(str(Path(adapter_dir) / "adapter_model.safetensors"))
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH[family.arch.upper()], base["num_hidden_layers"])
    heads = base["num_attention_heads"]
    kv_heads = base.get("num_key_value_heads") or heads
    pairs: dict[str, dict[str, Any]] = {}
    for name, tensor in tensors.items():
        if "lora_embedding" in name:
            raise GgufError("the adapter trains the token embeddings, which a GGUF LoRA adapter cannot hold here")
        for part in ("lora_A", "lora_B"):
            if f".{part}." in name:
                # base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight -> model.layers.0.self_attn.q_proj
                module = name.removeprefix("base_model.model.").split(f".{part}.")[0]
                pairs.setdefault(module, {})[part] = tensor.to(torch.float32).numpy()
    writer = gguf.GGUFWriter(str(out_path), family.arch)
    writer.add_type(gguf.GGUFType.ADAPTER)
    writer.add_string(gguf.Keys.Adapter.TYPE, "lora")
    writer.add_float32(gguf.Keys.Adapter.LORA_ALPHA, lora_alpha(config))
    for module, pair in sorted(pairs.items()):
        gguf_name = names.get_name(f"{module}.weight", try_suffixes=(".weight",))
        if gguf_name is None or set(pair) != {"lora_A", "lora_B"}:
            raise GgufError(f"the adapter's module {module} has no GGUF counterpart for the {family.arch} architecture")
        lora_b = pair["lora_B"]
        # The base's Q/K rows are reordered for llama.cpp's rope; the update's output rows are B's rows.
        if family.permute_qk and module.endswith("q_proj"):
            lora_b = unpermute_rope_rows(lora_b, heads)
        elif family.permute_qk and module.endswith("k_proj"):
            lora_b = unpermute_rope_rows(lora_b, kv_heads)
        for suffix, data in ((".lora_a", pair["lora_A"]), (".lora_b", lora_b)):
            data, qtype = quantize_tensor(data, gguf_name + suffix, GGUF_TYPES[gguf_type][0])
            writer.add_tensor(gguf_name + suffix, data, raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return len(pairs)
