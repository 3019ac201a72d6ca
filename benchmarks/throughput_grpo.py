"""GRPO throughput: the engine against a bare TRL GRPOTrainer + peft script, with the same settings.

Both arms train the demo model with LoRA from the base on the GRPO demo's prompts (assets/presets/demo-grpo.yaml:
``model.init_from`` is dropped, so both start from the same weights) with the same batch, generations, answer
length, sampling, learning rate and number of steps, and the same two rewards (exact match against the answer,
and the "Month day" pattern). The bare script writes its rewards as TRL's documentation shows. The arms run as
separate processes, alternated round by round with the order reversed every other round (these machines are
noisy), and the engine's ratio comes with a 95% bootstrap interval of the median over the rounds.

The figure is tokens/s (prompt + generated tokens, TRL's own ``num_tokens`` count) between the first and the
last logging step, so process start, model loading and the first step's warm-up are left out of both arms alike.

    python benchmarks/throughput_grpo.py                  # 40 steps, 3 rounds
    python benchmarks/throughput_grpo.py --steps 60 --rounds 5
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from throughput import (  # noqa: E402  (benchmarks/ is the script's folder)
    alternated_rounds,
    bare_lora_config,
    check_steps,
    child_figure,
    engine_train_events,
    print_ratios,
)

from engine.config import RunConfig, load_config  # noqa: E402
from engine.store.paths import find_local_path  # noqa: E402

PRESET = ROOT / "assets" / "presets" / "demo-grpo.yaml"


def benchmark_config(preset: Path, steps: int) -> RunConfig:
    """The preset from the base model, for ``steps`` steps, logging every step, without checkpoints."""
    data = load_config(preset).model_dump(mode="json")
    data["model"]["init_from"] = None
    data["train"].update(max_steps=steps, save_strategy="no", eval_strategy="no", logging_steps=1)
    return RunConfig.model_validate(data)


def tokens_per_second(points: list[tuple[float, float]]) -> float:
    """Tokens/s between the first and the last (time, cumulative tokens) point."""
    (t0, n0), (t1, n1) = points[0], points[-1]
    return (n1 - n0) / (t1 - t0)


def run_bare(config: RunConfig) -> float:
    """The baseline: TRL's GRPOTrainer + peft, with reward functions written as TRL's documentation shows."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    torch.manual_seed(config.train.seed)
    source = str(find_local_path(config.model.name_or_path))
    rows = []
    for line in find_local_path(config.data.path).read_text(encoding="utf-8").splitlines():
        messages = json.loads(line)["messages"]
        rows.append({"prompt": messages[:-1], "answer": messages[-1]["content"]})
    pattern = next(reward.pattern for reward in config.grpo.rewards if reward.kind == "regex")

    def exact_match(completions: list[Any], answer: list[str], **kwargs: Any) -> list[float]:
        return [float(c[0]["content"].strip() == a.strip()) for c, a in zip(completions, answer, strict=True)]

    def format_reward(completions: list[Any], **kwargs: Any) -> list[float]:
        return [float(re.fullmatch(pattern, c[0]["content"].strip(), re.DOTALL) is not None) for c in completions]

    points: list[tuple[float, float]] = []

    class Clock(TrainerCallback):
        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kwargs: Any) -> None:
            if logs and "num_tokens" in logs:
                points.append((time.time(), logs["num_tokens"]))

    train, adapter, grpo = config.train, config.adapter, config.grpo
    with tempfile.TemporaryDirectory() as output:
        trainer = GRPOTrainer(
            model=AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32),
            reward_funcs=[exact_match, format_reward],
            args=GRPOConfig(
                output_dir=output,
                max_steps=train.max_steps,
                per_device_train_batch_size=train.per_device_batch_size,
                learning_rate=train.learning_rate,
                lr_scheduler_type=train.lr_scheduler,
                num_generations=grpo.num_generations,
                max_completion_length=grpo.max_completion_length,
                temperature=grpo.temperature,
                reward_weights=[reward.weight for reward in grpo.rewards],
                bf16=False,  # the engine's precision on a CPU
                use_cpu=True,
                save_strategy="no",
                report_to=[],
                logging_steps=1,
                disable_tqdm=True,
                seed=train.seed,
            ),
            train_dataset=Dataset.from_list(rows),
            processing_class=AutoTokenizer.from_pretrained(source),
            peft_config=bare_lora_config(adapter),
            callbacks=[Clock()],
        )
        trainer.train()
    return tokens_per_second(points)


def run_engine(config: RunConfig) -> float:
    """The product: ``python -m engine train``, measured from its own metrics.jsonl."""
    return tokens_per_second([(event["time"], event["num_tokens"]) for event in engine_train_events(config)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", type=Path, default=PRESET)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--bare", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    config = benchmark_config(args.preset, args.steps)
    check_steps(parser, args.steps, config.train.logging_steps)
    if args.bare:  # a child process: print its figure and leave
        import warnings

        warnings.filterwarnings("ignore")
        print(run_bare(config))
        return
    arms = {
        "engine": lambda: run_engine(config),
        "bare": lambda: child_figure(__file__, "--bare", "--preset", str(args.preset), "--steps", str(args.steps)),
    }
    results = alternated_rounds(arms, args.rounds, "tokens/s")
    title = f"{args.preset.name}, {args.steps} steps, {args.rounds} rounds"
    print_ratios(results, title, "tokens/s", {"bare": "bare GRPOTrainer+peft"}, goal="bare")


if __name__ == "__main__":
    main()
