"""Load the base model and tokenizer, quantize, and make the trainable part: LoRA, full, or the last N layers."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.config import ConfigError, Problem, RunConfig
from engine.store.paths import resolve_model_source
from engine.training.attention import (
    SEGMENTS,
    apply_sdpa_backends,
    register_segment_attention,
    resolve_attn_implementation,
)
from engine.training.builders import check_target_modules, to_bnb_config, to_lora_config, torch_dtype
from engine.training.hardware import (
    Hardware,
    resolve_device,
    resolve_dtype,
    resolve_gradient_checkpointing,
    resolve_precision,
)
from engine.training.modality import is_vision_model, model_kind
from engine.training.vision import (
    adapt_lora_config,
    language_model_lists,
    load_processor,
    set_trainable_parts,
    unquantized_modules,
    vision_parts,
)

if TYPE_CHECKING:
    from engine.runs.artifacts import TrainedWeights


@dataclass(frozen=True)
class ParameterCount:
    """Trainable and total parameters of a model ready to train."""

    trainable: int
    total: int
    quantized: int = 0  # of the total, the frozen weights bitsandbytes stores in ``bits`` bits
    bits: int | None = None

    @property
    def percent(self) -> float:
        """Trainable share of all parameters, in percent."""
        return 100.0 * self.trainable / max(self.total, 1)

    def __str__(self) -> str:
        text = f"{self.trainable:,} trainable of {self.total:,} parameters ({self.percent:.2f}%)"
        return text + (f"; {self.quantized:,} of them stored {self.bits}-bit" if self.quantized else "")


# bitsandbytes' parameter classes, by name (no import of bitsandbytes needed to count them), and their bits.
_QUANTIZED_BITS = {"Params4bit": 4, "Int8Params": 8}


def count_parameters(model: Any) -> ParameterCount:
    """Count trainable and total parameters, and those stored quantized (4-bit weights count as stored elements
    times two)."""
    trainable = total = quantized = 0
    bits = None
    for param in model.parameters():
        count = param.numel()
        kind = _QUANTIZED_BITS.get(type(param).__name__)
        if kind == 4:
            count *= 2  # two 4-bit values are packed into each stored byte
        if kind:
            quantized, bits = quantized + count, kind
        total += count
        trainable += count if param.requires_grad else 0
    return ParameterCount(trainable, total, quantized, bits)


def load_tokenizer(config: RunConfig) -> Any:
    """The tokenizer of the base model, with a pad token (the eos token when the model has none); for a
    vision-language model its processor (image processor, tokenizer and chat template), which TRL takes in the
    tokenizer's place."""
    from transformers import AutoTokenizer

    if is_vision_model(config):
        return load_processor(
            resolve_model_source(config.model.name_or_path), config.model.revision, config.model.trust_remote_code
        )

    tokenizer = AutoTokenizer.from_pretrained(
        resolve_model_source(config.model.name_or_path),
        revision=config.model.revision,
        trust_remote_code=config.model.trust_remote_code,
    )
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load_model(config: RunConfig, hardware: Hardware, weights: str | Path | None = None) -> Any:
    """The base model (a causal LM, or what the run's method trains: Method.model), quantized when the config asks
    for it, on the run's device.

    ``weights``: a directory of whole-model weights to load instead of the base's own (a full fine-tune that the
    run starts from, engine.runs.lineage); the base's dtype, revision and quantization settings still apply.
    """
    kind = model_kind(config)
    kwargs: dict[str, Any] = {
        **dict(kind.head_kwargs),
        "dtype": torch_dtype(resolve_dtype(config.model.dtype, config, hardware)),
        "revision": config.model.revision,
        "trust_remote_code": config.model.trust_remote_code,
        "quantization_config": to_bnb_config(config, hardware, _unquantized(config)),
    }
    attention = resolve_attn_implementation(config, hardware)
    if attention == SEGMENTS:
        register_segment_attention()
    apply_sdpa_backends(config, hardware)  # here, since training, Chat and Evaluate all load their model here
    if attention is not None:
        kwargs["attn_implementation"] = attention
    if resolve_device(config, hardware) == "cuda" and config.quantization.mode != "none":
        # Quantized weights must be placed at load time, one copy per process.
        kwargs["device_map"] = {"": int(os.environ.get("LOCAL_RANK", 0))}
    if weights is not None:
        kwargs["revision"] = None  # a local directory has no revisions
    source = str(weights) if weights is not None else resolve_model_source(config.model.name_or_path)
    model = kind.load_class().from_pretrained(source, **kwargs)
    if config.quantization.mode == "4bit" and resolve_device(config, hardware) == "cpu":
        _plain_4bit_on_cpu(model)
    return model


def saved_modules_trainable(model: Any, config: RunConfig, hardware: Hardware) -> None:
    """Modules trained in full beside a quantized run's adapter in float32 where the run does not train in bf16.

    TRL's trainers cast every trainable parameter of a quantized model to bf16 (QLoRA's recipe). LoRA's layers cast
    their input to their own dtype, but a module peft trains in full beside the adapter (``modules_to_save``: a
    reward model's score head, lm_head or embed_tokens when listed) takes the hidden states in the run's dtype: on a
    CPU (float32) a QLoRA reward model failed at its first step ("expected m1 and m2 to have the same dtype").
    Float32 copies match a CPU's float32, and fp16 training's autocast casts them as it casts the rest. Call it
    once the trainer is built (the cast happens in its constructor), before its optimizer exists."""
    import torch

    if config.quantization.mode == "none" or resolve_precision(config, hardware) == "bf16":
        return
    for name, parameter in model.named_parameters():
        if parameter.requires_grad and parameter.dtype == torch.bfloat16 and ".modules_to_save." in name:
            parameter.data = parameter.data.float()


