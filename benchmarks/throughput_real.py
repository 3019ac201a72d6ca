"""Training throughput on a real workload: the engine's defaults against a bare Trainer + peft script and TRL's
SFTConfig defaults, on a ~100M-parameter or a ~1B-parameter LLaMA and rows of 20 to 1,000+ tokens.

The model (``--model``) is LLaMA-architecture with random weights, built once from a config and cached under
~/.cache/tuning-studio-bench/ (this measures speed, not quality):
- 87m: hidden 768, 12 layers, 12 heads, MLP 2048; 87M parameters with the bundled demo tokenizer's 1,295-token
  vocabulary; saved in fp32.
- 1b: the shape of Llama 3.2 1B (hidden 2048, 16 layers, 32 heads, 8 key-value heads, MLP 8192, tied embeddings)
  with a 32,000-entry vocabulary (the demo tokenizer's ids are a subset): 1.04B parameters; saved in bf16 (built
  on the GPU when there is one, in seconds; on a CPU it takes a minute and 2 GB of disk).
The data is LLaMA-Factory's alpaca_en_demo.json
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
    python benchmarks/throughput_real.py --model 1b --build-only  # build the 1B model, print each arm's path
    python benchmarks/throughput_real.py --json results.json ...  # also write the figures and paths as JSON

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
- engine-liger:     the engine with train.liger_kernel on (where auto leaves it off: models narrower than 2048)
- engine-free:      padding-free batches (train.padding_free on): on a GPU without flash-attn, sdpa once per row
- engine-flex:      padding-free batches through FlexAttention's document mask (GPU only)
- engine-fp32-weights: fp32 master weights with bf16 autocast (model.dtype float32), as the bare arm trains
- engine-cudnn:     the engine with sdpa free to pick cuDNN (model.sdpa_backends all: the engine before issue 29)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
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
    alternated_rounds,
    engine_train_events,
    median_interval,
    steady_tokens_per_second,
)
from throughput_baselines import (  # noqa: E402
    ALPHA,
    LEARNING_RATE,
    MAX_LENGTH,
    RANK,
    SEED,
    run_bare,
    run_trl_defaults,
)

from engine.config import RunConfig  # noqa: E402

CACHE = Path(os.environ.get("TUNING_STUDIO_BENCH_CACHE", Path.home() / ".cache" / "tuning-studio-bench"))
DATASETS = Path(os.environ.get("TUNING_STUDIO_BENCH_DATASETS", ROOT.parent / "shared" / "datasets"))
DATASET = DATASETS / "alpaca_en_demo.json"
BATCH = 4
# Train-section settings of each engine arm on top of the engine's defaults.
ENGINE_VARIANTS: dict[str, dict[str, Any]] = {
    "engine": {},
    "engine-padded": {"train": {"padding_free": "off"}},
    "engine-sdpa-mask": {"train": {"padding_free": "on"}, "model": {"attn_implementation": "sdpa"}},
    "engine-grouped": {"train": {"padding_free": "off", "group_by_length": True}},
    "engine-grouped-free": {"train": {"group_by_length": True}},
    "engine-packed": {"train": {"packing": True}},
    "engine-no-liger": {"train": {"liger_kernel": "off"}},
    "engine-liger": {"train": {"liger_kernel": "on"}},
    "engine-free": {"train": {"padding_free": "on"}},
    "engine-flex": {"train": {"padding_free": "on"}, "model": {"attn_implementation": "flex_attention"}},
    "engine-fp32-weights": {"model": {"dtype": "float32"}},
    "engine-cudnn": {"model": {"sdpa_backends": "all"}},
}
BASELINES = {"bare": "bare Trainer+peft", "trl-defaults": "TRL SFTConfig defaults"}


@dataclasses.dataclass(frozen=True)
class BenchModel:
    """A LLaMA shape the benchmark builds with random weights."""

    folder: str  # under CACHE
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    mlp: int
    vocab: int | None  # None: the demo tokenizer's 1,295 ids
    tied: bool
    dtype: str  # of the saved weights


MODELS = {
    "87m": BenchModel("llama-87m-demo-vocab", 768, 12, 12, 12, 2048, None, False, "float32"),
    "1b": BenchModel("llama-1b-32k-vocab", 2048, 16, 32, 8, 8192, 32_000, True, "bfloat16"),
}
DEFAULT_MODEL = "87m"


def model_dir(size: str = DEFAULT_MODEL) -> Path:
    """Where the ``size`` model is cached."""
    return CACHE / MODELS[size].folder


def build_model(size: str = DEFAULT_MODEL) -> Path:
    """The benchmark's ``size`` model and tokenizer, built on the first run and reused after (outside the
    repository)."""
    target, shape = model_dir(size), MODELS[size]
    if (target / "config.json").exists():
        return target
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(ROOT / "assets" / "demo-model")
    tokenizer.model_max_length = 2048  # the demo model's is 256
    config = LlamaConfig(
        vocab_size=shape.vocab or len(tokenizer),
        hidden_size=shape.hidden,
        num_hidden_layers=shape.layers,
        num_attention_heads=shape.heads,
        num_key_value_heads=shape.kv_heads,
        intermediate_size=shape.mlp,
        max_position_embeddings=2048,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=shape.tied,
    )
    torch.manual_seed(0)
    staging = target.with_name(target.name + ".partial")
    # The initialisation of 1B weights takes seconds on a GPU and a minute on two CPU cores.
    with torch.device("cuda" if torch.cuda.is_available() else "cpu"):
        model = LlamaForCausalLM(config).to(getattr(torch, shape.dtype))
    model.save_pretrained(staging)
    tokenizer.save_pretrained(staging)
    staging.rename(target)  # config.json appears only with the whole model
    return target


def write_rows(rows: int, folder: Path) -> Path:
    """The first ``rows`` rows of alpaca_en_demo.json, the one file every arm reads."""
    data = json.loads(DATASET.read_text(encoding="utf-8"))[:rows]
    path = folder / "alpaca_rows.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def engine_config(arm: str, data: Path, steps: int, batch: int = BATCH, size: str = DEFAULT_MODEL) -> RunConfig:
    """The run the engine arm trains: the benchmark's settings, everything else the engine's defaults."""
    overrides = ENGINE_VARIANTS[arm]
    return RunConfig.model_validate(
        {
            "model": {"name_or_path": str(build_model(size)), **overrides.get("model", {})},
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


def run_engine(arm: str, data: Path, steps: int, batch: int = BATCH, size: str = DEFAULT_MODEL) -> tuple[float, float]:
    """Tokens/s and peak memory (MiB) of ``python -m engine train``, from its own metrics.jsonl."""
    events = engine_train_events(engine_config(arm, data, steps, batch, size))
    rate = steady_tokens_per_second([(event["time"], event["num_input_tokens_seen"]) for event in events])
    return rate, max(event.get("memory_mb", 0.0) for event in events)


def engine_path(config: RunConfig) -> str:
    """The path an engine run takes on this machine: the line its worker prints to train.log
    (engine.training.run_path, the engine's own resolvers)."""
    from engine.training.hardware import detect_hardware
    from engine.training.run_path import resolve_run_path

    return resolve_run_path(config, detect_hardware()).line()


def child_arm(
    arm: str, data: Path, steps: int, batch: int = BATCH, size: str = DEFAULT_MODEL
) -> tuple[str, float, float]:
    """Run a baseline arm in a fresh interpreter (no arm inherits another's warm caches or memory); returns its
    path, tokens/s and peak memory."""
    command = [sys.executable, __file__, "--child", arm, "--data", str(data), "--steps", str(steps)]
    command += ["--batch", str(batch), "--model", size]
    done = subprocess.run(command, check=False, capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        print(f"{arm} failed (exit {done.returncode}), the end of its output:\n{done.stderr[-3000:]}", file=sys.stderr)
        raise subprocess.CalledProcessError(done.returncode, command)
    lines = done.stdout.strip().splitlines()
    rate, memory = lines[-1].split()
    return lines[-2].removeprefix("path: "), float(rate), float(memory)


def main() -> None:
    args = parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.child:
        import warnings

        warnings.filterwarnings("ignore")
        run = run_bare if args.child == "bare" else run_trl_defaults
        path, rate, memory = run(args.data, args.steps, args.batch, build_model(args.model))
        print(f"path: {path}")
        print(rate, memory)
        return
    started = time.perf_counter()
    built = build_model(args.model)
    with tempfile.TemporaryDirectory() as tmp:
        data = write_rows(args.rows, Path(tmp))
        engine_arms = [arm for arm in args.arms if arm in ENGINE_VARIANTS]
        paths = {arm: engine_path(engine_config(arm, data, args.steps, args.batch, args.model)) for arm in engine_arms}
        for arm, path in paths.items():
            print(f"path {arm}: {path}", flush=True)
        if args.build_only:
            print(f"{built.name}: {_loaded_parameters(built):,} parameters, loaded (--build-only: nothing trained)")
            return
        results, memory = measure(args, data, paths)
    figures = report(results, memory, args, paths)
    figures["wall_s"] = round(time.perf_counter() - started, 1)
    print(f"wall time: {figures['wall_s']:.0f} s")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1) + "\n", encoding="utf-8")


