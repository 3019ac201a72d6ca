"""Pruning, measured: the training steps a sweep spends with its pruner against the same sweep without one.

    python benchmarks/sweep_pruning.py                            # assets/presets/sweeps/demo-sweep.yaml
    python benchmarks/sweep_pruning.py --sweep my-sweep.yaml      # another sweep
    python benchmarks/sweep_pruning.py --keep ws                  # keep both arms' workspaces (ws/pruned, ws/unpruned)

Runs ``python -m engine sweep`` twice, each in a fresh workspace, exactly as a user would: the sweep as given, then
the same sweep (same seed, same sampler, same trials) with ``pruner: none``. A trial's steps are the steps its
run trained (its status's last step: where a pruned run was stopped, or its max_steps). Prints each arm's trials,
the steps, the saving, and each arm's best trial.

Goal (issue): at least 30 % fewer steps with pruning, and the same best trial or one within noise of it. A pruned
trial gives the sampler (TPE) a partial result, so the two arms may draw different values after the first pruned
trial; the script says whether the best trials are the same one.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from engine.store.rundir import read_status  # noqa: E402
from engine.sweeps import SweepConfig, SweepSummary, load_sweep, sweep_status  # noqa: E402
from engine.sweeps.study import sweep_record  # noqa: E402

SWEEP = ROOT / "assets" / "presets" / "sweeps" / "demo-sweep.yaml"
GOAL_SAVING = 0.30


def without_pruner(config: SweepConfig) -> dict:
    """The sweep as a self-contained mapping (base inlined), its pruner turned off."""
    record = sweep_record(config)
    record["pruner"] = {"kind": "none"}
    return record


def run_arm(record: dict, folder: Path) -> tuple[float, SweepSummary]:
    """One sweep through the CLI in ``folder/ws``; its wall time and summary."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "sweep.yaml"
    path.write_text(yaml.safe_dump(record, sort_keys=False))
    started = time.perf_counter()
    command = [sys.executable, "-m", "engine", "sweep", str(path), "--workspace", str(folder / "ws")]
    subprocess.run(command, check=True, cwd=ROOT)
    return time.perf_counter() - started, sweep_status(folder / "ws", record["name"])


def trial_steps(folder: Path, summary: SweepSummary) -> dict[int, int]:
    """Steps each trial's run trained, by trial number."""
    return {
        trial.number: read_status(folder / "ws" / "runs" / trial.run_id).step or 0
        for trial in summary.trials
        if trial.run_id
    }


def show(label: str, seconds: float, summary: SweepSummary, steps: dict[int, int]) -> None:
    print(f"{label}: {sum(steps.values())} steps, {seconds:.0f} s, {summary.done} trials")
    for trial in sorted(summary.trials, key=lambda trial: trial.number):
        value = "-" if trial.value is None else f"{trial.value:.4f}"
        print(f"  trial {trial.number}: {trial.state:8} {steps.get(trial.number, 0):5} steps  {value}  {trial.params}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sweep", type=Path, default=SWEEP)
    parser.add_argument("--keep", type=Path, help="a folder to keep both arms' workspaces in (default: temporary)")
    args = parser.parse_args()
    config = load_sweep(args.sweep)
    if config.pruner.kind == "none":
        raise SystemExit(f"{args.sweep} has no pruner: nothing to compare")
    with tempfile.TemporaryDirectory() as tmp:
        root = (args.keep or Path(tmp)).resolve()
        arms = {"pruned": sweep_record(config), "unpruned": without_pruner(config)}
        results = {label: run_arm(record, root / label) for label, record in arms.items()}
        steps = {label: trial_steps(root / label, summary) for label, (_, summary) in results.items()}
        for label, (seconds, summary) in results.items():
            show(f"{label} ({config.pruner.kind if label == 'pruned' else 'none'})", seconds, summary, steps[label])
        pruned, unpruned = (sum(steps[label].values()) for label in ("pruned", "unpruned"))
        saving = 1 - pruned / unpruned
        print(f"steps with pruning / without: {pruned} / {unpruned} = {pruned / unpruned:.2f}: {saving:.0%} fewer")
        print(f"  (goal >= {GOAL_SAVING:.0%} fewer)")
        best = {label: summary.best for label, (_, summary) in results.items()}
        for label, trial in best.items():
            print(f"best {label}: trial {trial.number} {trial.value:.4f} {trial.params}" if trial else f"{label}: none")
        if best["pruned"] and best["unpruned"]:
            same = best["pruned"].params == best["unpruned"].params
            gap = best["pruned"].value - best["unpruned"].value
            print(f"same best trial: {'yes' if same else 'no'}; best value with pruning minus without: {gap:+.4f}")


if __name__ == "__main__":
    main()
