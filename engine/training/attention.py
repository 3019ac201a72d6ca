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
  ``scaled_dot_product_attention`` once per row, causal, on that row's slice (or, for many short rows, once on the
  rows padded to the longest, which costs less than a call each). It is the varlen idea of
  flash-attn for any device; transformers has no such kernel for sdpa (its own mask path is the square above), so
  it is written here, as a function registered in transformers' ``AttentionInterface``. Batches without the
  boundaries (evaluation with padding, generation) go to transformers' own sdpa unchanged.
- ``flex_attention`` (GPU only, asked for by name) is PyTorch's FlexAttention: transformers 5 builds a document mask
  from the restarting position ids, so each row attends to itself (what torchtune uses for packed rows).

Which kernel ``scaled_dot_product_attention`` itself picks on a GPU is the engine's choice too
(``resolve_cudnn_attention``): not cuDNN's, which plans every new shape on the CPU.
"""

from __future__ import annotations

from typing import Any

from engine.config import RunConfig
from engine.training.hardware import Hardware, resolve_device, resolve_precision
from engine.training.methods import method_of
from engine.training.modality import is_vision_model

SEGMENTS = "sdpa_segments"
# What one extra kernel call costs, as the attention of a row of this many tokens: many short rows (the demo
# preset's 16 rows of ~25 tokens) are cheaper in one call on the rows padded to the longest than in one call each.
ROW_CALL_TOKENS = 64


def resolve_padding_free(config: RunConfig, hardware: Hardware) -> bool:
    """Whether the run trains on padding-free batches. auto: on for sft on a CPU, and on a GPU only where
    flash-attn's varlen kernel takes them (fp16 / bf16); off for the other methods.

    On a GPU without flash-attn the per-row sdpa calls of ``sdpa_segments`` went to cuDNN, which planned every new
    row length on the CPU (about 15 ms a call): 0.18x the tokens/s of a bare Trainer on an H100, and slower than
    padded batches there (benchmarks/README.md, GPU figures). cuDNN is now left out (``resolve_cudnn_attention``);
    whether per-row attention then beats padded batches on a GPU is measured by benchmarks/gpu_check.sh
    (engine-free against engine), and until it is, auto keeps padded batches there.
    """
    choice = config.train.padding_free
    if choice != "auto":
        return choice == "on"
    # Only methods whose rows the engine batches take padding-free batches (Method.rows_batched).
    if not method_of(config).rows_batched or config.model.trust_remote_code or is_vision_model(config):
        return False  # a vision-language model's batches are TRL's collator's, padded
    return resolve_device(config, hardware) == "cpu" or _flash_varlen(config, hardware)


def resolve_attn_implementation(config: RunConfig, hardware: Hardware) -> str | None:
    """The attention kernel to load the model with (None: transformers' own choice).

    A padding-free run with ``auto`` takes flash-attn's varlen kernel on a GPU in fp16 / bf16 when flash-attn is
    installed, else the per-row sdpa of this module; any other run leaves the choice to transformers.
    """
    chosen = config.model.attn_implementation
    if chosen != "auto":
        return chosen
    if not resolve_padding_free(config, hardware):
        return None
    return "flash_attention_2" if _flash_varlen(config, hardware) else SEGMENTS


def _flash_varlen(config: RunConfig, hardware: Hardware) -> bool:
    """Whether flash-attn's varlen kernel can run this run: a GPU, fp16 / bf16, flash-attn installed."""
    on_gpu = resolve_device(config, hardware) == "cuda"
    return on_gpu and hardware.flash_attn and resolve_precision(config, hardware) != "fp32"


def resolve_cudnn_attention(config: RunConfig, hardware: Hardware) -> bool | None:
    """Whether ``scaled_dot_product_attention`` may pick cuDNN's kernel in this run's processes; None where there
    is nothing to choose (a CPU run: no cuDNN). auto (``model.sdpa_backends``) leaves cuDNN out on a GPU, so sdpa
    picks among flash, memory-efficient and math.

    cuDNN's attention plans every new (batch, length) shape on the CPU: 62-64 ms a call against 0.35-0.55 ms of GPU
    time on an H200, so with padded batches of varied length it cost ~1.5 s a step on a 12-layer model. An 87M
    LLaMA with LoRA went from 19,034 to 76,891 non-padding tokens/s with flash and memory-efficient only, and the
    engine from 12,033 to 48,287 (shared/STACK.md, 2026-11-27).
    """
    if resolve_device(config, hardware) != "cuda":
        return None
    return config.model.sdpa_backends == "all"


def apply_sdpa_backends(config: RunConfig, hardware: Hardware) -> None:
    """Set this process's sdpa backends as ``resolve_cudnn_attention`` decides (imports torch; a CPU run: nothing).

    A process-wide setting, made where the model is loaded (``modeling.load_model``, which training, Chat and
    Evaluate all load through): every sdpa call of the process follows it, the training forward, the backward
    (its kernel is the one the forward picked, recorded in the autograd graph), evaluation and generation (GRPO,
    Chat). ``torch.nn.attention.sdpa_kernel`` sets the same process-wide flags and only restores them on exit, so
    as a context it would add nothing but the risk of a call made outside it. It is set both ways, since a warm
    process may load a second run's model after the first.
    """
    allowed = resolve_cudnn_attention(config, hardware)
    if allowed is None:
        return
    import torch

    torch.backends.cuda.enable_cudnn_sdp(allowed)


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
    """Causal sdpa within each row of a padding-free batch (rows given by ``cu_seq_lens_q``): one call per row, or,
    when that is cheaper (many short rows), one call on the rows padded to the longest; any other batch goes to
    transformers' sdpa. Returns the attention output as (batch, tokens, heads, head_dim), as sdpa's does."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    bounds = kwargs.get("cu_seq_lens_q")
    if bounds is None or query.shape[0] != 1 or query.shape[2] != key.shape[2]:
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, is_causal=is_causal, **kwargs
        )
    edges = bounds.tolist()
    rows = [(start, end) for start, end in zip(edges[:-1], edges[1:], strict=False) if end > start]
    options = {
        "dropout_p": dropout if module.training else 0.0,
        "scale": scaling,
        "enable_gqa": key.shape[1] != query.shape[1],  # grouped-query attention: fewer key / value heads
    }
    longest = max(end - start for start, end in rows)
    one_call = len(rows) * longest**2
    per_row = sum((end - start) ** 2 for start, end in rows) + len(rows) * ROW_CALL_TOKENS**2
    attend = _attend_padded if one_call <= per_row else _attend_per_row
    return attend(query, key, value, rows, longest, options).transpose(1, 2).contiguous(), None


def _attend_per_row(query: Any, key: Any, value: Any, rows: list[tuple[int, int]], longest: int, options: dict) -> Any:
    """Causal sdpa on each row's slice of the (1, heads, tokens, head_dim) sequence."""
    import torch

    parts = [
        torch.nn.functional.scaled_dot_product_attention(
            query[:, :, start:end], key[:, :, start:end], value[:, :, start:end], is_causal=True, **options
        )
        for start, end in rows
    ]
    return torch.cat(parts, dim=2)


def _attend_padded(query: Any, key: Any, value: Any, rows: list[tuple[int, int]], longest: int, options: dict) -> Any:
    """The rows scattered into a (rows, heads, longest, head_dim) batch, padded at the right, one causal sdpa call,
    and gathered back. Causal attention never looks right, so the padding changes no real token's output."""
    import torch

    slots = torch.cat([torch.arange(end - start) + index * longest for index, (start, end) in enumerate(rows)])
    slots = slots.to(query.device)
    tokens = query.shape[2]

    def padded(states: Any) -> Any:
        heads, dim = states.shape[1], states.shape[3]
        flat = states.new_zeros(heads, len(rows) * longest, dim).index_copy(1, slots, states[0, :, :tokens])
        return flat.view(heads, len(rows), longest, dim).transpose(0, 1)

    out = torch.nn.functional.scaled_dot_product_attention(
        padded(query), padded(key), padded(value), is_causal=True, **options
    )
    return out.transpose(0, 1).reshape(out.shape[1], -1, out.shape[3])[:, slots].unsqueeze(0)
