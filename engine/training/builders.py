"""Pure builders from a RunConfig to the library objects: LoraConfig, BitsAndBytesConfig, the training arguments.

They train nothing and touch no files, so tests check them directly against the objects the libraries expect.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.config import ConfigError, Problem, RunConfig
from engine.training.hardware import (
    Hardware,
    checkpointing_kwargs,
    resolve_device,
    resolve_dtype,
    resolve_gradient_checkpointing,
    resolve_liger,
    resolve_precision,
    resolve_tf32,
)
from engine.training.trackers import tracking_kwargs

if TYPE_CHECKING:
    from peft import LoraConfig
    from transformers import BitsAndBytesConfig


def torch_dtype(name: str) -> Any:
    """The torch dtype for a dtype name such as 'bfloat16'."""
    import torch

    return getattr(torch, name)


def to_bnb_config(
    config: RunConfig, hardware: Hardware, skip_modules: list[str] | None = None
) -> BitsAndBytesConfig | None:
    """The bitsandbytes quantization config of the base model, or None when it loads unquantized.

    ``skip_modules``: modules left in full precision (``llm_int8_skip_modules``, read in 4-bit too), in place of
    transformers' default (the output head and tied weights), which the list must then name itself; a
    vision-language model's image side (engine.training.vision.unquantized_modules).
    """
    from transformers import BitsAndBytesConfig

    quant = config.quantization
    if quant.mode == "none":
        return None
    if quant.mode == "8bit":
        return BitsAndBytesConfig(load_in_8bit=True, llm_int8_skip_modules=skip_modules)
    return BitsAndBytesConfig(
        load_in_4bit=True,
        llm_int8_skip_modules=skip_modules,
        bnb_4bit_quant_type=quant.quant_type,
        bnb_4bit_use_double_quant=quant.double_quant,
        bnb_4bit_compute_dtype=torch_dtype(resolve_dtype(quant.compute_dtype, config, hardware)),
    )


def linear_module_names(model: Any) -> list[str]:
    """Leaf names of the model's linear layers (what LoRA can target), sorted, without the output head."""
    import torch

    names = set()
    for full_name, module in model.named_modules():
        is_linear = isinstance(module, torch.nn.Linear) or type(module).__name__ in (
            "Linear4bit",
            "Linear8bitLt",
        )
        if is_linear and not full_name.endswith("lm_head"):
            names.add(full_name.rsplit(".", 1)[-1])
    return sorted(names)


# What peft's LoRA can wrap (peft raises "Target module ... is not supported" for anything else); matched by
# class name so that bitsandbytes' quantized linears and transformers' Conv1D count without importing them.
LORA_LAYER_TYPES = (
    "Linear",
    "Embedding",
    "Conv1d",
    "Conv2d",
    "Conv3d",
    "MultiheadAttention",
    "Conv1D",
    "Linear4bit",
    "Linear8bitLt",
)


def lora_layer_names(model: Any) -> list[str]:
    """Full names of the model's modules that LoRA can adapt."""
    return [name for name, module in model.named_modules() if type(module).__name__ in LORA_LAYER_TYPES]


def check_target_modules(config: RunConfig, model: Any) -> None:
    """Refuse LoRA target modules that name no layer LoRA can adapt in ``model``, listing the linear ones it has.

    A name matches as peft matches it (``check_target_module_exists``: the full module name, or its ending
    after a dot, so ``q_proj`` and ``self_attn.q_proj`` both work), so what passes here is what peft wraps.
    """
    targets = config.adapter.target_modules
    if not config.adapter.is_lora or isinstance(targets, str):  # auto, all-linear: peft picks the modules
        return
    from peft import LoraConfig
    from peft.tuners.tuners_utils import check_target_module_exists

    layers = lora_layer_names(model)
    missing = [
        target
        for target in targets
        if not any(check_target_module_exists(LoraConfig(target_modules=[target]), name) for name in layers)
    ]
    if missing:
        raise ConfigError(
            [
                Problem(
                    "adapter.target_modules",
                    f"the model has no module {', '.join(missing)} that LoRA can adapt; its linear layers are: "
                    f"{', '.join(linear_module_names(model))} (or auto, all-linear)",
                )
            ]
        )


def to_lora_config(config: RunConfig) -> LoraConfig | None:
    """The peft LoraConfig for a LoRA run, or None for full and freeze runs.

    ``target_modules: auto`` becomes None, which peft replaces by its default for the model type.
    """
    from peft import LoftQConfig, LoraConfig

    from engine.training.methods import method_of

    adapter = config.adapter
    if adapter.method != "lora":
        return None
    init: bool | str = True if adapter.init == "default" else adapter.init
    return LoraConfig(
        task_type=method_of(config).model.peft_task,
        r=adapter.r,
        lora_alpha=adapter.alpha,
        lora_dropout=adapter.dropout,
        target_modules=None if adapter.target_modules == "auto" else adapter.target_modules,
        bias=adapter.bias,
        use_rslora=adapter.use_rslora,
        use_dora=adapter.use_dora,
        init_lora_weights=init,
        loftq_config=LoftQConfig(loftq_bits=4) if adapter.init == "loftq" else {},
        modules_to_save=adapter.modules_to_save or None,
    )


