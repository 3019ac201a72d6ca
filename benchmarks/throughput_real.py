"""Training throughput on a real workload: the engine's defaults against a bare Trainer + peft script and TRL's
SFTConfig defaults, on a ~100M-parameter LLaMA and rows of 20 to 1,000+ tokens.

The model is LLaMA-architecture (hidden 768, 12 layers, 12 heads, MLP 2048; 87M parameters with the bundled demo
tokenizer's 1,295-token vocabulary), built once from a config with random weights and cached under
~/.cache/tuning-studio-bench/ (this measures speed, not quality). The data is LLaMA-Factory's alpaca_en_demo.json
(its first ``--rows`` rows, the same file for every arm), max length 1024, batch 4 (``--batch``), LoRA r 8 on
every linear layer, fp32 on a CPU. Each arm is a separate process; the arms alternate within one invocation, in
reverse order every other round, as benchmarks/throughput.py does. Every arm draws the same batches (the
Trainer's random sampler with the same seed over the same rows).

Tokens/s counts the non-padding tokens between the first and the last logging step (every step logs), so process
start, model loading and the first step are left out of every arm alike. Peak memory is the process's peak RSS on
a CPU and ``torch.cuda.max_memory_allocated`` on a GPU (the engine's own ``memory_mb``, measured the same way).
Before the rounds the script prints the path each arm takes: device, weights' dtype and autocast, attention
kernel, padding-free batches, Liger's kernels, TF32 and gradient checkpointing (the engine arms as the engine's own
resolvers decide them on this machine, the baselines as their trainers were built).

The dataset is read from ``$TUNING_STUDIO_BENCH_DATASETS/alpaca_en_demo.json`` (default ``../shared/datasets``),
the model cached under ``$TUNING_STUDIO_BENCH_CACHE`` (default ``~/.cache/tuning-studio-bench``); on a GPU machine
``benchmarks/gpu_figures.sh`` sets both.

    python benchmarks/throughput_real.py                        # 3 rounds, 4 steps an arm (trl-defaults: 3)
    python benchmarks/throughput_real.py --arms engine engine-padded engine-sdpa-mask engine-grouped --rounds 2

Arms:
- engine:           python -m engine train with the engine's defaults (the product)
- bare:             transformers Trainer + peft, fp32, DataCollatorForSeq2Seq (pads each batch to its longest row)
- trl-defaults:     TRL SFTTrainer with SFTConfig's defaults (bf16 and gradient checkpointing; padded batches)
- engine-padded:    the engine with train.padding_free off (what the defaults replace)
- engine-sdpa-mask: padding-free, attention by transformers' sdpa with its block-diagonal mask
- engine-grouped:   padded batches of similar lengths (train.group_by_length, padding_free off)
- engine-grouped-free: padding-free batches of similar lengths (the same batches as engine-grouped)
- engine-packed:    TRL's best-fit packing to max_length (train.packing)
- engine-no-liger:  the engine with train.liger_kernel off (on a GPU with liger-kernel installed, what Liger adds)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from throughput import (  # noqa: E402
    _TokenClock,
    alternated_rounds,
    engine_train_events,
    median_interval,
    steady_tokens_per_second,
)

from engine.config import RunConfig  # noqa: E402

CACHE = Path(os.environ.get("TUNING_STUDIO_BENCH_CACHE", Path.home() / ".cache" / "tuning-studio-bench"))
MODEL_DIR = CACHE / "llama-87m-demo-vocab"
DATASETS = Path(os.environ.get("TUNING_STUDIO_BENCH_DATASETS", ROOT.parent / "shared" / "datasets"))
DATASET = DATASETS / "alpaca_en_demo.json"
BATCH, MAX_LENGTH, RANK, ALPHA, LEARNING_RATE, SEED = 4, 1024, 8, 16, 2e-4, 42
# Train-section settings of each engine arm on top of the engine's defaults.
ENGINE_VARIANTS: dict[str, dict[str, Any]] = {
    "engine": {},
    "engine-padded": {"train": {"padding_free": "off"}},
    "engine-sdpa-mask": {"train": {"padding_free": "on"}, "model": {"attn_implementation": "sdpa"}},
    "engine-grouped": {"train": {"padding_free": "off", "group_by_length": True}},
    "engine-grouped-free": {"train": {"group_by_length": True}},
    "engine-packed": {"train": {"packing": True}},
    "engine-no-liger": {"train": {"liger_kernel": "off"}},
}
BASELINES = {"bare": "bare Trainer+peft", "trl-defaults": "TRL SFTConfig defaults"}


def build_model() -> Path:
    """The benchmark's model and tokenizer, built on the first run and reused after (outside the repository)."""
    if (MODEL_DIR / "model.safetensors").exists():
        return MODEL_DIR
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(ROOT / "assets" / "demo-model")
    tokenizer.model_max_length = 2048  # the demo model's is 256
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=768,
        num_hidden_layers=12,
        num_attention_heads=12,
        num_key_value_heads=12,
        intermediate_size=2048,
        max_position_embeddings=2048,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=False,
    )
    torch.manual_seed(0)
    staging = MODEL_DIR.with_name(MODEL_DIR.name + ".partial")
    LlamaForCausalLM(config).save_pretrained(staging)
    tokenizer.save_pretrained(staging)
    staging.rename(MODEL_DIR)
    return MODEL_DIR


