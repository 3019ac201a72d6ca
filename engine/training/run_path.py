"""The path a run takes on this machine, in one line: device, weights and autocast, attention kernel, the kernels
sdpa may pick, padding-free batches, Liger's kernels (and why), TF32 and gradient checkpointing.

The engine's own resolvers decide each part (the same calls that load the model and build the training arguments),
so the line says what the run does. The worker prints it to train.log before the first step; the benchmarks print
it for every arm (benchmarks/throughput_real.py, memory_estimate.py). Light: no torch.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.config import RunConfig
from engine.training.attention import resolve_attn_implementation, resolve_cudnn_attention, resolve_padding_free
from engine.training.hardware import (
    Hardware,
    checkpointing_kwargs,
    liger_decision,
    resolve_device,
    resolve_dtype,
    resolve_gradient_checkpointing,
    resolve_precision,
    resolve_tf32,
)

DEFAULT_ATTENTION = "transformers' default (sdpa)"


@dataclass(frozen=True)
class RunPath:
    """What a run's training takes on this machine."""

    device: str
    weights: str  # the weights' dtype, e.g. bfloat16
    precision: str  # fp32, bf16 or fp16 (autocast when not fp32)
    attention: str | None  # the attn_implementation asked for; None: transformers' choice
    cudnn_attention: bool | None  # whether sdpa may pick cuDNN; None: left as PyTorch has it (a CPU has no cuDNN)
    padding_free: bool
    liger: bool
    tf32: bool | None  # None: PyTorch's setting left alone
    checkpointing: bool
    liger_reason: str = ""
    reentrant: bool = False  # checkpointed layers recomputed reentrantly (an 8-bit base: hardware.checkpointing_kwargs)

    def line(self) -> str:
        """The path in one line, e.g. ``cuda, bfloat16 weights, bf16 autocast, attention ..., sdpa without cuDNN,
        padding-free off, liger off (hidden size 768 < 2048), tf32 on, gradient checkpointing off``."""
        autocast = "" if self.precision == "fp32" else f", {self.precision} autocast"
        liger = ("on" if self.liger else "off") + (f" ({self.liger_reason})" if self.liger_reason else "")
        return (
            f"{self.device}, {self.weights} weights{autocast}, attention {self.attention or DEFAULT_ATTENTION}, "
            f"{self.sdpa_text()}, padding-free {_on(self.padding_free)}, liger {liger}, tf32 {_tri(self.tf32)}, "
            f"gradient checkpointing {_on(self.checkpointing)}"
            + (" (reentrant, for the 8-bit base)" if self.checkpointing and self.reentrant else "")
        )

    def sdpa_text(self) -> str:
        """Which kernels scaled_dot_product_attention may pick."""
        if self.cudnn_attention is None:
            return "sdpa backends untouched" + (" (a CPU has no cuDNN)" if self.device == "cpu" else "")
        return "sdpa with cuDNN" if self.cudnn_attention else "sdpa without cuDNN (flash, efficient, math)"


def resolve_run_path(config: RunConfig, hardware: Hardware) -> RunPath:
    """The path ``config`` takes on ``hardware``, as the engine's resolvers decide it."""
    liger, why = liger_decision(config, hardware)
    return RunPath(
        device=resolve_device(config, hardware),
        weights=resolve_dtype(config.model.dtype, config, hardware),
        precision=resolve_precision(config, hardware),
        attention=resolve_attn_implementation(config, hardware),
        cudnn_attention=resolve_cudnn_attention(config, hardware),
        padding_free=resolve_padding_free(config, hardware),
        liger=liger,
        tf32=resolve_tf32(config, hardware),
        checkpointing=resolve_gradient_checkpointing(config, hardware),
        liger_reason=why,
        reentrant=checkpointing_kwargs(config)["use_reentrant"],
    )


def _on(flag: bool) -> str:
    return "on" if flag else "off"


def _tri(flag: bool | None) -> str:
    return "untouched" if flag is None else _on(flag)
