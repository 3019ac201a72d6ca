"""``python -m engine check``: validate a config and its dataset without training.

The model is built on the meta device (no weights are read), so checking a config for a large model is quick
and still counts the real trainable parameters and checks LoRA target modules against the real module names.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.config import ConfigError, Problem, RunConfig
from engine.data.template_guard import CHECK_BUDGET_S
from engine.runs.lineage import checked_source, pinned
from engine.training.hardware import (
    Hardware,
    detect_hardware,
    hardware_problems,
    resolve_device,
    resolve_gradient_checkpointing,
    resolve_precision,
)
from engine.training.memory import ImageSide, MemoryEstimate, estimate_run_memory
from engine.training.method_data import inspect_run_data
from engine.training.methods import method_of
from engine.training.modality import is_vision_model
from engine.training.modeling import ParameterCount, count_parameters, load_tokenizer, meta_model


@dataclass(frozen=True)
class CheckReport:
    """What a run would do: the data it reads, what it trains, where and how long."""

    data: Any  # engine.data.DataReport
    parameters: ParameterCount
    device: str
    precision: str
    steps: int
    start: str | None = None  # where the weights come from when the run starts from another run's
    method_lines: tuple[str, ...] = ()  # what the run's method says of it (distill's teacher, DPO's reference)
    memory: MemoryEstimate | None = None  # None when the model's config does not give its shape

    def lines(self) -> list[str]:
        """The short human summary printed by the CLI."""
        data = self.data
        tokens = f"{data.num_tokens:,} ({data.num_loss_tokens:,} carry loss)" if data.num_tokens else ""
        # A list of datasets: one line each (file, format, rows used after its cap and weight).
        sources = (
            [f"data: {len(data.datasets)} datasets, {data.num_source_rows:,} rows after their caps and weights"]
            + [f"  {dataset.summary()}" for dataset in data.datasets]
            if data.listed
            else [f"data: {data.source}"]
        )
        return [
            *sources,
            f"format: {data.format}",
            f"rows: {data.num_rows:,} train, {data.num_eval_rows:,} eval",
            *([f"tokens: {tokens}"] if tokens else []),
            *[f"warning: {warning}" for warning in data.warnings],
            f"model: {self.parameters}",
            *([f"starts from: {self.start}"] if self.start else []),
            *self.method_lines,
            f"device: {self.device}, precision {self.precision}",
            self.memory.summary() if self.memory else "predicted peak memory: unknown (the model's shape is not known)",
            f"optimizer steps: {self.steps}",
        ]


def planned_steps(config: RunConfig, train_rows: int) -> int:
    """Optimizer steps the run will take (max_steps, or epochs over the rows)."""
    if config.train.max_steps > 0:
        return config.train.max_steps
    per_step = config.train.per_device_batch_size * config.train.gradient_accumulation_steps
    per_step *= config.launch.num_processes
    return math.ceil(config.train.num_epochs * math.ceil(train_rows / per_step))


def image_side_of(model: Any, config: RunConfig) -> ImageSide:
    """A vision-language model's vision tower and projector in parameters (``model`` as loaded, before peft wraps
    it), and which of them the run's vision section trains."""
    from engine.training.vision import PROJECTOR, TOWER, trained_parts, vision_parts

    parts, sizes = vision_parts(model), {TOWER: 0, PROJECTOR: 0}
    for name, param in model.named_parameters():  # tied weights are listed once
        part = parts.part_of(name)
        if part in sizes:
            sizes[part] += param.numel()
    trained = trained_parts(config)
    return ImageSide(sizes[TOWER], sizes[PROJECTOR], TOWER in trained, PROJECTOR in trained)


def meta_parameter_count(config: RunConfig, hardware: Hardware, model: Any = None) -> ParameterCount:
    """Trainable and total parameters, from a weightless (meta device) copy of the model (``model``, or one built
    from the config)."""
    from engine.training.modeling import make_trainable

    model = meta_model(config) if model is None else model
    # Quantization changes how weights are stored, not what is trainable: count the unquantized layout.
    unquantized = config.model_copy(update={"quantization": config.quantization.model_copy(update={"mode": "none"})})
    cpu_view = Hardware(gpu_count=0, bf16_supported=False) if not hardware.has_gpu else hardware
    return count_parameters(make_trainable(model, unquantized, cpu_view))


def check_run(
    config: RunConfig, template_budget_s: float = CHECK_BUDGET_S, workspace: Path | None = None
) -> CheckReport:
    """Validate everything a run needs before it starts; raises ConfigError or DataError with a clear message.

    ``template_budget_s``: CPU seconds a configured chat template may take to render the training rows (the
    default suits a check someone waits for; engine.data.template_guard). ``workspace``: where a run id in
    ``model.init_from`` or distill's teacher is looked up (the workspace the run will be created in).
    """
    # The run it starts from and the rows first: both are reported in a moment, before torch is imported.
    source = checked_source(config, workspace)
    config = pinned(config, workspace)  # a run named by its id, as the run will hold it (a teacher's too)
    inspect_run_data(config)
    hardware = detect_hardware()
    problems = hardware_problems(config, hardware)
    if problems:
        raise ConfigError(problems)
    try:
        tokenizer = load_tokenizer(config)
    except OSError as exc:  # a missing directory, or a hub id that cannot be reached
        raise ConfigError(
            [Problem("model.name_or_path", f"cannot load {config.model.name_or_path!r}: {exc}")]
        ) from None
    data = inspect_run_data(config, tokenizer, template_budget_s)
    method = method_of(config)
    check_method_data = method.data_check()
    if check_method_data is not None:
        check_method_data(config, tokenizer)
    model = meta_model(config)
    model_config = model.config.to_dict()  # read before make_trainable: peft may wrap the model
    image_side = image_side_of(model, config) if is_vision_model(config) else None
    device, precision = resolve_device(config, hardware), resolve_precision(config, hardware)
    checkpointing = resolve_gradient_checkpointing(config, hardware)
    return CheckReport(
        data=data,
        parameters=meta_parameter_count(config, hardware, model),
        device=device,
        precision=precision,
        steps=planned_steps(config, data.num_rows),
        start=source.plan(config) if source is not None else None,
        method_lines=tuple(method.check_lines(config)),
        memory=estimate_run_memory(
            config, model_config, device, precision, checkpointing, image_side, method.frozen_models(config)
        ),
    )
