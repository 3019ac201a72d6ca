"""The sections of a RunConfig: one pydantic model per concern, a description and bounds on every field.

The studio builds its widgets from these fields, so every field carries a description (the help text) and,
for numbers, bounds. Fields marked ``advanced`` are collapsed in the form.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, field_validator

from engine.config.schema import MAX_COUNT, Section, advanced, blank_is_none, names_model, names_run

DEMO_MODEL = "assets/demo-model"
DEMO_VLM = "assets/demo-vlm"  # the vision-language demo: a tiny LLaVA built by assets/build_demo_vlm.py
BUNDLED_MODELS = (DEMO_MODEL, DEMO_VLM)
Dtype = Literal["auto", "float32", "bfloat16", "float16"]
# What each field's own check below says, by name: English, the one definition of each message (the studio says it
# again in the visitor's language: studio.i18n.problems, keys ``check.<name>``). The rules across fields keep theirs
# in engine.config (RULE_MESSAGES).
FIELD_MESSAGES = {
    "target_modules_empty": "give auto, all-linear or at least one module name",
    "eval_metric_name": "name an evaluation metric as logged, starting with eval_ (e.g. eval_loss)",
    "max_steps_zero": "0 runs no step: give the number of optimizer steps (1 or more), or -1 to run num_epochs",
    "report_to_none": "none means no tracker: leave it out when you pick trackers",
    "trackio_project_name": "use letters, digits, - and _ only (it names trackio's database file)",
    "trackio_space_id": "write the Space as user/name (letters, digits, -, _ and . in each part)",
}


class ModelSection(Section):
    """The base model to fine-tune."""

    name_or_path: str = Field(
        DEMO_MODEL,
        min_length=1,
        description="Hub id (org/name) or local directory of the base model.",
        json_schema_extra=names_model(),
    )
    revision: str | None = Field(
        None,
        description="Hub branch, tag or commit to load; empty for the default.",
        json_schema_extra=advanced(),
    )
    dtype: Dtype = Field(
        "auto",
        description="Dtype of the weights: auto = float32 on CPU, bfloat16 on GPUs that have it, else float16.",
    )
    trust_remote_code: bool = Field(
        False,
        description="Run Python code shipped with the model. Only for models whose code you trust.",
        json_schema_extra=advanced(),
    )
    attn_implementation: Literal["auto", "eager", "sdpa", "flash_attention_2", "flex_attention"] = Field(
        "auto",
        description=(
            "Attention kernel. auto: for padding-free batches (train.padding_free) flash_attention_2's varlen kernel "
            "on a GPU in fp16 / bf16 when flash-attn is installed, else sdpa once per row (no masked squares; on a "
            "GPU only when padding_free is on); otherwise transformers' choice. flex_attention: PyTorch's "
            "FlexAttention with a document mask for padding-free batches (GPU only: it has no backward on a CPU)."
        ),
        json_schema_extra=advanced(),
    )
    sdpa_backends: Literal["auto", "all"] = Field(
        "auto",
        description=(
            "Which kernels PyTorch's scaled_dot_product_attention may pick on a GPU. auto: flash, memory-efficient "
            "and math, not cuDNN's, which plans every new batch shape on the CPU (62 ms a call on an H200, 4x "
            "slower training on rows of varied length); all: PyTorch's own choice, cuDNN included. A CPU has no "
            "cuDNN: nothing changes there."
        ),
        json_schema_extra=advanced(),
    )
    # A plain string: whether it names a run with weights is checked against the disk before launch
    # (engine.runs.lineage), and the run directory records it as an absolute path when the run is created.
    init_from: str | None = Field(
        None,
        description=(
            "Start from another run's weights instead of a fresh adapter (e.g. DPO after SFT): a run id of the "
            "workspace, a run directory, or one of its checkpoints (RUN/checkpoints/checkpoint-N). A LoRA adapter "
            "is trained further (same base and adapter settings), or merged into the base for a full / freeze run; "
            "a full model is trained further. Empty: start from the base model."
        ),
        json_schema_extra=names_run(),
    )

    @field_validator("init_from")
    @classmethod
    def _blank_is_none(cls, value: str | None) -> str | None:
        """A blank field (a cleared form box) means no source."""
        return blank_is_none(value)


class QuantizationSection(Section):
    """bitsandbytes quantization of the frozen base (QLoRA)."""

    mode: Literal["none", "4bit", "8bit"] = Field(
        "none", description="Load the base model quantized: 4-bit (QLoRA) or 8-bit. Needs a LoRA adapter."
    )
    quant_type: Literal["nf4", "fp4"] = Field("nf4", description="4-bit data type: NF4 (usual for QLoRA) or FP4.")
    double_quant: bool = Field(True, description="Quantize the quantization constants too (saves ~0.4 bit/param).")
    compute_dtype: Dtype = Field("auto", description="Dtype of the 4-bit matmuls: auto follows the training precision.")


class AdapterSection(Section):
    """What is trained: a LoRA adapter, the full model, or the last layers only."""

    method: Literal["lora", "full", "freeze"] = Field(
        "lora",
        description="lora: train a low-rank adapter; full: every weight; freeze: only the last N layers.",
    )
    r: int = Field(8, ge=1, le=1024, description="LoRA rank: the width of the low-rank update.")
    alpha: float = Field(16, gt=0, le=4096, description="LoRA alpha: the update is scaled by alpha / r.")
    dropout: float = Field(0.05, ge=0, lt=1, description="Dropout on the LoRA input.")
    target_modules: str | list[str] = Field(
        "auto",
        description=(
            "Modules that get LoRA: auto (peft's default for the model type), all-linear, "
            "or a comma-separated list of module names."
        ),
    )
    bias: Literal["none", "all", "lora_only"] = Field(
        "none", description="Which biases to train with LoRA.", json_schema_extra=advanced()
    )
    use_rslora: bool = Field(
        False, description="Rank-stabilised LoRA: scale by alpha / sqrt(r).", json_schema_extra=advanced()
    )
    use_dora: bool = Field(
        False,
        description="DoRA: weight-decomposed LoRA (slower, sometimes better).",
        json_schema_extra=advanced(),
    )
    init: Literal["default", "gaussian", "pissa", "olora", "loftq"] = Field(
        "default", description="How LoRA weights start.", json_schema_extra=advanced()
    )
    modules_to_save: list[str] = Field(
        default_factory=list,
        description="Modules trained in full and saved beside the adapter (e.g. lm_head, embed_tokens).",
        json_schema_extra=advanced(),
    )
    freeze_trainable_layers: int = Field(
        2, ge=1, le=1000, description="freeze method: how many of the last decoder layers are trained."
    )

    @property
    def is_lora(self) -> bool:
        """Whether the run trains a peft adapter on top of its base (else it changes the model's own weights)."""
        return self.method == "lora"

    @field_validator("target_modules", mode="before")
    @classmethod
    def _split_module_list(cls, value: Any) -> Any:
        """Accept "q_proj, v_proj" from a form or CLI as a list; keep the keywords auto / all-linear."""
        if isinstance(value, str) and value.strip() not in ("auto", "all-linear"):
            names = [name.strip() for name in value.split(",") if name.strip()]
            if not names:
                raise ValueError(FIELD_MESSAGES["target_modules_empty"])
            return names
        if isinstance(value, str):
            return value.strip()
        return value


Precision = Literal["auto", "fp32", "bf16", "fp16"]
Scheduler = Literal[
    "linear",
    "cosine",
    "cosine_with_restarts",
    "cosine_with_min_lr",
    "polynomial",
    "constant",
    "constant_with_warmup",
    "inverse_sqrt",
    "warmup_stable_decay",
]
Optimizer = Literal[
    "adamw_torch",
    "adamw_torch_fused",
    "adafactor",
    "sgd",
    "adamw_bnb_8bit",
    "paged_adamw_8bit",
    "paged_adamw_32bit",
    "lion_8bit",
    "paged_lion_8bit",
]
Strategy = Literal["no", "steps", "epoch"]
# The trackers a run can log to besides its own metrics.jsonl (transformers' report_to names).
Tracker = Literal["tensorboard", "wandb", "trackio"]
MAX_TRACKIO_NAME = 96  # the hub's limit on a repo name (a Space's); trackio's projects are file names
TRACKIO_PROJECT = re.compile(r"[A-Za-z0-9_-]+")
TRACKIO_SPACE = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*/)?[A-Za-z0-9][A-Za-z0-9._-]*")


