"""The memory estimate (engine.training.memory) against measured peaks of real training runs.

Six configs on a ~100M LLaMA-architecture model with random weights (hidden 768, 12 layers, 12 heads,
intermediate 2048, tied embeddings, a 32,000-entry vocabulary: LLaMA-2's size, so the logits weigh as they do in
real models; the bundled demo tokenizer's 1,295 ids are a subset), built once under
~/.cache/tuning-studio-bench/memory-100m/ and reused. Every row of the data is a few thousand tokens of text
(c4_demo.jsonl rows joined), so the engine cuts each one to max_length and every batch is exactly
batch x max_length tokens.

Each config trains a few steps through the product (``python -m engine train``, save_strategy no). On a CPU the
measured figure is the training worker's peak resident set (VmHWM of the pid in status.json, read from /proc
every 20 ms until it exits) minus the process baseline: the resident set of a fresh interpreter that imported
what the worker imports before it reads data or the model, measured in the same invocation. The prediction is
the estimate's parts above its baseline. On a GPU the measured figure is torch.cuda.max_memory_allocated, which
the worker logs as memory_mb (its largest value over the run), and the prediction is the estimate for the device,
precision and gradient checkpointing the engine resolves there (no baseline: the CUDA context is outside it).

    python benchmarks/memory_estimate.py            # all six, about 4-5 minutes on 2 cores
    python benchmarks/memory_estimate.py --only lora-256 full-256
    python benchmarks/memory_estimate.py --jobs 12 --liger auto on    # a GPU: each config as auto has it, and Liger on

``--jobs`` runs that many configs at once: each run's peak is its own process's, so only the wall time changes
(on a 2-core CPU machine, keep 1). ``--liger`` runs each config once per setting of train.liger_kernel (rows of
``off`` are named ``+no-liger``, of ``on`` ``+liger``; auto leaves Liger off for this 768-wide model). The model and
data go under ``$TUNING_STUDIO_BENCH_CACHE/memory-100m/`` (default
``~/.cache/tuning-studio-bench``), c4_demo.jsonl is read from ``$TUNING_STUDIO_BENCH_DATASETS`` (default
``../shared/datasets``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine.config import RunConfig  # noqa: E402
from engine.training.memory import GB, config_dict, estimate_run_memory  # noqa: E402

CACHE = (
    Path(os.environ.get("TUNING_STUDIO_BENCH_CACHE", Path.home() / ".cache" / "tuning-studio-bench")) / "memory-100m"
)
MODEL_DIR = CACHE / "model"
DATA = CACHE / "long_text.jsonl"
C4 = Path(os.environ.get("TUNING_STUDIO_BENCH_DATASETS", ROOT.parent / "shared" / "datasets")) / "c4_demo.jsonl"
NO_LIGER = "+no-liger"
WITH_LIGER = "+liger"
LIGER_SUFFIXES = {"auto": "", "off": NO_LIGER, "on": WITH_LIGER}
GOAL = (0.8, 1.2)
# name: (adapter, quantization mode, max_length, batch size, steps)
CONFIGS: dict[str, tuple[dict[str, Any], str, int, int, int]] = {
    "lora-256": ({"method": "lora"}, "none", 256, 4, 4),
    "qlora-4bit-256": ({"method": "lora"}, "4bit", 256, 4, 4),
    "qlora-8bit-256": ({"method": "lora"}, "8bit", 256, 4, 3),
    "full-256": ({"method": "full"}, "none", 256, 4, 4),
    "freeze-256": ({"method": "freeze", "freeze_trainable_layers": 2}, "none", 256, 4, 4),
    "lora-1024": ({"method": "lora"}, "none", 1024, 2, 3),
}
# What the worker has imported when it starts reading data and the model (engine.training.recipe._build_trainer).
BASELINE_IMPORTS = (
    "import torch, transformers, peft, trl, datasets, accelerate; from trl import SFTConfig, SFTTrainer; "
    "import engine.training.recipe, engine.training.callbacks, engine.training.modeling, engine.data"
)


def build_model() -> None:
    """The ~100M model with random weights (seed 0) and the demo tokenizer, saved once."""
    if (MODEL_DIR / "model.safetensors").is_file():
        return
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    shape = {"hidden_size": 768, "intermediate_size": 2048, "num_hidden_layers": 12, "num_attention_heads": 12}
    config = LlamaConfig(
        **shape, num_key_value_heads=12, head_dim=64, vocab_size=32000, max_position_embeddings=2048,
        tie_word_embeddings=True, bos_token_id=1, eos_token_id=2, pad_token_id=0, rms_norm_eps=1e-6,
    )  # fmt: skip
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(MODEL_DIR)
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        shutil.copy(ROOT / "assets" / "demo-model" / name, MODEL_DIR / name)


def build_data() -> None:
    """Rows of about 12,000 characters (several thousand tokens), each cut to max_length by the engine."""
    if DATA.is_file():
        return
    rows, current = [], ""
    for line in C4.read_text(encoding="utf-8").splitlines():
        current += json.loads(line)["text"] + "\n"
        if len(current) >= 12_000:
            rows.append({"text": current})
            current = ""
    DATA.write_text("".join(json.dumps(row) + "\n" for row in rows[:48]), encoding="utf-8")


def run_config(name: str) -> RunConfig:
    """The RunConfig of one benchmark config (``NAME+no-liger`` / ``NAME+liger``: train.liger_kernel off / on)."""
    base, _, suffix = name.partition("+")
    adapter, quantization, length, batch, steps = CONFIGS[base]
    liger = next(choice for choice, text in LIGER_SUFFIXES.items() if text == (f"+{suffix}" if suffix else ""))
    return RunConfig.model_validate(
        {
            "name": f"memory-{name}",
            "model": {"name_or_path": str(MODEL_DIR)},
            "adapter": adapter,
            "quantization": {"mode": quantization},
            "data": {"path": str(DATA), "format": "text", "eval_size": 0},
            "train": {
                "max_steps": steps,
                "per_device_batch_size": batch,
                "max_length": length,
                "save_strategy": "no",
                "logging_steps": 1,
                "liger_kernel": liger,
            },
        }
    )


def _status_kib(pid: int) -> dict[str, int]:
    with open(f"/proc/{pid}/status", encoding="utf-8") as handle:
        pairs = (line.split(":", 1) for line in handle)
        return {key: int(value.split()[0]) for key, value in pairs if value.strip().endswith("kB")}


def measure_baseline() -> float:
    """Resident bytes of an interpreter with the worker's libraries imported (median of three)."""
    code = f"{BASELINE_IMPORTS}; print(open('/proc/self/status').read())"
    values = []
    for _ in range(3):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
        rss = next(line for line in out.stdout.splitlines() if line.startswith("VmRSS:"))
        values.append(int(rss.split()[1]) * 1024)
    return sorted(values)[1]


