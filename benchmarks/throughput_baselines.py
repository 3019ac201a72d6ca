"""The two baselines of benchmarks/throughput_real.py, each run in a fresh interpreter by its ``--child`` arm: a bare
transformers Trainer + peft script as a user writes it by hand, and TRL's SFTTrainer with SFTConfig's defaults. Both
train LoRA r 8 on every linear layer of the model given, on the same alpaca rows, and report the path their trainer
took (in the engine's words), their steady tokens/s and their peak memory."""

from __future__ import annotations

import json
import resource
import tempfile
from pathlib import Path
from typing import Any

from throughput import _TokenClock, steady_tokens_per_second

MAX_LENGTH, RANK, ALPHA, LEARNING_RATE, SEED = 1024, 8, 16, 2e-4, 42


def alpaca_messages(row: dict[str, str]) -> list[dict[str, str]]:
    """An alpaca row as a conversation, as a user writes it by hand (and as engine.data reads alpaca)."""
    user = row["instruction"] + (f"\n\n{row['input']}" if row.get("input", "").strip() else "")
    return [{"role": "user", "content": user}, {"role": "assistant", "content": row["output"]}]


def trainer_path(trainer: Any) -> str:
    """The path a baseline's trainer took, read off the trainer, its model and PyTorch's sdpa flags, in the
    engine's words."""
    import torch

    from engine.training.run_path import RunPath

    args, model = trainer.args, trainer.model
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    device = "cuda" if torch.cuda.is_available() and not args.use_cpu else "cpu"
    return RunPath(
        device=device,
        weights=str(next(base.parameters()).dtype).removeprefix("torch."),
        precision="bf16" if args.bf16 else "fp16" if args.fp16 else "fp32",
        attention=base.config._attn_implementation,
        cudnn_attention=torch.backends.cuda.cudnn_sdp_enabled() if device == "cuda" else None,
        padding_free=bool(getattr(args, "padding_free", False)),
        liger=bool(args.use_liger_kernel),
        tf32=args.tf32,
        checkpointing=bool(args.gradient_checkpointing),
    ).line()


def lora_config() -> Any:
    from peft import LoraConfig

    return LoraConfig(task_type="CAUSAL_LM", r=RANK, lora_alpha=ALPHA, lora_dropout=0.0, target_modules="all-linear")


def peak_memory_mb() -> float:
    """Peak memory of this process: CUDA memory on a GPU, resident memory otherwise (as the engine logs it)."""
    import torch

    if torch.cuda.is_available():
        return torch.cuda.max_memory_allocated() / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_bare(data: Path, steps: int, batch: int, model: Path) -> tuple[str, float, float]:
    """transformers Trainer + peft, fp32, answers-only labels, the default padding collator."""
    import torch
    from peft import get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer, DataCollatorForSeq2Seq, Trainer, TrainingArguments

    torch.manual_seed(SEED)
    tokenizer = AutoTokenizer.from_pretrained(model)
    examples = []
    for row in json.loads(data.read_text(encoding="utf-8")):
        encoded = tokenizer.apply_chat_template(
            alpaca_messages(row),
            return_assistant_tokens_mask=True,
            return_dict=True,
            truncation=True,
            max_length=MAX_LENGTH,
        )
        mask = encoded["assistant_masks"]
        labels = [tok if keep else -100 for tok, keep in zip(encoded["input_ids"], mask, strict=True)]
        examples.append({"input_ids": encoded["input_ids"], "labels": labels})
    base = AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32)
    peft_model = get_peft_model(base, lora_config())
    points: list[tuple[float, int]] = []
    with tempfile.TemporaryDirectory() as output:
        args = TrainingArguments(
            output_dir=output,
            max_steps=steps,
            per_device_train_batch_size=batch,
            learning_rate=LEARNING_RATE,
            lr_scheduler_type="cosine",
            optim="adamw_torch",  # the engine's default optimizer
            use_cpu=not torch.cuda.is_available(),
            bf16=torch.cuda.is_available() and torch.cuda.is_bf16_supported(),  # what a GPU user sets
            save_strategy="no",
            report_to=[],
            logging_steps=1,
            include_num_input_tokens_seen="non_padding",
            disable_tqdm=True,
            seed=SEED,
        )
        collator = DataCollatorForSeq2Seq(tokenizer, padding=True)
        trainer = Trainer(
            model=peft_model,
            args=args,
            train_dataset=examples,
            data_collator=collator,
            callbacks=[_TokenClock.make(points)],
        )
        trainer.train()
    return trainer_path(trainer), steady_tokens_per_second(points), peak_memory_mb()


def run_trl_defaults(data: Path, steps: int, batch: int, model: Path) -> tuple[str, float, float]:
    """TRL's SFTTrainer with SFTConfig's defaults: only steps, batch, learning rate, seed and LoRA are set."""
    import torch
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    rows = [
        {"prompt": messages[:1], "completion": messages[1:]}
        for messages in map(alpaca_messages, json.loads(data.read_text(encoding="utf-8")))
    ]
    points: list[tuple[float, int]] = []
    with tempfile.TemporaryDirectory() as output:
        args = SFTConfig(
            output_dir=output,
            max_steps=steps,
            per_device_train_batch_size=batch,
            learning_rate=LEARNING_RATE,
            save_strategy="no",
            report_to=[],
            logging_steps=1,  # where the clock reads; not a speed setting
            include_num_input_tokens_seen="non_padding",
            disable_tqdm=True,
            seed=SEED,
            max_length=MAX_LENGTH,  # SFTConfig's default too
            use_cpu=not torch.cuda.is_available(),  # SFTConfig refuses a machine without a GPU otherwise
        )
        trainer = SFTTrainer(
            model=str(model),
            args=args,
            train_dataset=Dataset.from_list(rows),
            peft_config=lora_config(),
            callbacks=[_TokenClock.make(points)],
        )
        trainer.train()
    return trainer_path(trainer), steady_tokens_per_second(points), peak_memory_mb()