def write_rows(rows: int, folder: Path) -> Path:
    """The first ``rows`` rows of alpaca_en_demo.json, the one file every arm reads."""
    data = json.loads(DATASET.read_text(encoding="utf-8"))[:rows]
    path = folder / "alpaca_rows.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def engine_config(arm: str, data: Path, steps: int, batch: int = BATCH) -> RunConfig:
    """The run the engine arm trains: the benchmark's settings, everything else the engine's defaults."""
    overrides = ENGINE_VARIANTS[arm]
    return RunConfig.model_validate(
        {
            "model": {"name_or_path": str(build_model()), **overrides.get("model", {})},
            "adapter": {"method": "lora", "r": RANK, "alpha": ALPHA, "dropout": 0.0, "target_modules": "all-linear"},
            "data": {"path": str(data)},
            "train": {
                "per_device_batch_size": batch,
                "max_length": MAX_LENGTH,
                "learning_rate": LEARNING_RATE,
                "max_steps": steps,
                "logging_steps": 1,
                "save_strategy": "no",
                "seed": SEED,
                **overrides.get("train", {}),
            },
        }
    )


def run_engine(arm: str, data: Path, steps: int, batch: int = BATCH) -> tuple[float, float]:
    """Tokens/s and peak memory (MiB) of ``python -m engine train``, from its own metrics.jsonl."""
    events = engine_train_events(engine_config(arm, data, steps, batch))
    rate = steady_tokens_per_second([(event["time"], event["num_input_tokens_seen"]) for event in events])
    return rate, max(event.get("memory_mb", 0.0) for event in events)


def alpaca_messages(row: dict[str, str]) -> list[dict[str, str]]:
    """An alpaca row as a conversation, as a user writes it by hand (and as engine.data reads alpaca)."""
    user = row["instruction"] + (f"\n\n{row['input']}" if row.get("input", "").strip() else "")
    return [{"role": "user", "content": user}, {"role": "assistant", "content": row["output"]}]


def engine_path(config: RunConfig) -> str:
    """The path an engine run takes on this machine, as the engine's own resolvers decide it (engine.training:
    modeling.load_model and builders.common_training_kwargs call the same functions)."""
    from engine.training.attention import resolve_attn_implementation, resolve_padding_free
    from engine.training.hardware import (
        detect_hardware,
        resolve_device,
        resolve_dtype,
        resolve_gradient_checkpointing,
        resolve_liger,
        resolve_precision,
        resolve_tf32,
    )

    hardware = detect_hardware()
    device, precision = resolve_device(config, hardware), resolve_precision(config, hardware)
    attention = resolve_attn_implementation(config, hardware)
    return _path_line(
        device,
        resolve_dtype(config.model.dtype, config, hardware),
        precision,
        attention or "transformers' default (sdpa)",
        resolve_padding_free(config, hardware),
        resolve_liger(config, hardware),
        resolve_tf32(config, hardware),
        resolve_gradient_checkpointing(config, hardware),
    )


def trainer_path(trainer: Any) -> str:
    """The path a baseline's trainer took, read off the trainer and its model."""
    import torch

    args, model = trainer.args, trainer.model
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    precision = "bf16" if args.bf16 else "fp16" if args.fp16 else "fp32"
    device = "cuda" if torch.cuda.is_available() and not args.use_cpu else "cpu"
    dtype = str(next(base.parameters()).dtype).removeprefix("torch.")
    return _path_line(
        device,
        dtype,
        precision,
        base.config._attn_implementation,
        bool(getattr(args, "padding_free", False)),
        bool(args.use_liger_kernel),
        args.tf32,
        bool(args.gradient_checkpointing),
    )


