"""Does the bundled demo show a real skill? LoRA-tune the demo model with plain transformers + peft.

No engine code is used except ``engine.evaluate.scoring`` (exact match by greedy decoding). For each seed:
measure the base model's held-out exact match, LoRA-tune it on ``demo_sft_train.jsonl`` (loss only on
the assistant tokens, from the chat template's generation markers), then measure the tuned model.

    python benchmarks/demo_accuracy_bare.py              # the default preset, seeds 0 1 2
    python benchmarks/demo_accuracy_bare.py --seeds 0 --max-steps 200 --lr 3e-3

Targets on 2 CPU cores: training at most ~90 s, base at most 20%, tuned at least 80% (aim for 90%).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
from peft import LoraConfig, get_peft_model  # noqa: E402
from transformers import (  # noqa: E402
    AutoModelForCausalLM,
    AutoTokenizer,
    Trainer,
    TrainingArguments,
    set_seed,
)

from engine.evaluate.scoring import exact_match_accuracy, generate_predictions  # noqa: E402

MODEL_DIR = ROOT / "assets" / "demo-model"
DATA_DIR = ROOT / "assets" / "datasets"


@dataclass
class Preset:
    """The LoRA and training settings under test (the engine's default demo preset copies them)."""

    r: int = 16
    alpha: int = 32
    dropout: float = 0.0
    target_modules: str = "all-linear"
    lr: float = 3e-3
    scheduler: str = "cosine"
    warmup: float = 0.05
    batch_size: int = 16
    grad_accum: int = 1
    max_steps: int = 250
    max_length: int = 64


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Rows of a JSON-lines file."""
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def tokenize_rows(tokenizer: Any, rows: list[dict], max_length: int) -> list[dict[str, list[int]]]:
    """Chat-template each row; labels are the assistant tokens (incl. eos), -100 elsewhere."""
    examples = []
    for row in rows:
        encoded = tokenizer.apply_chat_template(
            row["messages"],
            return_assistant_tokens_mask=True,
            return_dict=True,
            truncation=True,
            max_length=max_length,
        )
        ids, mask = encoded["input_ids"], encoded["assistant_masks"]
        labels = [tok if keep else -100 for tok, keep in zip(ids, mask, strict=True)]
        examples.append({"input_ids": ids, "labels": labels})
    return examples


def pad_batch(pad_id: int):
    """A collator that right-pads input_ids (pad id), labels (-100) and builds the attention mask."""

    def collate(examples: list[dict[str, list[int]]]) -> dict[str, torch.Tensor]:
        width = max(len(e["input_ids"]) for e in examples)

        def pad(seq: list[int], value: int) -> list[int]:
            return seq + [value] * (width - len(seq))

        return {
            "input_ids": torch.tensor([pad(e["input_ids"], pad_id) for e in examples]),
            "labels": torch.tensor([pad(e["labels"], -100) for e in examples]),
            "attention_mask": torch.tensor([pad([1] * len(e["input_ids"]), 0) for e in examples]),
        }

    return collate


def lora_config(preset: Preset) -> LoraConfig:
    """The adapter configuration for the preset."""
    return LoraConfig(
        r=preset.r,
        lora_alpha=preset.alpha,
        lora_dropout=preset.dropout,
        target_modules=preset.target_modules,
        task_type="CAUSAL_LM",
    )


def training_args(preset: Preset, seed: int, output_dir: str) -> TrainingArguments:
    """CPU-friendly arguments: fp32, no gradient checkpointing, no saving."""
    return TrainingArguments(
        output_dir=output_dir,
        per_device_train_batch_size=preset.batch_size,
        gradient_accumulation_steps=preset.grad_accum,
        learning_rate=preset.lr,
        lr_scheduler_type=preset.scheduler,
        warmup_steps=preset.warmup,
        max_steps=preset.max_steps,
        weight_decay=0.0,
        logging_steps=10,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        seed=seed,
        data_seed=seed,
        dataloader_num_workers=0,
        disable_tqdm=True,
    )


def run_seed(preset: Preset, seed: int, model_dir: Path, train_rows: list[dict], eval_rows: list[dict]) -> dict:
    """Base accuracy, LoRA training, tuned accuracy for one seed."""
    set_seed(seed)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    base = exact_match_accuracy(model, tokenizer, eval_rows)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # get_peft_model's deprecation notice
        model = get_peft_model(model, lora_config(preset))
    examples = tokenize_rows(tokenizer, train_rows, preset.max_length)
    with tempfile.TemporaryDirectory() as output_dir:
        trainer = Trainer(
            model=model,
            args=training_args(preset, seed, output_dir),
            train_dataset=examples,
            data_collator=pad_batch(tokenizer.pad_token_id),
        )
        started = time.perf_counter()
        trainer.train()
        train_seconds = time.perf_counter() - started
    losses = [round(e["loss"], 3) for e in trainer.state.log_history if "loss" in e]
    predictions = generate_predictions(model, tokenizer, eval_rows)
    tuned = sum(p.correct for p in predictions) / len(predictions)
    wrong = [(p.reference, p.prediction) for p in predictions if not p.correct][:5]
    return {"seed": seed, "base": base, "tuned": tuned, "train_s": train_seconds, "losses": losses, "wrong": wrong}


def parse_args() -> argparse.Namespace:
    """Seeds, folders, plus an override flag for every preset field."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--model-dir", type=Path, default=MODEL_DIR)
    parser.add_argument("--data-dir", type=Path, default=DATA_DIR)
    defaults = Preset()
    for name, value in vars(defaults).items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=type(value), default=value)
    args = parser.parse_args()
    args.preset = Preset(**{name: getattr(args, name) for name in vars(defaults)})
    return args


def main() -> None:
    """Run every seed and print per-seed and summary figures."""
    args = parse_args()
    preset = args.preset
    torch.set_num_threads(os.cpu_count() or 1)
    train_rows = read_jsonl(args.data_dir / "demo_sft_train.jsonl")
    eval_rows = read_jsonl(args.data_dir / "demo_sft_eval.jsonl")
    print(f"preset: {preset}")
    print(f"train rows {len(train_rows)}, eval rows {len(eval_rows)}, threads {torch.get_num_threads()}")
    for seed in args.seeds:
        result = run_seed(preset, seed, args.model_dir, train_rows, eval_rows)
        print(
            f"seed {seed}: base exact match {result['base']:.1%}, tuned {result['tuned']:.1%}, "
            f"training {result['train_s']:.1f}s"
        )
        print(f"  loss every 10 steps: {result['losses']}")
        print(f"  first mistakes (reference, prediction): {result['wrong']}")


if __name__ == "__main__":
    main()
