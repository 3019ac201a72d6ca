"""The predicted peak memory of a run, part by part, from the model's config.json and the RunConfig alone.

Standard library only (no torch at import): the studio's Train tab and ``python -m engine check`` both call
``estimate_run_memory``. What "peak memory" means depends on the device:

- CPU: the training process's peak resident set size (VmHWM), counted from the process baseline (the
  interpreter with torch, transformers, TRL and peft imported) up.
- GPU: ``torch.cuda.max_memory_allocated`` (tensors only; the CUDA context and the allocator's cache sit on top).

The parts are modelled on a LLaMA-style decoder (q/k/v/o attention projections, gate/up/down MLP, RMSNorm,
tied or untied embeddings), which covers LLaMA, Mistral, Qwen, Gemma and most causal LMs people fine-tune. A
vision-language model is its language model (``text_config``) plus its image side (``ImageSide``: the vision
tower's and projector's parameters, counted on the model's meta copy); its image tokens are tokens of the
sequence, so max_length counts them.
``benchmarks/memory_estimate.py`` checks the prediction against measured peaks.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from engine.training.memory_shape import (
    ModelShape,
    lora_parameters,
    lora_targets,
    quantized_weight_bytes,
    read_shape,
)

__all__ = [
    "ImageSide",
    "MemoryEstimate",
    "ModelShape",
    "estimate_memory",
    "estimate_run_memory",
    "lora_parameters",
    "read_shape",
]

GB = 1024**3
# Resident memory of a training worker once its libraries are imported, before it reads data or the model:
# `python -c "import torch, transformers, peft, trl, datasets; import engine.training.recipe, ..."` then VmRSS
# from /proc/self/status (benchmarks/memory_estimate.py prints it again on every run). Measured 2026-11 on
# torch 2.13.0+cpu, transformers 5.24, TRL 1.16, peft 0.21.2: 0.48 GiB.
CPU_PROCESS_BASELINE = int(0.48 * GB)
# The CUDA context of one process is outside max_memory_allocated; shown for planning, not counted in the peak.
CUDA_CONTEXT = int(0.5 * GB)
# glibc keeps most of what a step frees (activations, the loss's buffers) in its arenas, and the next step's
# allocations land beside it: a CPU run's peak RSS sits this share of a step's transient memory above the live
# tensors. Fitted on the ~100M model (benchmarks/memory_estimate.py: every config's ratio 0.89-1.06 with 0.4); a
# bare loop's peak rose 0.4 GB from the first step to the third, and malloc_trim(0) handed 1.1 GB back at the end.
# A GPU's caching allocator keeps its cache outside max_memory_allocated, so there it is 0.
CPU_ALLOCATOR_RETENTION = 0.4
# Bytes of optimizer state per trainable parameter, as multiples of the parameter's own bytes (torch's AdamW keeps
# two moments in the parameter's dtype) or as fixed bytes for the 8-bit ones (bitsandbytes' blockwise states).
_STATE_COPIES = {"adamw_torch": 2, "adamw_torch_fused": 2, "paged_adamw_32bit": 2, "sgd": 0}
_STATE_BYTES = {"adamw_bnb_8bit": 2.0, "paged_adamw_8bit": 2.0, "lion_8bit": 1.0, "paged_lion_8bit": 1.0}
# Adafactor keeps factored second moments (a row and a column vector per matrix) and no first moment.
_ADAFACTOR_BYTES = 0.05
# The loss over the vocabulary, per token at its peak (the start of backward): log_softmax's saved fp32 output,
# the gradient that flows into it and the gradient it hands to the logits, 4 bytes per vocabulary entry each.
LOSS_COPIES = 3
_DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes of each part of a run's peak memory on its device."""

    device: str  # "cpu" or "cuda"
    weights: float  # the base (quantized or not) plus LoRA weights
    # Models the method loads beside the trained one, frozen (distill's teacher, a full run's reference), as loaded
    frozen: float
    optimizer: float
    gradients: float
    activations: float  # what the layers keep for backward (per token, per layer)
    loss: float  # logits and the loss over the vocabulary
    allocator: float  # CPU: what glibc keeps of a step's freed memory (CPU_ALLOCATOR_RETENTION)
    checkpoint: float  # CPU, quantized: the checkpoint file's pages the loader leaves mapped (resident)
    baseline: float  # CPU: the process with its libraries; GPU: 0 (the CUDA context is outside the peak)

    @property
    def training(self) -> float:
        """The peak above the process baseline."""
        parts = (self.weights, self.frozen, self.optimizer, self.gradients, self.activations, self.loss, self.allocator)
        return sum(parts) + self.checkpoint

    @property
    def total(self) -> float:
        """The predicted peak: baseline plus every part."""
        return self.baseline + self.training

    def parts(self) -> dict[str, float]:
        """Each part by name, in bytes."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "device"}

    def summary(self) -> str:
        """One line: 'predicted peak memory: 1.9 GB on cpu (weights 0.4, optimizer 0.1, ...)'."""
        parts = ", ".join(f"{name} {value / GB:.2f}" for name, value in self.parts().items() if value)
        where = "CPU RSS" if self.device == "cpu" else "CUDA allocated, plus ~0.5 GB context"
        return f"predicted peak memory: {self.total / GB:.2f} GB ({where}; {parts} GB)"


@dataclass(frozen=True)
class ImageSide:
    """A vision-language model's image side: parameters of its vision tower and projector, and which of them
    train (the run's vision section; a trained projector trains in full, also beside a LoRA adapter)."""

    tower: int
    projector: int
    tower_trained: bool = False
    projector_trained: bool = True

    def trained_parameters(self) -> int:
        """Parameters of the image side that train in full."""
        return self.tower * self.tower_trained + self.projector * self.projector_trained


def _optimizer_bytes(optimizer: str, trainable: int, param_bytes: float) -> float:
    if optimizer in _STATE_BYTES:
        return trainable * _STATE_BYTES[optimizer]
    if optimizer == "adafactor":
        return trainable * _ADAFACTOR_BYTES
    return trainable * param_bytes * _STATE_COPIES.get(optimizer, 2)


def layer_activation_bytes(shape: ModelShape, trainable_layer: bool, lora: dict[str, Any] | None, width: int) -> float:
    """Bytes one decoder layer keeps for backward per token (``width``: bytes of a 16- or 32-bit activation).

    Counted from the autograd graph of transformers' LLaMA layer (checked with saved-tensor hooks on the ~100M
    model: 10 hidden-sized and 4 intermediate-sized tensors per token for a fully trained layer):

    - always (gradients flow through): the layer's input and the residual between attention and MLP, q and k
      after RoPE, v, the attention output (sdpa keeps it and its log-sum-exp), the gate, its SiLU and the up
      projection;
    - a trained layer also keeps both RMSNorms' normalised inputs and outputs and the MLP product (its weights
      need them);
    - LoRA keeps the input of each adapted projection: one shared copy when dropout is 0, else a dropout output
      and its mask per adapted module, plus the low-rank ``r``-sized intermediate.

    16-bit runs upcast each RMSNorm's input to fp32 and keep that copy.
    """
    h, q, kv, i = shape.hidden, shape.q_dim, shape.kv_dim, shape.intermediate
    units = 2 * h + 2 * q + 2 * kv + 3 * i
    if trainable_layer:
        units += 4 * h + i
    elif lora is not None:
        targets, dropout, rank = lora["targets"], lora["dropout"], lora["r"]
        inputs = shape.projection_inputs()
        if dropout > 0:
            units += sum(2 * inputs[name] for name in targets)
        else:
            units += shared_input_units(shape, targets)
        units += rank * len(targets)
    norm_upcast = 2 * 4 * h if width < 4 else 0
    return units * width + norm_upcast + shape.heads * 4  # log-sum-exp: fp32 per head


def shared_input_units(shape: ModelShape, targets: frozenset[str] | set[str]) -> int:
    """Values per token of the inputs LoRA adapters without dropout keep, one copy for the modules that share it:
    q / k / v read the attention norm's output, gate / up the MLP norm's, down the MLP product (o_proj's input is
    the attention output, kept anyway)."""
    h = shape.hidden
    units = h * bool({"q_proj", "k_proj", "v_proj"} & targets) + h * bool({"gate_proj", "up_proj"} & targets)
    return units + shape.intermediate * ("down_proj" in targets)


def int8_input_bytes(shape: ModelShape, lora: dict[str, Any] | None, width: int) -> float:
    """Bytes one decoder layer over an 8-bit base keeps per token beyond ``layer_activation_bytes``: bitsandbytes'
    int8 matmul keeps each quantized projection's input in its autograd context (shared inputs once), which
    checkpointing drops only when reentrant (engine.training.hardware.checkpointing_kwargs).

    Those are both RMSNorms' outputs (fp32: prepare_model_for_kbit_training upcasts the norms) and the MLP product
    (fp32: the int8 matmul answers in its input's dtype); o_proj's input, the attention output, is kept anyway. A LoRA
    adapter without dropout already keeps the same tensors as its shared inputs (counted there at ``width``).
    """
    shared = shared_input_units(shape, lora["targets"]) if lora is not None and lora["dropout"] == 0 else 0
    return (2 * shape.hidden + shape.intermediate) * 4 - shared * width


def estimate_memory(
    shape: ModelShape,
    *,
    device: str,
    weight_bytes: float,
    compute_bytes: int,
    method: str,
    quantization: str = "none",
    double_quant: bool = True,
    lora: dict[str, Any] | None = None,
    freeze_layers: int = 0,
    optimizer: str = "adamw_torch",
    batch_size: int = 1,
    max_length: int = 1024,
    gradient_checkpointing: bool = False,
    checkpoint_bytes: float = 0.0,
    image_side: ImageSide | None = None,
    frozen_bytes: float = 0.0,
) -> MemoryEstimate:
    """The peak memory of one training process, part by part.

    ``weight_bytes``: bytes of an unquantized base weight (4 fp32, 2 bf16 / fp16); ``compute_bytes``: of an
    activation. ``lora``: ``{"targets": set of module names, "r", "dropout", "modules_to_save"}`` for LoRA runs.
    ``checkpoint_bytes``: the size of the model's weight files (what a quantized load on a CPU leaves mapped).
    ``frozen_bytes``: the weights of models loaded beside the trained one and never trained (distill's teacher, the
    reference a full or freeze run keeps).
    ``image_side``: a vision-language model's vision tower and projector. Their weights stay unquantized (the
    engine keeps a quantized load off them); what trains in full adds optimizer state (and, beside a LoRA adapter,
    the trained copy peft keeps of a module to save). A frozen tower runs without a graph, so its activations are
    transient and freed before the language model's peak; a trained tower's are not modelled (nor LoRA in it).

    The peak is at the start of a later step's backward, when every saved activation, the loss's buffers and the
    optimizer state of earlier steps are alive at once. Gradients count as far as they are alive then: LoRA's
    (small), and the output head's and embeddings' when they are trained (computed first); a trained layer's
    gradients appear as backward frees that layer's activations, so they do not add to the peak.
    """
    base = shape.total_parameters
    trainable = 0
    if method == "lora" and lora is not None:
        adapter = lora_parameters(shape, lora["targets"], lora["r"], lora.get("modules_to_save", ()))
        weights = quantized_weight_bytes(shape, quantization, double_quant, weight_bytes) + adapter * 4
        trainable, param_bytes = adapter, 4.0  # peft keeps adapter weights in fp32 (autocast_adapter_dtype)
    else:
        weights = base * weight_bytes
        trainable = base if method == "full" else freeze_layers * shape.layer_parameters
        param_bytes = weight_bytes
    at_peak = trainable if method == "lora" else shape.embedding_parameters * (method == "full")
    optimizer_bytes = _optimizer_bytes(optimizer, trainable, param_bytes)
    if image_side is not None:
        # Gradients of the image side come last in backward and are freed by the step: none alive at the peak.
        image_trained = image_side.trained_parameters() if method in ("lora", "full") else 0
        weights += (image_side.tower + image_side.projector) * weight_bytes
        if method == "lora":  # modules_to_save: a trained copy beside the frozen original
            weights += image_trained * weight_bytes
        optimizer_bytes += _optimizer_bytes(optimizer, image_trained, weight_bytes)
    tokens = batch_size * max_length
    if method == "full":
        per_layer = [layer_activation_bytes(shape, True, None, compute_bytes)] * shape.layers
    elif method == "freeze":  # layers below the trained ones build no graph at all
        per_layer = [layer_activation_bytes(shape, True, None, compute_bytes)] * min(freeze_layers, shape.layers)
    else:
        int8 = int8_input_bytes(shape, lora, compute_bytes) if quantization == "8bit" else 0.0
        per_layer = [layer_activation_bytes(shape, False, lora, compute_bytes) + int8] * shape.layers
    if gradient_checkpointing and per_layer:
        # Each checkpointed layer keeps only its input; backward recomputes one layer at a time in full.
        activations = tokens * (len(per_layer) * shape.hidden * compute_bytes + max(per_layer))
    else:
        activations = tokens * sum(per_layer)
    loss = tokens * shape.vocab * 4 * LOSS_COPIES
    allocator = CPU_ALLOCATOR_RETENTION * (activations + loss) if device == "cpu" else 0.0
    return MemoryEstimate(
        device=device,
        weights=weights,
        frozen=frozen_bytes,
        optimizer=optimizer_bytes,
        gradients=at_peak * param_bytes,
        activations=activations,
        loss=loss,
        allocator=allocator,
        checkpoint=checkpoint_bytes if device == "cpu" and quantization != "none" else 0.0,
        baseline=CPU_PROCESS_BASELINE if device == "cpu" else 0.0,
    )


def config_dict(model_dir: str | Path | None) -> dict[str, Any] | None:
    """A local model's config.json as a dict; None when there is none to read."""
    if model_dir is None:
        return None
    try:
        return json.loads((Path(model_dir) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def estimate_run_memory(
    config: Any,
    model_config: dict[str, Any],
    device: str,
    precision: str,
    checkpointing: bool,
    image_side: ImageSide | None = None,
    frozen_models: Sequence[dict[str, Any]] = (),
) -> MemoryEstimate | None:
    """The estimate for a RunConfig on its resolved device, precision and checkpointing (and a vision-language
    model's ``image_side``, and the config.json of each model its method loads frozen beside it: ``frozen_models``,
    loaded with the run's dtype and quantization); None when the model's config.json, or a frozen model's, does not
    describe a decoder this estimate knows (no hidden size, layers or vocabulary)."""
    shape = read_shape(model_config)
    if shape is None:
        return None
    adapter, quant = config.adapter, config.quantization
    dtype = config.model.dtype
    if dtype == "auto":
        dtype = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}[precision]
    stored = model_config.get("dtype") or model_config.get("torch_dtype")  # the weight files' dtype
    frozen_shapes = [read_shape(frozen) for frozen in frozen_models]
    if None in frozen_shapes:
        return None
    weight_bytes = 4 if dtype == "float32" else 2
    frozen_bytes = sum(
        quantized_weight_bytes(frozen, quant.mode, quant.double_quant, weight_bytes)
        for frozen in frozen_shapes
        if frozen is not None
    )
    lora = None
    if adapter.is_lora:
        lora = {
            "targets": lora_targets(shape, adapter.target_modules),
            "r": adapter.r,
            "dropout": adapter.dropout,
            "modules_to_save": tuple(adapter.modules_to_save),
        }
    return estimate_memory(
        shape,
        device=device,
        weight_bytes=weight_bytes,
        compute_bytes=4 if precision == "fp32" else 2,
        method=adapter.method,
        quantization=quant.mode,
        double_quant=quant.double_quant,
        lora=lora,
        freeze_layers=adapter.freeze_trainable_layers if adapter.method == "freeze" else 0,
        optimizer=config.train.optimizer,
        batch_size=config.train.per_device_batch_size,
        max_length=config.train.max_length,
        gradient_checkpointing=checkpointing,
        checkpoint_bytes=shape.total_parameters * _DTYPE_BYTES.get(str(stored), 4),
        image_side=image_side,
        frozen_bytes=frozen_bytes,
    )
