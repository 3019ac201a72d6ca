"""The demo sweep, measured: its wall time, and its best trial against the demo preset it searches around.

    python benchmarks/demo_sweep.py                                  # assets/presets/sweeps/demo-sweep.yaml
    python benchmarks/demo_sweep.py --sweep my-sweep.yaml --keep ws  # another sweep; keep its workspace

Runs ``python -m engine sweep`` in a fresh workspace exactly as a user would, timing it end to end, then trains the
sweep's base config (the demo preset) with ``python -m engine train`` and compares the two on the held-out split:
the last eval loss of each, and greedy exact match of each adapter (benchmarks/demo_accuracy.py's measure).

Goals (issue): the sweep finishes in at most 6 minutes on 2 CPU cores, and its best trial is at least as good as
the demo preset on held-out exact match or eval loss.
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

from demo_accuracy import accuracies  # noqa: E402  (benchmarks/ is the script's folder)
from throughput import train_run  # noqa: E402

from engine.sweeps import load_sweep, sweep_status  # noqa: E402

SWEEP = ROOT / "assets" / "presets" / "sweeps" / "demo-sweep.yaml"


def run_sweep(sweep: Path, workspace: Path) -> float:
    """The sweep in the foreground through the CLI; returns its wall time in seconds."""
    started = time.perf_counter()
    command = [sys.executable, "-m", "engine", "sweep", str(sweep), "--workspace", str(workspace)]
    subprocess.run(command, check=True, cwd=ROOT)
    return time.perf_counter() - started


def last_eval_loss(run_dir: Path) -> float | None:
    """The run's last logged eval loss."""
    losses = [
        event["eval_loss"]
        for event in map(json.loads, (run_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines())
        if event.get("event") == "eval" and "eval_loss" in event
    ]
    return losses[-1] if losses else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sweep", type=Path, default=SWEEP)
    parser.add_argument("--keep", type=Path, help="a workspace to keep (default: a temporary one)")
    args = parser.parse_args()
    config = load_sweep(args.sweep)
    with tempfile.TemporaryDirectory() as tmp:
        workspace = (args.keep or Path(tmp) / "ws").resolve()
        seconds = run_sweep(args.sweep.resolve(), workspace)
        summary = sweep_status(workspace, config.name)
        best = summary.best
        if best is None:
            raise SystemExit(f"the sweep finished no trial ({seconds:.0f} s)")
        best_dir = workspace / "runs" / best.run_id
        baseline_dir = Path(tmp) / "baseline"
        baseline_seconds = train_run(config.base, baseline_dir)
        states = ", ".join(f"{summary.count(state)} {state}" for state in ("complete", "pruned", "fail"))
        print(f"sweep {config.name}: {seconds:.1f} s end to end for {summary.done} trials ({states})  (goal <= 360 s)")
        print(f"best trial {best.number}: {best.params}")
        print(f"the sweep's base config alone (the demo preset): {baseline_seconds:.1f} s")
        print(f"eval loss: preset {last_eval_loss(baseline_dir):.4f}, best trial {last_eval_loss(best_dir):.4f}")
        base_rate, preset_rate, rows = accuracies(baseline_dir / "config.yaml", baseline_dir)
        _, best_rate, _ = accuracies(best_dir / "config.yaml", best_dir)
        rates = f"base {base_rate:.1%}, preset {preset_rate:.1%}, best trial {best_rate:.1%}"
        print(f"held-out exact match ({rows} rows): {rates}")


if __name__ == "__main__":
    main()