def _eval_args(config: RunConfig) -> dict[str, Any]:
    """Evaluation settings; evaluation is off whenever there is no eval data."""
    train = config.train
    if not config.has_eval_data:
        return {"eval_strategy": "no"}
    return {
        "eval_strategy": train.eval_strategy,
        "eval_steps": train.eval_steps,
        "eval_on_start": train.eval_on_start,
        "per_device_eval_batch_size": train.eval_batch_size,
    }


def _best_model_args(config: RunConfig) -> dict[str, Any]:
    """Early stopping reads the best metric that Trainer tracks for load_best_model_at_end, which also keeps the best
    checkpoint and loads it at the end, so the run's result is its best model (engine.config.stopping checks the
    strategies that needs). The callback's patience count is restored on resume from the checkpoint."""
    stopping = config.train.early_stopping
    if not stopping.enabled:
        return {}
    return {
        "load_best_model_at_end": True,
        "metric_for_best_model": stopping.metric,
        "greater_is_better": not stopping.metric.endswith("loss"),
        "restore_callback_states_from_checkpoint": True,
    }


def to_early_stopping_callback(config: RunConfig) -> Any | None:
    """transformers' EarlyStoppingCallback for ``train.early_stopping``, or None when it is off."""
    from transformers import EarlyStoppingCallback

    stopping = config.train.early_stopping
    if not stopping.enabled:
        return None
    return EarlyStoppingCallback(early_stopping_patience=stopping.patience, early_stopping_threshold=stopping.threshold)


def common_training_kwargs(config: RunConfig, output_dir: str | Path, hardware: Hardware) -> dict[str, Any]:
    """The TrainingArguments every method shares, with device-aware defaults resolved (pure: no library)."""
    train = config.train
    precision = resolve_precision(config, hardware)
    return {
        "output_dir": str(output_dir),
        "learning_rate": train.learning_rate,
        "num_train_epochs": train.num_epochs,
        "max_steps": train.max_steps,
        "per_device_train_batch_size": train.per_device_batch_size,
        "gradient_accumulation_steps": train.gradient_accumulation_steps,
        "lr_scheduler_type": train.lr_scheduler,
        "warmup_steps": train.warmup if train.warmup < 1 else int(train.warmup),
        "weight_decay": train.weight_decay,
        "optim": train.optimizer,
        "max_grad_norm": train.max_grad_norm,
        "logging_steps": train.logging_steps,
        "save_strategy": train.save_strategy,
        "save_steps": train.save_steps,
        "save_total_limit": train.save_total_limit,
        "seed": train.seed,
        "data_seed": train.seed,
        "full_determinism": train.full_determinism,
        "bf16": precision == "bf16",
        "fp16": precision == "fp16",
        "use_cpu": resolve_device(config, hardware) == "cpu",
        "activation_checkpointing": resolve_gradient_checkpointing(config, hardware),
        "activation_checkpointing_kwargs": checkpointing_kwargs(config),
        "use_liger_kernel": resolve_liger(config, hardware),
        "tf32": resolve_tf32(config, hardware),
        "neftune_noise_alpha": train.neftune_noise_alpha,
        "label_smoothing_factor": train.label_smoothing,
        "auto_find_batch_size": train.auto_find_batch_size,
        # The run's id names it in the trackers; output_dir is the run's checkpoints folder (RUN_DIR/checkpoints).
        **tracking_kwargs(config, Path(output_dir).parent),
        # Tokens/s is computed from the non-padding tokens the Trainer counts.
        "include_num_input_tokens_seen": "non_padding",
        # Progress goes to metrics.jsonl and a line per log in train.log; tqdm's carriage returns would garble it.
        "disable_tqdm": True,
        # LoRA under DDP leaves the frozen base without gradients; searching for unused ones costs a pass.
        "ddp_find_unused_parameters": False,
        "dataloader_num_workers": 0,
        # Trainer would log a NaN / infinite loss as the mean of the finite ones before it (and 0.0 on the first
        # step after a resume); the callback must see it to stop the run and keep later checkpoints out.
        "logging_nan_inf_filter": False,
        **_eval_args(config),
        **_best_model_args(config),
    }


def to_training_args(config: RunConfig, output_dir: str | Path, hardware: Hardware) -> Any:
    """The run's training arguments: its method's TRL config class (a transformers TrainingArguments) with the
    shared arguments and the method's own."""
    from engine.training.methods import method_of

    trainer = method_of(config).trainer()
    common = common_training_kwargs(config, output_dir, hardware)
    return trainer.args_class()(**common, **trainer.training_kwargs(config, hardware))