class EarlyStopping(Section):
    """Stop the run once the eval metric has not improved for ``patience`` evaluations in a row (transformers'
    EarlyStoppingCallback); the best checkpoint becomes the result. engine.config.stopping checks what it needs."""

    patience: int | None = Field(
        None,
        ge=1,
        le=10_000,
        description=(
            "Evaluations in a row without improvement before the run stops early (completed, with the best "
            "checkpoint as its result); empty: off. Needs eval_strategy steps or epoch and a checkpoint at each "
            "evaluation (the same save_strategy; save_steps a multiple of eval_steps)."
        ),
    )
    threshold: float = Field(
        0.0, ge=0, le=1e6, description="How much the metric must beat the best so far by to count as an improvement."
    )
    metric: str = Field(
        "eval_loss",
        max_length=200,
        description=(
            "The evaluation metric watched, as logged (eval_loss, eval_mean_token_accuracy, ...): lower is better "
            "for a name that ends in loss, higher for any other."
        ),
    )

    @field_validator("metric")
    @classmethod
    def _an_eval_metric(cls, value: str) -> str:
        """The name the Trainer logs the metric under: transformers reads it as ``eval_`` + the rest."""
        if not value.startswith("eval_") or value == "eval_" or any(char.isspace() for char in value):
            raise ValueError(FIELD_MESSAGES["eval_metric_name"])
        return value

    @property
    def enabled(self) -> bool:
        """Whether the run stops early."""
        return self.patience is not None


