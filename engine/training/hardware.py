"""What the machine can do, and the device-aware defaults that follow from it.

On a CPU, fp32 without gradient checkpointing is the right default (bf16 runs about 5x slower on CPUs without
bf16 units); on a GPU, bf16 where it exists, else fp16.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from engine.config import Problem, RunConfig


@dataclass(frozen=True)
class Hardware:
    """The accelerator picture of this machine."""

    gpu_count: int
    bf16_supported: bool
    gpu_name: str | None = None

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
    if device == "cuda" and config.launch.num_processes > hardware.gpu_count:
        problems.append(
            Problem(
                "launch.num_processes",
                f"{config.launch.num_processes} processes need as many GPUs; this machine has {hardware.gpu_count}",
            )
        )
    return problems
