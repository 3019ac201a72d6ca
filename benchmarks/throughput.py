"""Training throughput: the engine against a bare transformers Trainer + peft script, and TRL's defaults.

All arms train the same model on the same data with the same batch, LoRA settings and number of steps (taken
from a preset, the demo one by default). They run as separate processes, alternated round by round in one
invocation, because these machines are noisy; the engine's ratio to each baseline comes with a 95% bootstrap
interval of the median over the rounds, which says whether the rounds can tell the arms apart at all.
Steady-state tokens/s counts the non-padding tokens between the first and the last logging step (the preset's
``logging_steps``, which every arm logs at) over their wall time, so process start, model loading and the
first step's warm-up are left out of every arm alike.

    python benchmarks/throughput.py                       # demo preset, 40 steps, 2 rounds
    python benchmarks/throughput.py --steps 60 --rounds 3

Arms:
- engine:       python -m engine train PRESET (the product)
- bare:         transformers Trainer + peft LoRA, fp32, hand-written tokenization
- trl-defaults: TRL SFTTrainer with SFTConfig's defaults (bf16 and gradient checkpointing where they apply)
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine.config import RunConfig, load_config  # noqa: E402
from engine.store.paths import find_local_path  # noqa: E402

BASELINE_NAMES = {"bare": "bare Trainer+peft", "trl-defaults": "TRL SFTConfig defaults"}


def steady_tokens_per_second(points: list[tuple[float, int]]) -> float:
    """Tokens/s between the first and the last (time, cumulative tokens) point."""
    (t0, n0), (t1, n1) = points[0], points[-1]
    return (n1 - n0) / (t1 - t0)


def _read_rows(config: RunConfig) -> list[dict[str, Any]]:
    path = find_local_path(config.data.path)
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def _tokenize(tokenizer: Any, rows: list[dict], max_length: int) -> list[dict[str, list[int]]]:
    """Chat template with the assistant mask as labels: what a careful user writes by hand."""
    examples = []
    for row in rows:
        encoded = tokenizer.apply_chat_template(
            row["messages"],
            return_assistant_tokens_mask=True,
            return_dict=True,
            truncation=True,
            max_length=max_length,
        )
        labels = [
            tok if keep else -100 for tok, keep in zip(encoded["input_ids"], encoded["assistant_masks"], strict=True)
        ]
        examples.append({"input_ids": encoded["input_ids"], "labels": labels})
    return examples


class _TokenClock:
    """A TrainerCallback (built lazily) that records (time, tokens seen) at each logging step, as the engine's
    metrics.jsonl does."""

    @staticmethod
    def make(points: list[tuple[float, int]]) -> Any:
        from transformers import TrainerCallback

        class Clock(TrainerCallback):
            def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kwargs: Any) -> None:
                if logs and "loss" in logs:
                    points.append((time.time(), state.num_input_tokens_seen))

        return Clock()


def bare_lora_config(adapter: Any) -> Any:
    """The run's LoRA settings as a bare script writes them: a peft LoraConfig from the adapter section by hand."""
    from peft import LoraConfig

    return LoraConfig(
        task_type="CAUSAL_LM",
        r=adapter.r,
        lora_alpha=adapter.alpha,
        lora_dropout=adapter.dropout,
        target_modules=adapter.target_modules if adapter.target_modules != "auto" else None,
    )