def parse_args() -> argparse.Namespace:
    """The command line; refuses unknown arms and too few steps."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arms", nargs="+", default=["engine", "bare", "trl-defaults"])
    parser.add_argument("--model", choices=sorted(MODELS), default=DEFAULT_MODEL, help="the model's size")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=4, help="optimizer steps of each arm (at least 2)")
    parser.add_argument("--trl-steps", type=int, default=3, help="steps of the trl-defaults arm (bf16 on a CPU)")
    parser.add_argument("--rows", type=int, default=200, help="first rows of alpaca_en_demo.json to train on")
    parser.add_argument("--batch", type=int, default=BATCH, help="rows per batch (per_device_batch_size) of every arm")
    parser.add_argument("--json", type=Path, help="also write the figures, ratios and paths to this JSON file")
    parser.add_argument("--build-only", action="store_true", help="build the model, print the arms' paths, stop")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    unknown = [arm for arm in args.arms if arm not in ENGINE_VARIANTS and arm not in BASELINES]
    if not args.child and (unknown or "engine" not in args.arms or args.steps < 2 or args.trl_steps < 2):
        parser.error("--arms must include engine and name known arms; --steps and --trl-steps at least 2")
    return args


def measure(
    args: argparse.Namespace, data: Path, paths: dict[str, str]
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Each arm's tokens/s and peak memory per round, the arms alternated. An arm that fails is NaN from then on
    (the others go on). A time limit's SIGTERM ends the rounds: then every arm keeps the rounds that all arms
    finished, or, when none did, what each arm measured."""
    memory: dict[str, list[float]] = {arm: [] for arm in args.arms}
    seen: dict[str, list[float]] = {arm: [] for arm in args.arms}
    failed: set[str] = set()

    def arm_figure(arm: str) -> float:
        if arm in failed:
            return math.nan
        try:
            if arm in ENGINE_VARIANTS:
                rate, peak = run_engine(arm, data, args.steps, args.batch, args.model)
            else:
                steps = args.trl_steps if arm == "trl-defaults" else args.steps
                path, rate, peak = child_arm(arm, data, steps, args.batch, args.model)
                if arm not in paths:
                    paths[arm] = path
                    print(f"path {arm}: {path}", flush=True)
        except subprocess.CalledProcessError as exc:
            print(f"arm {arm} failed: {exc}; its later rounds are skipped", flush=True)
            failed.add(arm)
            return math.nan
        memory[arm].append(peak)
        seen[arm].append(rate)
        return rate

    signal.signal(signal.SIGTERM, _interrupt)
    try:
        results = alternated_rounds(
            {arm: (lambda arm=arm: arm_figure(arm)) for arm in args.arms}, args.rounds, "tokens/s"
        )
        return results, memory
    except KeyboardInterrupt:
        done = min(map(len, seen.values()))
        print(f"interrupted: reporting the {done} rounds every arm finished", flush=True)
        if not done:
            return seen, memory
        return {arm: values[:done] for arm, values in seen.items()}, {arm: v[:done] for arm, v in memory.items()}


