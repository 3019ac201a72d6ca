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
    """Exact match of the base model and of base + adapter on the preset's eval file, and its row count. A
    vision-language preset's rows are prompted with their images (its model and processor load as the engine's)."""
    from peft import PeftModel
    from transformers import AutoProcessor, AutoTokenizer

    from engine.config import load_config
    from engine.data import load_rows
    from engine.evaluate.scoring import exact_match_accuracy
    from engine.store.paths import resolve_model_source
    from engine.training.modality import is_vision_model, model_kind

    config = load_config(preset)
    rows = load_rows(config.data, config.data.eval_path).rows
    result = run_dir / "adapter" if (run_dir / "adapter").is_dir() else run_dir / "model"  # LoRA, else full
    tokenizer = (AutoProcessor if is_vision_model(config) else AutoTokenizer).from_pretrained(result)
    auto_class = model_kind(config).load_class()
    base = auto_class.from_pretrained(resolve_model_source(config.model.name_or_path))
    pixels = config.vision.max_pixels
    base_accuracy = exact_match_accuracy(base, tokenizer, rows, max_pixels=pixels)
    tuned = PeftModel.from_pretrained(base, result) if result.name == "adapter" else auto_class.from_pretrained(result)
    return base_accuracy, exact_match_accuracy(tuned, tokenizer, rows, max_pixels=pixels), len(rows)


def report(preset: Path, keep: Path | None, goal_seconds: float) -> None:
    """Train ``preset`` through the CLI and print its wall time, losses and held-out exact match, base and tuned."""
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = keep or Path(tmp) / "run"
        seconds = train(preset.resolve(), run_dir.resolve())
        losses = [
            event["loss"]
            for event in map(json.loads, (run_dir / "metrics.jsonl").read_text().splitlines())
            if event["event"] == "train"
        ]
        base, tuned, count = accuracies(preset.resolve(), run_dir.resolve())
    print(f"preset: {preset.name}")
    print(f"training run, end to end: {seconds:.1f} s  (goal <= {goal_seconds:.0f} s)")
    print(f"train loss: first {losses[0]:.3f} -> last {losses[-1]:.3f}")
    print(f"held-out exact match ({count} rows): base {base:.1%} (goal <= 20%), tuned {tuned:.1%} (goal >= 80%)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", type=Path, default=ROOT / "assets" / "presets" / "demo.yaml")
    parser.add_argument("--keep", type=Path, help="keep the run directory here instead of a temporary one")
    args = parser.parse_args()
    report(args.preset, args.keep, goal_seconds=120)


if __name__ == "__main__":
    main()