def run_bare(config: RunConfig, steps: int) -> float:
    """The baseline: transformers Trainer + peft, configured by hand the way its docs show."""
    import torch
    from peft import get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer, DataCollatorForSeq2Seq, Trainer, TrainingArguments

    torch.manual_seed(config.train.seed)
    source = str(find_local_path(config.model.name_or_path))
    tokenizer = AutoTokenizer.from_pretrained(source)
    model = AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32)
    model = get_peft_model(
        model,
        bare_lora_config(config.adapter),
    )
    points: list[tuple[float, int]] = []
    with tempfile.TemporaryDirectory() as output:
        trainer = Trainer(
            model=model,
            args=TrainingArguments(
                output_dir=output,
                max_steps=steps,
                per_device_train_batch_size=config.train.per_device_batch_size,
                learning_rate=config.train.learning_rate,
                lr_scheduler_type=config.train.lr_scheduler,
                optim=os.environ.get("BARE_OPTIM", config.train.optimizer),  # the same optimizer as the engine
                use_cpu=True,
                save_strategy="no",
                report_to=[],
                logging_steps=config.train.logging_steps,
                include_num_input_tokens_seen="non_padding",
                disable_tqdm=True,
                seed=config.train.seed,
            ),
            train_dataset=_tokenize(tokenizer, _read_rows(config), config.train.max_length),
            data_collator=DataCollatorForSeq2Seq(tokenizer, padding=True),
            callbacks=[_TokenClock.make(points)],
        )
        trainer.train()
    return steady_tokens_per_second(points)


def run_trl_defaults(config: RunConfig, steps: int) -> float:
    """TRL's SFTTrainer with SFTConfig's defaults: only steps, batch, learning rate and LoRA are set."""
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    source = str(find_local_path(config.model.name_or_path))
    points: list[tuple[float, int]] = []
    with tempfile.TemporaryDirectory() as output:
        args = SFTConfig(
            output_dir=output,
            max_steps=steps,
            per_device_train_batch_size=config.train.per_device_batch_size,
            learning_rate=config.train.learning_rate,
            save_strategy="no",
            report_to=[],
            logging_steps=config.train.logging_steps,  # where the clock reads; not a speed setting
            include_num_input_tokens_seen="non_padding",
            disable_tqdm=True,
            use_cpu=True,  # without it SFTConfig refuses a machine without a GPU; bf16 and checkpointing stay default
        )
        trainer = SFTTrainer(
            model=source,
            args=args,
            train_dataset=Dataset.from_list(_read_rows(config)),
            peft_config=bare_lora_config(config.adapter),
            callbacks=[_TokenClock.make(points)],
        )
        trainer.train()
    return steady_tokens_per_second(points)


def train_run(config: RunConfig, run_dir: Path) -> float:
    """``python -m engine train`` in the foreground (the product), the config written beside ``run_dir``; returns
    its wall time in seconds."""
    config_path = run_dir.parent / f"{run_dir.name}.yaml"
    config_path.write_text(config.to_yaml())
    started = time.perf_counter()
    try:
        subprocess.run(
            [sys.executable, "-m", "engine", "train", str(config_path), "--run-dir", str(run_dir)],
            check=True,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
        )
    except subprocess.CalledProcessError:
        log = run_dir / "train.log"  # the worker's output, its traceback included
        if log.is_file():
            print(f"{log}, the end:\n{log.read_text(encoding='utf-8', errors='replace')[-3000:]}", file=sys.stderr)
        raise
    return time.perf_counter() - started