# The goals for the engine against the baselines, by model (benchmarks/README.md, GPU figures).
GOALS = {"87m": {"bare": 1.5, "trl-defaults": 1.5}, "1b": {"bare": 1.3, "trl-defaults": 1.5}}


def report(
    results: dict[str, list[float]], memory: dict[str, list[float]], args: argparse.Namespace, paths: dict[str, str]
) -> dict[str, Any]:
    """Print each arm's median tokens/s, peak memory and path, and the engine's ratio to every other arm with a 95%
    bootstrap interval of the median of the rounds' ratios; return the same as a dict (the --json file). An arm
    that failed or never finished a round is named, not measured."""
    width = max(map(len, results))
    device = _gpu_name()
    where = "GPU max_memory_allocated" if device else "peak RSS"
    rounds = max(map(len, results.values()))
    print(
        f"\n{MODELS[args.model].folder}, {args.rows} rows, batch {args.batch}, max length {MAX_LENGTH}, {rounds} "
        f"rounds, {args.steps} steps an arm ({args.trl_steps} for trl-defaults), on {device or 'the CPU'}, medians:"
    )
    arms = {arm: _arm_figures(values, memory[arm], paths.get(arm)) for arm, values in results.items()}
    for arm, figures in arms.items():
        if figures["median"] is None:
            print(f"  {arm:>{width}}: FAILED or not measured ({len(figures['tokens_per_second'])} rounds measured)")
        else:
            rate, peak = figures["median"], figures["peak_mib"]
            print(f"  {arm:>{width}}: {rate:8.1f} non-padding tokens/s, {where} {peak:7.0f} MiB")
    ratios = {arm: _ratio(results, arm, GOALS[args.model].get(arm)) for arm in results if arm != "engine"}
    print("paths:")
    for arm in results:
        print(f"  {arm:>{width}}: {paths.get(arm) or 'unknown (it failed before it trained)'}")
    figures = {"model": args.model, "device": device or "cpu", "rows": args.rows, "batch": args.batch}
    return {**figures, "steps": args.steps, "rounds": rounds, "memory": where, "arms": arms, "engine_ratios": ratios}


