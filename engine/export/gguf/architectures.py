"""Which model families a GGUF export writes, and the check that refuses the others before any work starts.

Standard library only: the export's plan check (engine.export.exports) calls ``check_gguf_source`` while the
studio waits, so nothing here loads a model or imports an ML library. The rules follow what llama.cpp's own
converter does for each family (its ``convert_hf_to_gguf.py``), written here for the families we support.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.store.paths import find_local_path


class GgufError(ValueError):
    """A model this export cannot write as GGUF; the message names the reason."""


@dataclass(frozen=True)
class Family:
    """How one Hugging Face architecture becomes a llama.cpp architecture."""

    arch: str  # llama.cpp's name for it (general.architecture), also gguf.MODEL_ARCH's member in upper case
    # LLaMA-style checkpoints store Q and K with the rotary halves split per head; llama.cpp's rope reads them
    # interleaved, so its converter reorders those rows (and we do the same).
    permute_qk: bool = False
    # Gemma's RMSNorm multiplies by (1 + weight); llama.cpp multiplies by the stored weight, so 1 is added.
    norm_shift: float = 0.0
    # config keys written as extra metadata: (config key, name of the GGUFWriter.add_... method)
    extra_hparams: tuple[tuple[str, str], ...] = ()


FAMILIES: dict[str, Family] = {
    "LlamaForCausalLM": Family("llama", permute_qk=True),
    "MistralForCausalLM": Family("llama", permute_qk=True),  # llama.cpp runs Mistral 7B as a llama
    "Qwen2ForCausalLM": Family("qwen2"),
    "Qwen3ForCausalLM": Family("qwen3"),
    "GemmaForCausalLM": Family("gemma", norm_shift=1.0),
    "Gemma2ForCausalLM": Family(
        "gemma2",
        norm_shift=1.0,
        extra_hparams=(
            ("attn_logit_softcapping", "add_attn_logit_softcapping"),
            ("final_logit_softcapping", "add_final_logit_softcapping"),
            ("sliding_window", "add_sliding_window"),
        ),
    ),
}
# Rope variants llama.cpp reads from metadata; "llama3" (Llama 3.1 and later) also takes a rope_freqs tensor,
# which is written for the llama family only (the only one whose checkpoints use it).
ROPE_TYPES = (None, "default", "linear")
LLAMA3_ROPE = "llama3"


def supported_architectures() -> str:
    """The supported Hugging Face architecture names, for messages and help text."""
    return ", ".join(sorted(FAMILIES))


def family_of(config: dict[str, Any]) -> Family:
    """The family of a model's ``config.json``; GgufError naming the architecture when it is not supported."""
    names = config.get("architectures") or [f"model_type {config.get('model_type', 'unknown')!r}"]
    family = FAMILIES.get(names[0])
    if family is None:
        raise GgufError(
            f"GGUF export does not support the architecture {names[0]}; supported: {supported_architectures()}"
        )
    return family


def rope_parameters(config: dict[str, Any]) -> dict[str, Any]:
    """The rope settings of a config, in transformers 5's ``rope_parameters`` or the older top-level keys."""
    rope = dict(config.get("rope_parameters") or config.get("rope_scaling") or {})
    if "rope_theta" not in rope and "rope_theta" in config:
        rope["rope_theta"] = config["rope_theta"]
    return rope


def check_model_config(config: dict[str, Any]) -> Family:
    """Refuse an unsupported architecture or rope variant; returns the family."""
    family = family_of(config)
    rope_type = rope_parameters(config).get("rope_type", rope_parameters(config).get("type"))
    if rope_type not in ROPE_TYPES and not (rope_type == LLAMA3_ROPE and family.arch == "llama"):
        raise GgufError(f"GGUF export does not support the rope type {rope_type!r} of this model (only plain rope)")
    return family


def check_tokenizer_files(folder: Path) -> None:
    """Refuse a tokenizer this export cannot carry: it reads ``tokenizer.json`` (byte-level BPE or a
    SentencePiece model in its byte-fallback BPE form), not a slow tokenizer's files alone."""
    path = Path(folder) / "tokenizer.json"
    if not path.is_file():
        raise GgufError(f"GGUF export needs the fast tokenizer's tokenizer.json, which {folder} does not hold")
    model = json.loads(path.read_text(encoding="utf-8")).get("model", {})
    if model.get("type") != "BPE":
        raise GgufError(f"GGUF export supports BPE tokenizers, not the {model.get('type')!r} tokenizer of {folder}")


def base_config(name_or_path: str, revision: str | None = None) -> dict[str, Any]:
    """The ``config.json`` of a base model: a local folder's, else the hub's (from its cache when offline)."""
    local = find_local_path(name_or_path)
    if local is not None:
        path = local / "config.json"
    else:
        from huggingface_hub import hf_hub_download  # only for hub models; a small file, cached

        try:
            path = Path(hf_hub_download(name_or_path, "config.json", revision=revision))
        except Exception as exc:  # offline and not cached, a gated repo, a typo: the export cannot start
            raise GgufError(f"cannot read the config of {name_or_path}: {str(exc).splitlines()[0]}") from None
    if not path.is_file():
        raise GgufError(f"{path} is missing: GGUF export reads the model's architecture from it")
    return json.loads(path.read_text(encoding="utf-8"))


def check_gguf_source(
    weights_path: Path, is_adapter: bool, base_name: str, revision: str | None = None, lora: bool = False
) -> Family:
    """The plan check of a GGUF export: the architecture, rope and tokenizer (or, for the adapter alone,
    ``lora``, that llama.cpp's adapter format holds it), before any weights are loaded."""
    config = base_config(base_name, revision) if is_adapter else base_config(str(weights_path))
    family = check_model_config(config)
    if lora:
        if not is_adapter:
            raise GgufError("this run trained the whole model, so it has no LoRA adapter; export the gguf kind")
        check_lora_adapter(weights_path)
    else:
        check_tokenizer_files(weights_path)
    return family


def check_lora_adapter(adapter_dir: Path) -> dict[str, Any]:
    """The adapter's config, or GgufError for an adapter llama.cpp's format cannot hold (DoRA, per-module
    ranks, fully trained modules such as embeddings)."""
    path = Path(adapter_dir) / "adapter_config.json"
    if not path.is_file():
        raise GgufError(f"{adapter_dir} holds no adapter_config.json: a GGUF LoRA export needs a LoRA adapter")
    config = json.loads(path.read_text(encoding="utf-8"))
    if config.get("peft_type", "LORA") != "LORA":
        raise GgufError(f"a GGUF LoRA adapter holds LoRA only, not {config['peft_type']}")
    for key, what in (
        ("use_dora", "DoRA"),
        ("rank_pattern", "per-module ranks"),
        ("alpha_pattern", "per-module alphas"),
        ("modules_to_save", "fully trained modules"),
    ):
        if config.get(key):
            raise GgufError(f"llama.cpp's LoRA adapter format cannot hold {what} ({key}); export the gguf kind")
    return config
