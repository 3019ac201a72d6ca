"""A rough memory estimate for a run: weights + gradients + optimizer state + activations.

It is deliberately simple (a planning aid, not a promise): the numbers leave out the CUDA context, allocator
fragmentation and temporary buffers, which add a few hundred MB to a GB on a GPU.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Bytes of optimizer state per trainable parameter (fp32 moments unless the optimizer is 8-bit).
_OPTIMIZER_BYTES = {
    "adamw_torch": 8,
    "adamw_torch_fused": 8,
    "paged_adamw_32bit": 8,
    "adamw_bnb_8bit": 2,
    "paged_adamw_8bit": 2,
    "lion_8bit": 1,
    "paged_lion_8bit": 1,
    "adafactor": 4,  # factored second moments: far less in practice, 4 keeps the estimate on the safe side
    "sgd": 0,
}
# Activation bytes per token, hidden unit and layer for 16-bit training (Korthikanti et al. 2022, without the
# attention-score term that fused attention kernels avoid); fp32 doubles it.
ACTIVATION_BYTES_16BIT = 34


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes each part of training needs."""

    weights: float
    gradients: float
    optimizer: float
    activations: float | None  # None when the model's shape is unknown (a hub id without a local config)

    @property
    def total(self) -> float:
        """The sum of the parts (activations count as 0 when unknown)."""
        return self.weights + self.gradients + self.optimizer + (self.activations or 0)

    def lines(self) -> list[str]:
        """A short breakdown for the studio."""
        activations = format_bytes(self.activations) if self.activations is not None else "unknown (no config.json)"
        return [
            f"weights {format_bytes(self.weights)}",
            f"gradients {format_bytes(self.gradients)}",
            f"optimizer state {format_bytes(self.optimizer)}",
            f"activations {activations}",
            f"total ≈ {format_bytes(self.total)}",
        ]


def format_bytes(count: float) -> str:
    """1536 -> '1.5 KB' (powers of 1024)."""
    for unit in ("B", "KB", "MB", "GB"):
        if abs(count) < 1024:
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    return f"{count:.1f} TB"


def weight_bytes_per_param(dtype: str, quantization: str = "none") -> float:
    """Stored bytes per base weight: 4-bit ≈ 0.5, 8-bit 1, 16-bit 2, fp32 4 (dtype names as in the config)."""
    if quantization == "4bit":
        return 0.5
    if quantization == "8bit":
        return 1.0
    return 4.0 if dtype in ("float32", "fp32") else 2.0


def estimate_memory(
    total_params: int,
    trainable_params: int,
    weight_bytes: float,
    batch_size: int,
    max_length: int,
    hidden_size: int | None,
    num_layers: int | None,
    optimizer: str = "adamw_torch",
    activation_bytes: float = ACTIVATION_BYTES_16BIT,
    gradient_checkpointing: bool = False,
) -> MemoryEstimate:
    """Weights (params × bytes per weight) + trainable × (4 B fp32 gradient + optimizer state) + activations.

    Activations are batch × max_length × hidden × layers × ``activation_bytes``; with gradient checkpointing
    only each layer's input (2 bytes per unit) is kept, plus one layer recomputed in full.
    """
    gradients = trainable_params * 4.0
    optimizer_state = trainable_params * float(_OPTIMIZER_BYTES.get(optimizer, 8))
    activations = None
    if hidden_size and num_layers:
        per_layer = batch_size * max_length * hidden_size
        if gradient_checkpointing:
            activations = per_layer * (num_layers * 2 + activation_bytes)
        else:
            activations = per_layer * num_layers * activation_bytes
    return MemoryEstimate(total_params * weight_bytes, gradients, optimizer_state, activations)


def model_shape(model_dir: str | Path | None) -> tuple[int | None, int | None]:
    """(hidden size, layers) from a local model's config.json; (None, None) when it cannot be read."""
    if model_dir is None:
        return None, None
    try:
        config = json.loads((Path(model_dir) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None, None
    # Multimodal configs keep the language model's shape in text_config.
    config = config.get("text_config", config) if isinstance(config.get("text_config"), dict) else config
    hidden = config.get("hidden_size") or config.get("n_embd") or config.get("d_model")
    layers = config.get("num_hidden_layers") or config.get("n_layer") or config.get("num_layers")
    return (int(hidden) if hidden else None), (int(layers) if layers else None)


@dataclass
class RunEstimate:
    """The Estimate button's result: Markdown to show, and the field errors that stopped it (if any)."""

    markdown: str
    errors: dict[str, str]


def target_module_problems(config: Any) -> dict[str, str]:
    """Field errors for LoRA target modules that name no layer of the model, checked on a weightless copy of
    it (``engine.training.check.meta_model``), naming the layers it has; {} when there is nothing to check.

    Only a list of module names is checked (auto and all-linear are peft's choice), so a Start with the usual
    settings does not pay for importing torch and transformers.
    """
    adapter = config.adapter
    if not adapter.is_lora or isinstance(adapter.target_modules, str):
        return {}
    from engine.config import ConfigError
    from engine.training.builders import check_target_modules
    from engine.training.check import meta_model

    try:
        model = meta_model(config)
    except Exception as exc:  # no such model, no network for a hub id, an unknown architecture, ...
        first = (str(exc).strip() or type(exc).__name__).splitlines()[0]
        return {"model.name_or_path": f"cannot read the model to check its modules: {first}"}
    try:
        check_target_modules(config, model)
    except ConfigError as exc:
        return exc.by_field()
    return {}


def estimate_run(config: Any) -> RunEstimate:
    """Trainable / total parameters (``engine.training.check.check_run``, a weightless model) and the memory estimate.

    Imports torch and transformers on first use, so it runs only when asked.
    """
    from engine.config import ConfigError
    from engine.data import DataError
    from engine.store.paths import find_local_path
    from engine.training.check import check_run
    from engine.training.hardware import detect_hardware, resolve_dtype, resolve_gradient_checkpointing

    try:
        report = check_run(config)
    except ConfigError as exc:
        return RunEstimate(f"❌ {exc}", exc.by_field())
    except DataError as exc:
        from studio.train.dataset import error_markdown

        return RunEstimate(error_markdown(str(exc)), {})
    except Exception as exc:  # no such model, no network for a hub id, an unknown architecture, ...
        first = (str(exc).strip() or type(exc).__name__).splitlines()[0]
        return RunEstimate(f"❌ Cannot read the model `{config.model.name_or_path}`: {first}", {})
    hardware = detect_hardware()
    dtype = resolve_dtype(config.model.dtype, config, hardware)
    hidden, layers = model_shape(find_local_path(config.model.name_or_path))
    memory = estimate_memory(
        total_params=report.parameters.total,
        trainable_params=report.parameters.trainable,
        weight_bytes=weight_bytes_per_param(dtype, config.quantization.mode),
        batch_size=config.train.per_device_batch_size,
        max_length=config.train.max_length,
        hidden_size=hidden,
        num_layers=layers,
        optimizer=config.train.optimizer,
        activation_bytes=ACTIVATION_BYTES_16BIT * (2 if report.precision == "fp32" else 1),
        gradient_checkpointing=resolve_gradient_checkpointing(config, hardware),
    )
    lines = [
        f"**Parameters** {report.parameters}",
        f"**Memory per device** ≈ {format_bytes(memory.total)} ({', '.join(memory.lines()[:-1])})",
        f"**Device** {report.device}, {report.precision} · **optimizer steps** {report.steps:,}",
    ]
    return RunEstimate("\n\n".join(lines), {})
