"""Padding-free batches and the attention kernel that reads them; which speed-ups a run takes on this machine.

A padding-free batch (TRL's ``padding_free``) is the batch's rows concatenated into one sequence, with
``position_ids`` restarting at every row and the rows' boundaries as ``cu_seq_lens_q`` / ``cu_seq_lens_k``. No token
is padding, so the linear layers, the LM head and the loss see only real tokens. Attention must not cross rows:

- ``flash_attention_2`` (GPU, fp16 / bf16, when flash-attn is installed) runs its varlen kernel on the boundaries.
- ``sdpa`` and ``eager`` get a block-diagonal mask that transformers 5 builds from the restarting position ids
  (only without a key-value cache: the trainer passes ``use_cache=False``). That is correct, but the kernel still
  computes the whole (tokens x tokens) square, masked blocks included: for four rows of 600 tokens, four times the
  attention of the rows alone, which on a CPU ate most of what the padding-free batch saved.
- ``sdpa_segments`` (this module, what ``auto`` picks for a padding-free run without flash-attn) calls PyTorch's
  ``scaled_dot_product_attention`` once per row, causal, on that row's slice. It is the varlen idea of
  flash-attn for any device; transformers has no such kernel for sdpa (its own mask path is the square above), so
  it is written here, as a function registered in transformers' ``AttentionInterface``. Batches without the
  boundaries (evaluation with padding, generation) go to transformers' own sdpa unchanged.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from engine.config import RunConfig

SEGMENTS = "sdpa_segments"
# Below this many tokens a padding-free batch goes to sdpa with transformers' block-diagonal mask: the masked
# square is small, and one kernel call beats one per row (the demo preset's 16 rows of ~25 tokens).
SEGMENTS_FROM_TOKENS = 512
# The methods whose trainer takes padding-free batches here: the others batch whole pairs or sampled answers.
PADDING_FREE_METHODS = ("sft",)


def installed(module: str) -> bool:
    """Whether a Python package can be imported (without importing it)."""
    return importlib.util.find_spec(module) is not None


def resolve_padding_free(config: RunConfig) -> bool:
    """Whether the run trains on padding-free batches: auto = on for sft, off for the other methods."""
    choice = config.train.padding_free
    if choice != "auto":
        return choice == "on"
    return config.method in PADDING_FREE_METHODS and not config.model.trust_remote_code


def resolve_attn_implementation(config: RunConfig, on_gpu: bool, half_precision: bool, flash_attn: bool) -> str | None:
    """The attention kernel to load the model with (None: transformers' own choice).

    A padding-free run with ``auto`` takes flash-attn's varlen kernel on a GPU in fp16 / bf16 when flash-attn is
    installed, else the per-row sdpa of this module; any other run leaves the choice to transformers.
    """
    chosen = config.model.attn_implementation
    if chosen != "auto":
        return chosen
    if not resolve_padding_free(config):
        return None
    return "flash_attention_2" if on_gpu and half_precision and flash_attn else SEGMENTS


def register_segment_attention() -> None:
    """Make ``attn_implementation="sdpa_segments"`` loadable (idempotent; imports torch and transformers)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

    AttentionInterface.register(SEGMENTS, segment_attention)
    # Batches with padding need sdpa's own mask; for padding-free ones the mask is built but not read.
    ALL_MASK_ATTENTION_FUNCTIONS.register(SEGMENTS, sdpa_mask)


def segment_attention(
    module: Any,
    query: Any,
    key: Any,
    value: Any,
    attention_mask: Any,
    dropout: float = 0.0,
    scaling: float | None = None,
    is_causal: bool | None = None,
    **kwargs: Any,
) -> tuple[Any, None]:
    """Causal sdpa on each row of a padding-free batch (rows given by ``cu_seq_lens_q``); any other batch goes to
    transformers' sdpa (with its block-diagonal mask for a short padding-free batch). Returns the attention output
    as (batch, tokens, heads, head_dim), as sdpa's does."""
    import torch
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    bounds = kwargs.get("cu_seq_lens_q")
    tokens = query.shape[2]
    if bounds is None or query.shape[0] != 1 or tokens != key.shape[2] or tokens < SEGMENTS_FROM_TOKENS:
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, is_causal=is_causal, **kwargs
        )
    edges = bounds.tolist()
    grouped = key.shape[1] != query.shape[1]  # grouped-query attention: fewer key / value heads
    dropout_p = dropout if module.training else 0.0
    rows = [
        torch.nn.functional.scaled_dot_product_attention(
            query[:, :, start:end],
            key[:, :, start:end],
            value[:, :, start:end],
            dropout_p=dropout_p,
            is_causal=True,
            scale=scaling,
            enable_gqa=grouped,
        )
        for start, end in zip(edges[:-1], edges[1:], strict=False)
        if end > start
    ]
    return torch.cat(rows, dim=2).transpose(1, 2).contiguous(), None