def measure_run(config: RunConfig, workdir: Path) -> tuple[float, float]:
    """(peak resident bytes of the training worker, wall seconds) of one real run; its output stays in
    ``workdir/output.txt`` and its metrics in ``workdir/run/metrics.jsonl``."""
    config_path = workdir / "config.yaml"
    config_path.write_text(yaml.safe_dump(config.model_dump(mode="json")), encoding="utf-8")
    run_dir = workdir / "run"
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    command = [sys.executable, "-m", "engine", "train", str(config_path), "--run-dir", str(run_dir)]
    start = time.time()
    with open(workdir / "output.txt", "w", encoding="utf-8") as output:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=output, stderr=subprocess.STDOUT)
        pid, peak = None, 0
        while process.poll() is None:
            if pid is None:
                with contextlib.suppress(OSError, ValueError):  # not written yet, or being replaced
                    pid = json.loads((run_dir / "status.json").read_text(encoding="utf-8")).get("pid")
            if pid is not None:
                with contextlib.suppress(OSError, KeyError):  # the worker has just exited
                    peak = max(peak, _status_kib(pid)["VmHWM"] * 1024)
            time.sleep(0.02)
    if process.returncode != 0:
        tail = (workdir / "output.txt").read_text(encoding="utf-8")[-2000:]
        raise RuntimeError(f"the run failed (exit {process.returncode}):\n{tail}")
    return peak, time.time() - start


