"""A decoder's shape from its config.json, and the parameter counts the memory estimate needs (standard library).

The shape is that of a LLaMA-style decoder: per layer q/k/v/o attention projections, a gate/up/down MLP and two
RMSNorms; token embeddings and an output head, tied or not.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

LAYER_PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
# peft's default LoRA targets (target_modules: auto) for the LLaMA-style model types; others fall back to q, v.
_PEFT_DEFAULT_TARGETS = {"q_proj", "v_proj"}
# bitsandbytes' NF4 / FP4 blocks: 64 weights share an absmax; double quantisation stores those absmax values
# in 8 bits, with an fp32 scale per 256 of them.
_BLOCK_4BIT = 64
_BLOCK_NESTED = 256


@dataclass(frozen=True)
class ModelShape:
    """The sizes of a LLaMA-style decoder."""

    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    tied: bool

    @property
    def q_dim(self) -> int:
        """Width of the queries (and of the attention output)."""
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        """Width of the keys and of the values."""
        return self.kv_heads * self.head_dim

    def projections(self) -> dict[str, tuple[int, int]]:
        """(in, out) features of each linear layer of one decoder layer."""
        h, q, kv, i = self.hidden, self.q_dim, self.kv_dim, self.intermediate
        return {
            "q_proj": (h, q),
            "k_proj": (h, kv),
            "v_proj": (h, kv),
            "o_proj": (q, h),
            "gate_proj": (h, i),
            "up_proj": (h, i),
            "down_proj": (i, h),
        }

    def projection_inputs(self) -> dict[str, int]:
        """Input features of each projection."""
        return {name: size[0] for name, size in self.projections().items()}

    @property
    def linear_parameters(self) -> int:
        """Weights of one layer's linear projections (what bitsandbytes quantizes)."""
        return sum(fan_in * fan_out for fan_in, fan_out in self.projections().values())

    @property
    def layer_parameters(self) -> int:
        """All weights of one decoder layer: projections and the two RMSNorms."""
        return self.linear_parameters + 2 * self.hidden

    @property
    def embedding_parameters(self) -> int:
        """Token embeddings plus the output head (once when they are tied)."""
        return self.vocab * self.hidden * (1 if self.tied else 2)

    @property
    def total_parameters(self) -> int:
        """Every weight of the model: layers, embeddings, head and the final norm."""
        return self.layers * self.layer_parameters + self.embedding_parameters + self.hidden


def read_shape(config: dict[str, Any]) -> ModelShape | None:
    """The shape from a config.json dict (a multimodal model's text_config when it has one); None when the
    hidden size, layer count or vocabulary is missing."""
    text = config.get("text_config")
    inner = text if isinstance(text, dict) else config
    hidden = inner.get("hidden_size") or inner.get("n_embd") or inner.get("d_model")
    layers = inner.get("num_hidden_layers") or inner.get("n_layer") or inner.get("num_layers")
    vocab = inner.get("vocab_size") or config.get("vocab_size")
    if not (hidden and layers and vocab):
        return None
    heads = inner.get("num_attention_heads") or inner.get("n_head") or 1
    kv_heads = inner.get("num_key_value_heads") or heads
    head_dim = inner.get("head_dim") or hidden // heads
    intermediate = inner.get("intermediate_size") or inner.get("n_inner") or 4 * hidden
    tied = bool(inner.get("tie_word_embeddings", config.get("tie_word_embeddings", False)))
    return ModelShape(
        int(hidden), int(layers), int(heads), int(kv_heads), int(head_dim), int(intermediate), int(vocab), tied
    )


def lora_targets(shape: ModelShape, target_modules: str | list[str]) -> frozenset[str]:
    """The layer projections LoRA adapts: auto is peft's default (q_proj, v_proj), all-linear every projection,
    a list the projections it names (by their last name part, as peft matches them)."""
    if target_modules == "auto":
        return frozenset(_PEFT_DEFAULT_TARGETS)
    if target_modules == "all-linear":
        return frozenset(LAYER_PROJECTIONS)
    names = [target_modules] if isinstance(target_modules, str) else target_modules
    return frozenset(name.rsplit(".", 1)[-1] for name in names) & frozenset(LAYER_PROJECTIONS)


def lora_parameters(shape: ModelShape, targets: Iterable[str], r: int, modules_to_save: Iterable[str] = ()) -> int:
    """Trainable parameters of a LoRA adapter: r × (in + out) per adapted projection and layer, plus full copies
    of ``modules_to_save`` (embed_tokens, lm_head)."""
    projections = shape.projections()
    per_layer = sum(r * sum(projections[name]) for name in targets if name in projections)
    saved = sum(shape.vocab * shape.hidden for name in modules_to_save if name in ("embed_tokens", "lm_head"))
    return shape.layers * per_layer + saved


def quantized_weight_bytes(shape: ModelShape, mode: str, double_quant: bool, weight_bytes: float) -> float:
    """Bytes of the base's weights: unquantized at ``weight_bytes`` each, or the layers' projections in 4 or 8
    bits while the embeddings, head and norms stay unquantized (in fp32: peft's prepare_model_for_kbit_training
    upcasts them for a QLoRA run)."""
    if mode == "none":
        return shape.total_parameters * weight_bytes
    quantized = shape.layers * shape.linear_parameters
    rest = (shape.total_parameters - quantized) * 4.0
    if mode == "8bit":  # int8 weights and an fp32 scale per output row
        rows = shape.layers * sum(fan_out for _, fan_out in shape.projections().values())
        return rest + quantized + rows * 4.0
    if double_quant:
        scales = quantized / _BLOCK_4BIT * (1 + 4 / _BLOCK_NESTED)
    else:
        scales = quantized / _BLOCK_4BIT * 4
    return rest + quantized / 2 + scales