# bitsandbytes 0.50's CPU inference kernel for 4-bit weights takes layers whose out_features are a multiple of this
# (and whose in_features are a multiple of the weight's quantization block).
CPU_PACK_BLOCK = 32


def _plain_4bit_on_cpu(model: Any) -> None:
    """Keep bitsandbytes' plain 4-bit path for the layers its CPU inference kernel cannot take.

    On a CPU with AVX512-BF16, bitsandbytes 0.50 repacks a 4-bit weight for that kernel the first time the layer
    runs in eval mode without gradients (Chat, Evaluate, a distill run's teacher), and the repacking needs
    out_features to be a multiple of CPU_PACK_BLOCK and in_features a multiple of the quantization block: the demo
    model's 688-wide MLP failed with "N must be divisible by block_n" (up and gate) and a reshape error (down).
    Such a layer is told the kernel is not there, as on other CPUs."""
    import bitsandbytes as bnb

    for module in model.modules():
        if not isinstance(module, bnb.nn.Linear4bit):
            continue
        if module.out_features % CPU_PACK_BLOCK or module.in_features % module.weight.blocksize:
            module.support_avx512bf16_for_cpu = False


def meta_model(config: RunConfig) -> Any:
    """A weightless (meta device) copy of the config's model: its module names and shapes, no weights read."""
    import torch
    from transformers import AutoConfig

    kind = model_kind(config)
    model_config = AutoConfig.from_pretrained(
        resolve_model_source(config.model.name_or_path),
        revision=config.model.revision,
        trust_remote_code=config.model.trust_remote_code,
        **dict(kind.head_kwargs),
    )
    with torch.device("meta"):
        return kind.load_class().from_config(model_config, trust_remote_code=config.model.trust_remote_code)


def _unquantized(config: RunConfig) -> list[str] | None:
    """What a quantized vision-language run keeps in full precision (its image side: unquantized_modules); None
    (transformers' default) for a language model or an unquantized run."""
    if config.quantization.mode == "none" or not is_vision_model(config):
        return None
    return unquantized_modules(meta_model(config))


def decoder_layers(model: Any) -> Any:
    """The model's stack of decoder layers: its largest ModuleList (outside the vision tower of a vision-language
    model, whose encoder may have more layers than its language model)."""
    lists = [module for _, module in language_model_lists(model, vision_parts(model))]
    if not lists:
        raise ConfigError([Problem("adapter.method", "freeze needs a model with a list of decoder layers")])
    return max(lists, key=len)


def _freeze_all_but_last_layers(model: Any, count: int) -> None:
    """Train only the last ``count`` decoder layers."""
    layers = decoder_layers(model)
    if count > len(layers):
        raise ConfigError(
            [Problem("adapter.freeze_trainable_layers", f"the model has only {len(layers)} layers, not {count}")]
        )
    model.requires_grad_(False)
    for layer in layers[len(layers) - count :]:
        layer.requires_grad_(True)


def make_trainable(model: Any, config: RunConfig, hardware: Hardware) -> Any:
    """Apply the adapter method; returns the model to hand to the trainer.

    For a quantized base this is the QLoRA path: freeze the base, ``prepare_model_for_kbit_training`` (which
    also casts norms and other small weights to fp32 for stable bf16 training), then ``get_peft_model``.
    """
    method = config.adapter.method
    parts = vision_parts(model) if is_vision_model(config) else None
    if method == "full":
        model.requires_grad_(True)
        if parts is not None:
            set_trainable_parts(model, config, parts)
        return model
    if method == "freeze":
        _freeze_all_but_last_layers(model, config.adapter.freeze_trainable_layers)
        if parts is not None and config.vision.train_projector and parts.projector:
            model.get_submodule(parts.projector).requires_grad_(True)
        return model
    from peft import get_peft_model

    check_target_modules(config, model)
    lora = to_lora_config(config)
    if parts is not None:
        lora = adapt_lora_config(lora, config, parts, model)
    return get_peft_model(_ready_for_adapter(model, config, hardware), lora)


def _ready_for_adapter(model: Any, config: RunConfig, hardware: Hardware) -> Any:
    """The base prepared to carry a trained adapter: for QLoRA ``prepare_model_for_kbit_training``, else the input
    gradients that checkpointed blocks need when the embeddings are frozen."""
    from peft import prepare_model_for_kbit_training

    checkpointing = resolve_gradient_checkpointing(config, hardware)
    if config.quantization.mode != "none":
        return prepare_model_for_kbit_training(model, use_gradient_checkpointing=checkpointing)
    if checkpointing:
        model.enable_input_require_grads()
    return model


def build_model(config: RunConfig, hardware: Hardware, start: TrainedWeights | None = None) -> Any:
    """The model to hand to the trainer: the base made trainable (``make_trainable``), or, when the run starts
    from another run's weights (``model.init_from``, engine.runs.lineage), those weights:

    - an adapter into a LoRA run: the same adapter, loaded trainable on the (possibly quantized) base;
    - an adapter into a full or freeze run: merged into the base, which then trains as ``make_trainable`` says;
    - a whole model: loaded in the base's place, then made trainable.

    A resume builds the same model; the Trainer then restores the run's own weights from its checkpoint.
    """
    if start is None:
        return make_trainable(load_model(config, hardware), config, hardware)
    if not start.is_adapter:
        return make_trainable(load_model(config, hardware, weights=start.path), config, hardware)
    from peft import PeftModel

    base = load_model(config, hardware)
    if config.adapter.is_lora:
        return PeftModel.from_pretrained(_ready_for_adapter(base, config, hardware), str(start.path), is_trainable=True)
    merged = PeftModel.from_pretrained(base, str(start.path)).merge_and_unload()
    return make_trainable(merged, config, hardware)