class TrainSection(Section):
    """The training loop: the knobs of transformers' Trainer / TRL's SFTConfig."""

    learning_rate: float = Field(2e-4, gt=0, le=1, description="Peak learning rate.")
    num_epochs: float = Field(1.0, gt=0, le=1000, description="Passes over the training data (if max_steps is -1).")
    max_steps: int = Field(-1, ge=-1, le=MAX_COUNT, description="Optimizer steps to run; -1 runs num_epochs instead.")
    per_device_batch_size: int = Field(4, ge=1, le=4096, description="Examples per device per forward pass.")
    eval_batch_size: int = Field(
        8, ge=1, le=4096, description="Examples per device per evaluation pass.", json_schema_extra=advanced()
    )
    gradient_accumulation_steps: int = Field(
        1, ge=1, le=1024, description="Forward passes summed into one optimizer step."
    )
    lr_scheduler: Scheduler = Field("cosine", description="Learning-rate schedule after warm-up.")
    warmup: float = Field(
        0.0, ge=0, le=MAX_COUNT, description="Warm-up: a fraction of the steps if < 1, a number of steps if >= 1."
    )
    weight_decay: float = Field(0.0, ge=0, le=10, description="Decoupled weight decay.", json_schema_extra=advanced())
    optimizer: Optimizer = Field(
        "adamw_torch",
        description="Optimizer; the bnb and paged ones save memory (paged ones matter on a GPU).",
    )
    max_grad_norm: float = Field(1.0, ge=0, le=1e6, description="Clip gradients to this norm (0 turns clipping off).")
    logging_steps: int = Field(1, ge=1, le=100000, description="Log loss, learning rate and grad norm every N steps.")
    eval_strategy: Strategy = Field("no", description="When to evaluate: never, every eval_steps, or every epoch.")
    eval_steps: int = Field(50, ge=1, le=MAX_COUNT, description="Evaluate every N steps (eval_strategy steps).")
    eval_on_start: bool = Field(
        False, description="Evaluate once before the first step (a baseline).", json_schema_extra=advanced()
    )
    save_strategy: Strategy = Field(
        "steps", description="When to save a resumable checkpoint: never, every save_steps, or every epoch."
    )
    save_steps: int = Field(
        100, ge=1, le=MAX_COUNT, description="Save a checkpoint every N steps (save_strategy steps)."
    )
    save_total_limit: int | None = Field(
        3,
        ge=1,
        le=MAX_COUNT,
        description="Keep at most this many checkpoints (empty: keep all).",
        json_schema_extra=advanced(),
    )
    early_stopping: EarlyStopping = Field(
        default_factory=EarlyStopping,
        description="Stop when the evaluations stop improving, keeping the best checkpoint as the result.",
    )
    seed: int = Field(42, ge=0, le=2**32 - 1, description="Random seed for data order, dropout and init.")
    full_determinism: bool = Field(
        False, description="Deterministic kernels everywhere (slower).", json_schema_extra=advanced()
    )
    precision: Precision = Field(
        "auto", description="Training precision: auto = fp32 on CPU, bf16 on GPUs that have it, else fp16."
    )
    gradient_checkpointing: Literal["auto", "on", "off"] = Field(
        "auto",
        description="Recompute activations to save memory: auto = on for quantized GPU runs, off on CPU.",
    )
    neftune_noise_alpha: float | None = Field(
        None,
        gt=0,
        le=100,
        description="NEFTune: noise on the embeddings (e.g. 5); empty for none.",
        json_schema_extra=advanced(),
    )
    label_smoothing: float = Field(0.0, ge=0, lt=1, description="Label smoothing factor.", json_schema_extra=advanced())
    auto_find_batch_size: bool = Field(
        False, description="Halve the batch size on out-of-memory and retry.", json_schema_extra=advanced()
    )
    report_to: list[Tracker] = Field(
        default_factory=list,
        description=(
            "Also log the metrics to these trackers, several at once if you like (empty: none). tensorboard: event "
            "files in the run's checkpoints/runs folder; wandb: Weights & Biases (token from WANDB_API_KEY); "
            "trackio: Hugging Face's local-first tracker, into WORKSPACE/trackio (dashboard: trackio show)."
        ),
        json_schema_extra=advanced(),
    )
    trackio_project: str | None = Field(
        None,
        max_length=MAX_TRACKIO_NAME,
        description=(
            "trackio's project: the runs of one project share its dashboard. Letters, digits, - and _; "
            "empty: the workspace folder's name (a run directory outside a workspace: the run's id)."
        ),
        json_schema_extra=advanced(),
    )
    trackio_space: str | None = Field(
        None,
        max_length=2 * MAX_TRACKIO_NAME + 1,
        description=(
            "A Hugging Face Space (user/name; a bare name is in the logged-in account) that trackio also syncs the "
            "metrics to while training, created if missing (public unless your account makes it private); needs "
            "HF_TOKEN with write access. Empty: local only."
        ),
        json_schema_extra=advanced(),
    )
    max_length: int = Field(1024, ge=8, le=1_048_576, description="Longest sequence in tokens; longer rows are cut.")
    packing: bool = Field(
        False,
        description=(
            "Pack several short examples into one sequence (TRL's best-fit packing: each row keeps its own "
            "positions and attends only to itself, so packing is always padding-free). sft only."
        ),
        json_schema_extra=advanced(),
    )
    padding_free: Literal["auto", "on", "off"] = Field(
        "auto",
        description=(
            "Train without padding: a batch's rows are joined into one sequence whose positions restart at each "
            "row, and attention never crosses rows, so the loss and gradients are those of a padded batch without "
            "computing the padding. auto = on for sft on a CPU (1.8-1.9x the tokens/s of padded batches on rows of "
            "20-1,000 tokens, benchmarks/throughput_real.py) and on a GPU with flash-attn (its varlen kernel; without "
            "it padded batches measured faster), off for dpo, kto, orpo and grpo, which batch pairs or samples."
        ),
    )
    group_by_length: bool = Field(
        False,
        description=(
            "Put rows of similar length in the same batch (transformers' length-grouped sampler). It cuts padding "
            "when padding_free is off; with padding-free batches there is no padding to cut, and batches stop "
            "being a uniform random draw, so it is off by default. sft only."
        ),
        json_schema_extra=advanced(),
    )
    liger_kernel: Literal["auto", "on", "off"] = Field(
        "auto",
        description=(
            "Liger's Triton kernels (RMSNorm, RoPE, SwiGLU; TRL's sft keeps its own fused loss): less memory, and "
            "more speed on wide models. auto = on for a GPU run when liger-kernel is installed and the model's "
            "hidden size is at least 2048 (at 768 they made training slower: 0.80x); they need a GPU."
        ),
        json_schema_extra=advanced(),
    )

    @field_validator("max_steps")
    @classmethod
    def _steps_to_run(cls, value: int) -> int:
        """0 steps is no run at all (transformers trained one step and called it complete): refused, with the two
        values that run something."""
        if value == 0:
            raise ValueError(FIELD_MESSAGES["max_steps_zero"])
        return value

    @field_validator("report_to", mode="before")
    @classmethod
    def _trackers_as_list(cls, value: Any) -> Any:
        """One tracker written as text (``report_to: wandb``, as older configs have it) is a list of one; ``none``
        alone is the empty list."""
        if isinstance(value, str):
            value = [value]
        if isinstance(value, list) and "none" in value:
            if len(value) > 1:
                raise ValueError(FIELD_MESSAGES["report_to_none"])
            return []
        return value

    @field_validator("report_to")
    @classmethod
    def _each_tracker_once(cls, value: list[str]) -> list[str]:
        """Each tracker once (the Trainer would add a second callback that logs everything twice)."""
        return list(dict.fromkeys(value))

    @field_validator("trackio_project")
    @classmethod
    def _trackio_project_name(cls, value: str | None) -> str | None:
        """The project names trackio's files (PROJECT.db): the characters it keeps in a file name, so the
        dashboard shows the name as written. Blank is no name."""
        if value is None or not value.strip():
            return None
        if not TRACKIO_PROJECT.fullmatch(value.strip()):
            raise ValueError(FIELD_MESSAGES["trackio_project_name"])
        return value.strip()

    @field_validator("trackio_space")
    @classmethod
    def _trackio_space_id(cls, value: str | None) -> str | None:
        """A Space id as the hub spells one: ``user/name`` (or a bare name, in the logged-in user's namespace)."""
        if value is None or not value.strip():
            return None
        if not TRACKIO_SPACE.fullmatch(value.strip()):
            raise ValueError(FIELD_MESSAGES["trackio_space_id"])
        return value.strip()