def cuda_peak(workdir: Path) -> float:
    """The largest memory_mb the run logged (torch.cuda.max_memory_allocated on a GPU), in bytes."""
    lines = (workdir / "run" / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    return max(json.loads(line).get("memory_mb", 0.0) for line in lines if line.strip()) * 2**20


def run_summary(output: str) -> str:
    """The run's own 'model:' line (trainable and stored-quantized parameters) and its first and last loss."""
    model = next((line for line in reversed(output.splitlines()) if line.startswith("model: ")), "model: ?")
    losses = [part.split()[1] for line in output.splitlines() for part in line.split(" | ") if part.startswith("loss ")]
    return f"{model}; loss {losses[0]} -> {losses[-1]}" if losses else f"{model}; no loss logged"


def main() -> int:
    """Run the configs; print predicted and measured peaks and their ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=sorted(CONFIGS), help="run these configs only")
    parser.add_argument("--jobs", type=int, default=1, help="configs run at once (a GPU machine; 1 on a CPU)")
    liger = {"nargs": "+", "choices": sorted(LIGER_SUFFIXES), "default": ["auto"], "help": "train.liger_kernel"}
    parser.add_argument("--liger", **liger)
    args = parser.parse_args()
    os.environ["HF_HUB_OFFLINE"] = "1"
    CACHE.mkdir(parents=True, exist_ok=True)
    build_model()
    build_data()
    model_config = config_dict(MODEL_DIR)
    assert model_config is not None
    from engine.training.hardware import (
        detect_hardware,
        resolve_device,
        resolve_gradient_checkpointing,
        resolve_precision,
    )
    from engine.training.run_path import resolve_run_path

    hardware = detect_hardware()
    on_gpu = hardware.has_gpu
    if on_gpu:
        baseline = 0.0
        print(f"{hardware.gpu_name}: measured = torch.cuda.max_memory_allocated (the run's largest memory_mb)")
    else:
        baseline = measure_baseline()
        print(f"process baseline (interpreter + worker imports, VmRSS): {baseline / GB:.2f} GB")
    names = [name + LIGER_SUFFIXES[liger] for liger in args.liger for name in args.only or CONFIGS]
    width = max(16, *map(len, names))
    print(f"{'config':{width}} {'steps':>5} {'predicted':>9} {'measured':>9} {'ratio':>6}  within 0.8-1.2")
    started = time.time()

    def measure(name: str) -> tuple[float, float, str] | Exception:
        with tempfile.TemporaryDirectory(prefix=f"memory-{name}-") as tmp:
            try:
                peak, wall = measure_run(run_config(name), Path(tmp))
                measured = cuda_peak(Path(tmp)) if on_gpu else peak - baseline
                return measured, wall, run_summary((Path(tmp) / "output.txt").read_text(encoding="utf-8"))
            except (RuntimeError, OSError, ValueError) as exc:
                return exc

    misses = []
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for name, outcome in zip(names, pool.map(measure, names), strict=True):
            config = run_config(name)
            device, precision = resolve_device(config, hardware), resolve_precision(config, hardware)
            checkpointing = resolve_gradient_checkpointing(config, hardware)
            estimate = estimate_run_memory(config, model_config, device, precision, checkpointing)
            assert estimate is not None
            if isinstance(outcome, Exception):
                misses.append(name)
                print(f"{name:{width}} FAILED: {outcome}", flush=True)
                continue
            measured, wall, summary = outcome
            ratio = estimate.training / measured
            ok = GOAL[0] <= ratio <= GOAL[1]
            misses += [] if ok else [name]
            whole = (
                f"predicted {estimate.total / GB:.2f}, peak {(measured + baseline) / GB:.2f} GB; " if not on_gpu else ""
            )
            print(
                f"{name:{width}} {config.train.max_steps:>5} {estimate.training / GB:>7.2f}GB {measured / GB:>7.2f}GB "
                f"{ratio:>6.2f}  {'yes' if ok else 'NO'}   ({'whole process: ' if whole else ''}{whole}{wall:.0f} s)",
                flush=True,
            )
            parts = ", ".join(f"{key} {value / GB:.2f}" for key, value in estimate.parts().items() if key != "baseline")
            print(f"{'':{width}} predicted parts: {parts}", flush=True)
            if on_gpu:  # the path line the run's worker printed to its train.log
                print(f"{'':{width}} {resolve_run_path(config, hardware).line()}", flush=True)
                print(f"{'':{width}} {summary}", flush=True)
    print(f"all within {GOAL[0]}-{GOAL[1]}: {'yes' if not misses else 'no: ' + ', '.join(misses)}")
    print(f"wall time: {time.time() - started:.0f} s")
    return 0 if not misses else 1


if __name__ == "__main__":
    sys.exit(main())
