"""What the machine can do, and the device-aware defaults that follow from it.

On a CPU, fp32 without gradient checkpointing is the right default (bf16 runs about 5x slower on CPUs without
bf16 units); on a GPU, bf16 where it exists, else fp16.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from engine.config import Problem, RunConfig
from engine.training.packages import installed
from engine.training.trackers import tracker_problems


@dataclass(frozen=True)
class Hardware:
    """The accelerator picture of this machine."""

    gpu_count: int
    bf16_supported: bool
    gpu_name: str | None = None
    flash_attn: bool = False  # flash-attn is installed (its kernels need a GPU)
    liger: bool = False  # liger-kernel is installed (Triton: GPU only)

    @property
    def has_gpu(self) -> bool:
        """Whether at least one CUDA device is usable."""
        return self.gpu_count > 0


CPU_ONLY = Hardware(gpu_count=0, bf16_supported=False)


@lru_cache(maxsize=1)
def detect_hardware() -> Hardware:
    """Probe torch for CUDA devices (imports torch, so call it only where training code runs)."""
    import torch

    if not torch.cuda.is_available():
        return CPU_ONLY
    return Hardware(
        gpu_count=torch.cuda.device_count(),
        bf16_supported=torch.cuda.is_bf16_supported(),
        gpu_name=torch.cuda.get_device_name(0),
        flash_attn=installed("flash_attn"),
        liger=installed("liger_kernel"),
    )


def resolve_device(config: RunConfig, hardware: Hardware) -> Literal["cpu", "cuda"]:
    """The device a run trains on."""
    if config.launch.device == "auto":
        return "cuda" if hardware.has_gpu else "cpu"
    return config.launch.device


def resolve_precision(config: RunConfig, hardware: Hardware) -> Literal["fp32", "bf16", "fp16"]:
    """The training precision: auto means fp32 on CPU, bf16 on GPUs with bf16, else fp16."""
    if config.train.precision != "auto":
        return config.train.precision
    if resolve_device(config, hardware) == "cpu":
        return "fp32"
    return "bf16" if hardware.bf16_supported else "fp16"


def resolve_dtype(choice: str, config: RunConfig, hardware: Hardware) -> str:
    """A dtype name for ``choice`` ('auto' follows the training precision)."""
    if choice != "auto":
        return choice
    return {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}[resolve_precision(config, hardware)]


def resolve_gradient_checkpointing(config: RunConfig, hardware: Hardware) -> bool:
    """Gradient checkpointing: auto turns it on only for quantized runs on a GPU, where memory is the limit."""
    choice = config.train.gradient_checkpointing
    if choice != "auto":
        return choice == "on"
    return resolve_device(config, hardware) == "cuda" and config.quantization.mode != "none"


def resolve_liger(config: RunConfig, hardware: Hardware) -> bool:
    """Liger's kernels: auto turns them on for a GPU run when liger-kernel is installed."""
    choice = config.train.liger_kernel
    if choice != "auto":
        return choice == "on"
    return resolve_device(config, hardware) == "cuda" and hardware.liger


def resolve_tf32(config: RunConfig, hardware: Hardware) -> bool | None:
    """TF32 matmuls for what stays in fp32 on a GPU that has them (the GPUs with bf16: Ampere and later); None
    leaves PyTorch's setting alone (on a CPU, and on older GPUs)."""
    return True if resolve_device(config, hardware) == "cuda" and hardware.bf16_supported else None


def hardware_problems(config: RunConfig, hardware: Hardware) -> list[Problem]:
    """Settings this machine cannot run, each naming the field to change."""
    problems: list[Problem] = []
    device = resolve_device(config, hardware)
    if device == "cuda" and not hardware.has_gpu:
        problems.append(Problem("launch.device", "cuda was asked for, but this machine has no usable GPU"))
    precision = config.train.precision
    if precision == "bf16" and not (device == "cuda" and hardware.bf16_supported):
        where = "this GPU" if device == "cuda" else "the CPU"
        problems.append(Problem("train.precision", f"bf16 needs hardware that has it; {where} does not (use auto)"))
    if precision == "fp16" and device == "cpu":
        problems.append(Problem("train.precision", "fp16 training needs a GPU; use fp32 (or auto) on the CPU"))
    if config.train.liger_kernel == "on" and not (device == "cuda" and hardware.liger):
        missing = "liger-kernel is not installed (pip install liger-kernel)" if device == "cuda" else "they need a GPU"
        problems.append(Problem("train.liger_kernel", f"Liger's kernels cannot run here: {missing} (use auto)"))
    if device == "cuda" and config.launch.num_processes > hardware.gpu_count:
        problems.append(
            Problem(
                "launch.num_processes",
                f"{config.launch.num_processes} processes need as many GPUs; this machine has {hardware.gpu_count}",
            )
        )
    return problems + tracker_problems(config)  # a tracker this machine lacks fails like missing hardware
