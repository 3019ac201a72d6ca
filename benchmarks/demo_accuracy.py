"""Does the demo run teach the demo model its skill? Train the demo preset through the engine, then compare.

Runs ``python -m engine train assets/presets/demo.yaml`` exactly as a user would, timing it end to end, then
measures greedy exact match on the held-out split for the base model and for base + the trained adapter.

    python benchmarks/demo_accuracy.py                   # the demo preset
    python benchmarks/demo_accuracy.py --preset my.yaml --keep runs/demo

Goals on 2 CPU cores: the run finishes in at most 2 minutes; base at most 20%, tuned at least 80%.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def train(preset: Path, run_dir: Path) -> float:
    """Train the preset in the foreground through the CLI; returns the wall time in seconds."""
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "engine", "train", str(preset), "--run-dir", str(run_dir)],
        check=True,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
    )
    return time.perf_counter() - started


def accuracies(preset: Path, run_dir: Path) -> tuple[float, float, int]:
    """Exact match of the base model and of base + adapter on the preset's eval file, and its row count."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from engine.config import load_config
    from engine.evaluate.scoring import exact_match_accuracy
    from engine.store.paths import find_local_path, resolve_model_source

    config = load_config(preset)
    eval_path = find_local_path(config.data.eval_path)
    rows = [json.loads(line) for line in eval_path.read_text(encoding="utf-8").splitlines() if line.strip()]
    result = run_dir / "adapter" if (run_dir / "adapter").is_dir() else run_dir / "model"  # LoRA, else full
    tokenizer = AutoTokenizer.from_pretrained(result)
    base = AutoModelForCausalLM.from_pretrained(resolve_model_source(config.model.name_or_path))
    base_accuracy = exact_match_accuracy(base, tokenizer, rows)
    if result.name == "adapter":
        tuned = PeftModel.from_pretrained(base, result)
    else:
        tuned = AutoModelForCausalLM.from_pretrained(result)
    return base_accuracy, exact_match_accuracy(tuned, tokenizer, rows), len(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", type=Path, default=ROOT / "assets" / "presets" / "demo.yaml")
    parser.add_argument("--keep", type=Path, help="keep the run directory here instead of a temporary one")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = args.keep or Path(tmp) / "run"
        seconds = train(args.preset.resolve(), run_dir.resolve())
        losses = [
            event["loss"]
            for event in map(json.loads, (run_dir / "metrics.jsonl").read_text().splitlines())
            if event["event"] == "train"
        ]
        base, tuned, count = accuracies(args.preset.resolve(), run_dir.resolve())
    print(f"preset: {args.preset.name}")
    print(f"training run, end to end: {seconds:.1f} s  (goal <= 120 s)")
    print(f"train loss: first {losses[0]:.3f} -> last {losses[-1]:.3f}")
    print(f"held-out exact match ({count} rows): base {base:.1%} (goal <= 20%), tuned {tuned:.1%} (goal >= 80%)")


if __name__ == "__main__":
    main()