def _path_line(
    device: str,
    dtype: str,
    precision: str,
    attention: str,
    padding_free: bool,
    liger: bool,
    tf32: bool | None,
    checkpointing: bool,
) -> str:
    autocast = "" if precision == "fp32" else f", {precision} autocast"
    tf32_text = "untouched" if tf32 is None else "on" if tf32 else "off"
    return (
        f"{device}, {dtype} weights{autocast}, attention {attention}, padding-free {'on' if padding_free else 'off'}, "
        f"liger {'on' if liger else 'off'}, tf32 {tf32_text}, gradient checkpointing {'on' if checkpointing else 'off'}"
    )


def lora_config() -> Any:
    from peft import LoraConfig

    return LoraConfig(task_type="CAUSAL_LM", r=RANK, lora_alpha=ALPHA, lora_dropout=0.0, target_modules="all-linear")


def peak_memory_mb() -> float:
    """Peak memory of this process: CUDA memory on a GPU, resident memory otherwise (as the engine logs it)."""
    import torch

    if torch.cuda.is_available():
        return torch.cuda.max_memory_allocated() / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_bare(data: Path, steps: int, batch: int = BATCH) -> tuple[str, float, float]:
    """transformers Trainer + peft, fp32, answers-only labels, the default padding collator."""
    import torch
    from peft import get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer, DataCollatorForSeq2Seq, Trainer, TrainingArguments

    torch.manual_seed(SEED)
    tokenizer = AutoTokenizer.from_pretrained(build_model())
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
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(build_model(), dtype=torch.float32), lora_config())
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
            model=model, args=args, train_dataset=examples, data_collator=collator, callbacks=[_TokenClock.make(points)]
        )
        trainer.train()
    return trainer_path(trainer), steady_tokens_per_second(points), peak_memory_mb()


def run_trl_defaults(data: Path, steps: int, batch: int = BATCH) -> tuple[str, float, float]:
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
            model=str(build_model()),
            args=args,
            train_dataset=Dataset.from_list(rows),
            peft_config=lora_config(),
            callbacks=[_TokenClock.make(points)],
        )
        trainer.train()
    return trainer_path(trainer), steady_tokens_per_second(points), peak_memory_mb()


