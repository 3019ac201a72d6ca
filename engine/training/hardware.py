"""What the machine can do, and the device-aware defaults that follow from it.

On a CPU, fp32 without gradient checkpointing is the right default (bf16 runs about 5x slower on CPUs without
bf16 units); on a GPU, bf16 where it exists, else fp16.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Literal

from engine.config import Problem, RunConfig
from engine.store.paths import is_hub_id, resolve_model_source
from engine.training.memory_shape import read_shape
from engine.training.packages import installed
from engine.training.trackers import tracker_problems

# Liger's kernels (RMSNorm, RoPE, SwiGLU: TRL 1.16's SFTTrainer keeps Liger's fused loss off) pay for their launch
# and Triton overhead only on wide layers: at hidden size 768 (an 87M LLaMA, LoRA, bf16, H200) they trained at
# 0.80x the tokens/s without them (benchmarks/README.md, GPU figures). 2048 is a ~1B LLaMA's width; whether they
# win there is pending (benchmarks/gpu_check.sh measures engine against engine-no-liger at 1B): this constant is
# the one place to move when it is measured.
LIGER_MIN_HIDDEN_SIZE = 2048

# What each of hardware_problems' refusals says, by name, with ``{placeholders}`` for the counts (the studio says it
# again in the visitor's language: studio.i18n.problems, keys ``rule.<name>``). A refusal that reads two ways (this
# GPU or the CPU) has a template for each, so no value is a word to translate.
HARDWARE_MESSAGES = {
    "cuda_without_gpu": "cuda was asked for, but this machine has no usable GPU",
    "bf16_on_this_gpu": "bf16 needs hardware that has it; this GPU does not (use auto)",
    "bf16_on_cpu": "bf16 needs hardware that has it; the CPU does not (use auto)",
    "fp16_on_cpu": "fp16 training needs a GPU; use fp32 (or auto) on the CPU",
    "liger_without_gpu": "Liger's kernels cannot run here: they need a GPU (use auto)",
    "liger_not_installed": "Liger's kernels cannot run here: liger-kernel is not installed (pip install liger-kernel) "
    "(use auto)",
    "flex_attention_on_cpu": "flex_attention cannot train on the CPU (it has no backward there)",
    "processes_without_gpus": "{processes} processes need as many GPUs; this machine has {gpus}",
}


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


def checkpointing_kwargs(config: RunConfig) -> dict[str, bool]:
    """How checkpointed layers are recomputed: non-reentrant, except over an 8-bit base.

    bitsandbytes' int8 matmul keeps its input as an attribute of its autograd context (``ctx.tensors`` on CUDA,
    ``ctx.A`` on a CPU), out of reach of the saved-tensor hooks that non-reentrant checkpointing drops activations
    with: every quantized projection's input then stays alive through the whole forward (measured on the ~100M
    model: 204 MiB per 1,024 tokens in fp32; the 8-bit QLoRA row of benchmarks/memory_estimate.py at 0.67 on an H100
    and an H200). A reentrant checkpoint runs the first forward without a graph, so no context is kept at all.
    """
    return {"use_reentrant": config.quantization.mode == "8bit"}


def resolve_liger(config: RunConfig, hardware: Hardware) -> bool:
    """Liger's kernels: auto turns them on for a GPU run when liger-kernel is installed and the model is at least
    ``LIGER_MIN_HIDDEN_SIZE`` wide (liger_decision says why)."""
    return liger_decision(config, hardware)[0]


def liger_decision(config: RunConfig, hardware: Hardware) -> tuple[bool, str]:
    """Whether the run takes Liger's kernels, and the reason in a few words (shown in the run's path line)."""
    choice = config.train.liger_kernel
    if choice != "auto":
        return choice == "on", f"train.liger_kernel {choice}"
    if resolve_device(config, hardware) != "cuda":
        return False, "they need a GPU"
    if not hardware.liger:
        return False, "liger-kernel not installed"
    hidden = model_hidden_size(config)
    if hidden is None:
        return False, "the model's hidden size is not known"
    wide = hidden >= LIGER_MIN_HIDDEN_SIZE
    return wide, f"hidden size {hidden} {'>=' if wide else '<'} {LIGER_MIN_HIDDEN_SIZE}"


def model_hidden_size(config: RunConfig) -> int | None:
    """The base model's hidden size, read from its config.json without loading it: a local directory's, or a hub
    model's in the local cache (a run has downloaded it by the time its training arguments are built); None when
    there is no such file or it gives no hidden size."""
    source = resolve_model_source(config.model.name_or_path)
    path: object = Path(source) / "config.json"
    if not Path(source).is_dir() and is_hub_id(source):
        from huggingface_hub import try_to_load_from_cache

        path = try_to_load_from_cache(source, "config.json", revision=config.model.revision)
    if not isinstance(path, (str, Path)) or not Path(path).is_file():  # not cached: None or a "no such file" mark
        return None
    try:
        shape = read_shape(json.loads(Path(path).read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError, AttributeError):
        return None
    return shape.hidden if shape else None


def resolve_tf32(config: RunConfig, hardware: Hardware) -> bool | None:
    """TF32 matmuls for what stays in fp32 on a GPU that has them (the GPUs with bf16: Ampere and later); None
    leaves PyTorch's setting alone (on a CPU, and on older GPUs)."""
    return True if resolve_device(config, hardware) == "cuda" and hardware.bf16_supported else None


def hardware_problems(config: RunConfig, hardware: Hardware) -> list[Problem]:
    """Settings this machine cannot run, each naming the field to change."""
    problems: list[Problem] = []
    device = resolve_device(config, hardware)
    if device == "cuda" and not hardware.has_gpu:
        problems.append(Problem("launch.device", HARDWARE_MESSAGES["cuda_without_gpu"]))
    precision = config.train.precision
    if precision == "bf16" and not (device == "cuda" and hardware.bf16_supported):
        unable = "bf16_on_this_gpu" if device == "cuda" else "bf16_on_cpu"
        problems.append(Problem("train.precision", HARDWARE_MESSAGES[unable]))
    if precision == "fp16" and device == "cpu":
        problems.append(Problem("train.precision", HARDWARE_MESSAGES["fp16_on_cpu"]))
    if config.train.liger_kernel == "on" and not (device == "cuda" and hardware.liger):
        missing = "liger_not_installed" if device == "cuda" else "liger_without_gpu"
        problems.append(Problem("train.liger_kernel", HARDWARE_MESSAGES[missing]))
    if config.model.attn_implementation == "flex_attention" and device == "cpu":
        problems.append(Problem("model.attn_implementation", HARDWARE_MESSAGES["flex_attention_on_cpu"]))
    if device == "cuda" and config.launch.num_processes > hardware.gpu_count:
        words = HARDWARE_MESSAGES["processes_without_gpus"]
        problems.append(
            Problem(
                "launch.num_processes", words.format(processes=config.launch.num_processes, gpus=hardware.gpu_count)
            )
        )
    return problems + tracker_problems(config)  # a tracker this machine lacks fails like missing hardware