def _arm_figures(values: list[float], memory: list[float], path: str | None) -> dict[str, Any]:
    """An arm's rounds, median and peak memory (None when it failed or finished no round) and path."""
    measured = bool(values) and all(map(math.isfinite, values))
    return {
        "tokens_per_second": [round(value, 1) for value in values if math.isfinite(value)],
        "median": round(statistics.median(values), 1) if measured else None,
        "peak_mib": round(max(memory), 1) if measured and memory else None,
        "path": path,
    }


def _ratio(results: dict[str, list[float]], arm: str, goal: float | None) -> dict[str, float] | None:
    """The engine's ratio to ``arm`` over the rounds both measured, printed; None when there is none."""
    pairs = list(zip(results["engine"], results[arm], strict=False))
    ratios = [mine / other for mine, other in pairs]
    if not ratios or not all(map(math.isfinite, ratios)):
        print(f"engine / {BASELINES.get(arm, arm)}: not measured (an arm failed or did not finish a round)")
        return None
    low, high = median_interval(ratios)
    of_medians = statistics.median(mine for mine, _ in pairs) / statistics.median(other for _, other in pairs)
    median = statistics.median(ratios)
    print(
        f"engine / {BASELINES.get(arm, arm)}: {of_medians:.2f} of the medians, {median:.2f} median of the rounds' "
        f"ratios (95% bootstrap interval {low:.2f}-{high:.2f}){f'  (goal >= {goal})' if goal else ''}"
    )
    figures = {"of_medians": of_medians, "median": median, "low": low, "high": high}
    return {key: round(value, 3) for key, value in figures.items()} | ({"goal": goal} if goal else {})


def _loaded_parameters(folder: Path) -> int:
    """The parameter count of the saved model, loaded as the arms load it (its saved dtype)."""
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(folder, dtype="auto").num_parameters()


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _gpu_name() -> str | None:
    import torch

    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else None


if __name__ == "__main__":
    main()