def child_arm(arm: str, data: Path, steps: int, batch: int = BATCH) -> tuple[str, float, float]:
    """Run a baseline arm in a fresh interpreter (no arm inherits another's warm caches or memory); returns its
    path, tokens/s and peak memory."""
    command = [sys.executable, __file__, "--child", arm, "--data", str(data), "--steps", str(steps)]
    command += ["--batch", str(batch)]
    done = subprocess.run(command, check=False, capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        print(f"{arm} failed (exit {done.returncode}), the end of its output:\n{done.stderr[-3000:]}", file=sys.stderr)
        raise subprocess.CalledProcessError(done.returncode, command)
    lines = done.stdout.strip().splitlines()
    rate, memory = lines[-1].split()
    return lines[-2].removeprefix("path: "), float(rate), float(memory)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arms", nargs="+", default=["engine", "bare", "trl-defaults"])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=4, help="optimizer steps of each arm (at least 2)")
    parser.add_argument("--trl-steps", type=int, default=3, help="steps of the trl-defaults arm (bf16 on a CPU)")
    parser.add_argument("--rows", type=int, default=200, help="first rows of alpaca_en_demo.json to train on")
    parser.add_argument("--batch", type=int, default=BATCH, help="rows per batch (per_device_batch_size) of every arm")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.child:
        import warnings

        warnings.filterwarnings("ignore")
        run = run_bare if args.child == "bare" else run_trl_defaults
        path, rate, memory = run(args.data, args.steps, args.batch)
        print(f"path: {path}")
        print(rate, memory)
        return
    unknown = [arm for arm in args.arms if arm not in ENGINE_VARIANTS and arm not in BASELINES]
    if unknown or "engine" not in args.arms or args.steps < 2 or args.trl_steps < 2:
        parser.error("--arms must include engine and name known arms; --steps and --trl-steps at least 2")
    started = time.perf_counter()
    build_model()
    memory: dict[str, list[float]] = {arm: [] for arm in args.arms}
    paths: dict[str, str] = {}
    failed: set[str] = set()
    with tempfile.TemporaryDirectory() as tmp:
        data = write_rows(args.rows, Path(tmp))
        for arm in args.arms:
            if arm in ENGINE_VARIANTS:
                paths[arm] = engine_path(engine_config(arm, data, args.steps, args.batch))
                print(f"path {arm}: {paths[arm]}", flush=True)

        def arm_figure(arm: str) -> float:
            """The arm's tokens/s; NaN once it has failed (the other arms go on, its later rounds are skipped)."""
            if arm in failed:
                return math.nan
            try:
                if arm in ENGINE_VARIANTS:
                    rate, peak = run_engine(arm, data, args.steps, args.batch)
                else:
                    steps = args.trl_steps if arm == "trl-defaults" else args.steps
                    path, rate, peak = child_arm(arm, data, steps, args.batch)
                    if arm not in paths:
                        paths[arm] = path
                        print(f"path {arm}: {path}", flush=True)
            except subprocess.CalledProcessError as exc:
                print(f"arm {arm} failed: {exc}; its later rounds are skipped", flush=True)
                failed.add(arm)
                return math.nan
            memory[arm].append(peak)
            return rate

        seen: dict[str, list[float]] = {arm: [] for arm in args.arms}

        def recorded(arm: str) -> float:
            seen[arm].append(arm_figure(arm))
            return seen[arm][-1]

        # A time limit (timeout, or a device call's end) sends SIGTERM: report the rounds that every arm finished.
        signal.signal(signal.SIGTERM, _interrupt)
        try:
            results = alternated_rounds(
                {arm: (lambda arm=arm: recorded(arm)) for arm in args.arms}, args.rounds, "tokens/s"
            )
        except KeyboardInterrupt:
            done = min(map(len, seen.values()))
            print(f"interrupted: reporting the {done} rounds every arm finished", flush=True)
            if not done:
                return
            results = {arm: values[:done] for arm, values in seen.items()}
            memory = {arm: values[:done] for arm, values in memory.items()}
            args.rounds = done
    report(results, memory, args, paths)
    print(f"wall time: {time.perf_counter() - started:.0f} s")


def report(
    results: dict[str, list[float]], memory: dict[str, list[float]], args: argparse.Namespace, paths: dict[str, str]
) -> None:
    """Each arm's median tokens/s, peak memory and path; the engine's ratio to every other arm with a 95%
    bootstrap interval of the median of the rounds' ratios. An arm that failed is named, not measured."""
    width = max(map(len, results))
    device = _gpu_name()
    where = "GPU max_memory_allocated" if device else "peak RSS"
    print(
        f"\n{MODEL_DIR.name}, {args.rows} rows, batch {args.batch}, max length {MAX_LENGTH}, {args.rounds} rounds, "
        f"{args.steps} steps an arm ({args.trl_steps} for trl-defaults), on {device or 'the CPU'}, medians:"
    )
    for arm, values in results.items():
        finite = [value for value in values if math.isfinite(value)]
        if len(finite) < len(values):
            print(f"  {arm:>{width}}: FAILED ({len(values) - len(finite)} of {len(values)} rounds)")
            continue
        print(
            f"  {arm:>{width}}: {statistics.median(values):8.1f} non-padding tokens/s, "
            f"{where} {max(memory[arm]):7.0f} MiB"
        )
    for arm in results:
        if arm == "engine":
            continue
        ratios = [mine / other for mine, other in zip(results["engine"], results[arm], strict=True)]
        if not all(map(math.isfinite, ratios)):
            print(f"engine / {BASELINES.get(arm, arm)}: not measured (an arm failed)")
            continue
        low, high = median_interval(ratios)
        of_medians = statistics.median(results["engine"]) / statistics.median(results[arm])
        goal = "  (goal >= 1.5)" if arm == "bare" else ""
        print(
            f"engine / {BASELINES.get(arm, arm)}: {of_medians:.2f} of the medians, {statistics.median(ratios):.2f} "
            f"median of the rounds' ratios (95% bootstrap interval {low:.2f}-{high:.2f}){goal}"
        )
    print("paths:")
    for arm in results:
        print(f"  {arm:>{width}}: {paths.get(arm, 'unknown (it failed before it trained)')}")


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _gpu_name() -> str | None:
    import torch

    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else None


if __name__ == "__main__":
    main()