def engine_train_events(config: RunConfig) -> list[dict[str, Any]]:
    """Train ``config`` with ``python -m engine train`` (the product) and return its metrics.jsonl train events."""
    with tempfile.TemporaryDirectory() as tmp:
        train_run(config, Path(tmp) / "run")
        lines = Path(tmp, "run", "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    return [event for event in map(json.loads, lines) if event["event"] == "train"]


def run_engine(preset: Path, config: RunConfig, steps: int) -> float:
    """The product: ``python -m engine train``, measured from its own metrics.jsonl."""
    data = config.model_dump(mode="json")
    data["train"].update(max_steps=steps, save_strategy="no", eval_strategy="no")
    train = engine_train_events(RunConfig.model_validate(data))
    return steady_tokens_per_second([(event["time"], event["num_input_tokens_seen"]) for event in train])


def child_figure(script: str, *args: str) -> float:
    """Run a benchmark's in-process arm (``python SCRIPT ARGS``) in a fresh interpreter, so no arm inherits
    another's warm caches; returns the figure it prints last."""
    output = subprocess.run(
        [sys.executable, script, *args], check=True, capture_output=True, text=True, cwd=ROOT
    ).stdout
    return float(output.strip().splitlines()[-1])


def alternated_rounds(arms: dict[str, Callable[[], float]], rounds: int, unit: str) -> dict[str, list[float]]:
    """Each arm's figure once per round, printed as it comes. Every other round runs the arms in reverse order, so
    no arm always follows the same neighbour."""
    results: dict[str, list[float]] = {arm: [] for arm in arms}
    width = max(map(len, arms))
    for round_number in range(1, rounds + 1):
        for arm in list(arms) if round_number % 2 else list(reversed(arms)):
            value = arms[arm]()
            results[arm].append(value)
            print(f"round {round_number} {arm:>{width}}: {value:8.1f} {unit}", flush=True)
    return results


def print_ratios(
    results: dict[str, list[float]], title: str, unit: str, baselines: dict[str, str], goal: str | None = None
) -> None:
    """The arms' medians, and the engine's ratio to each baseline (arm -> how to name it) with a 95% bootstrap
    interval of the median of the rounds' ratios; ``goal`` is the baseline the engine must reach (ratio >= 1.0)."""
    medians = {arm: statistics.median(values) for arm, values in results.items()}
    width = max(map(len, results))
    print(f"\n{title}, medians:")
    for arm, value in medians.items():
        print(f"  {arm:>{width}}: {value:8.1f} {unit}")
    for baseline, name in baselines.items():
        ratios = [engine / other for engine, other in zip(results["engine"], results[baseline], strict=True)]
        low, high = median_interval(ratios)
        print(
            f"engine / {name}: {medians['engine'] / medians[baseline]:.2f} of the medians, "
            f"{statistics.median(ratios):.2f} median of the rounds' ratios "
            f"(95% bootstrap interval {low:.2f}-{high:.2f})" + ("  (goal >= 1.0)" if baseline == goal else "")
        )


def median_interval(values: list[float], draws: int = 4000, seed: int = 0) -> tuple[float, float]:
    """A 95% bootstrap interval of the median: how far the rounds' noise lets the figure move."""
    rng = random.Random(seed)
    medians = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(draws))
    return medians[int(0.025 * draws)], medians[int(0.975 * draws) - 1]


def check_steps(parser: argparse.ArgumentParser, steps: int, logging_steps: int) -> None:
    """Refuse a step count that gives fewer than two logging points: speed is measured between the first and the
    last one."""
    if steps < 2 * logging_steps:
        parser.error(f"--steps {steps}: at least {2 * logging_steps} (two logging points, every {logging_steps} steps)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", type=Path, default=ROOT / "assets" / "presets" / "demo.yaml")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--arm", choices=["bare", "trl-defaults"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    config = load_config(args.preset)
    check_steps(parser, args.steps, config.train.logging_steps)
    if args.arm:  # a child process: print its figure and leave
        import warnings

        warnings.filterwarnings("ignore")
        run = run_bare if args.arm == "bare" else run_trl_defaults
        print(run(config, args.steps))
        return
    preset, steps = str(args.preset), str(args.steps)
    arms = {
        "engine": lambda: run_engine(args.preset, config, args.steps),
        "bare": lambda: child_figure(__file__, "--arm", "bare", "--preset", preset, "--steps", steps),
        "trl-defaults": lambda: child_figure(__file__, "--arm", "trl-defaults", "--preset", preset, "--steps", steps),
    }
    results = alternated_rounds(arms, args.rounds, "tokens/s")
    title = f"preset {args.preset.name}, {args.steps} steps, {args.rounds} rounds"
    print_ratios(results, title, "tokens/s", BASELINE_NAMES, goal="bare")


if __name__ == "__main__":
    main()
