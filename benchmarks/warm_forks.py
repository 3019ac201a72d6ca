"""Runs started cold against runs forked from a warm server (engine.store.forks), arms alternated.

Each round starts the same short demo run through ``engine.runs.start`` twice: once with ``STUDIO_WARM_FORKS=0``
(a cold ``python -m engine supervise`` that starts ``python -m engine worker``), once forked from a server that
was brought up before the first round (its imports are printed apart, paid once per machine and environment).
Per arm: Start -> first train step on disk, Start -> run completed, and the CPU seconds the whole machine spent
meanwhile (from /proc/stat: the run's processes and anything else, so keep the machine otherwise idle). Then the
same for the CLI, cold against handed to the server: ``python -m engine check CONFIG`` and a foreground
``python -m engine train CONFIG`` of the same run (wall time to exit, and machine CPU).

    python benchmarks/warm_forks.py              # 4 rounds
    python benchmarks/warm_forks.py --rounds 6 --steps 20
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from engine import runs  # noqa: E402
from engine.config import parse_config, save_config  # noqa: E402
from engine.store import forks  # noqa: E402
from engine.store.processes import command_line, engine_command, engine_env  # noqa: E402
from engine.store.rundir import iter_metrics  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")


def machine_busy_seconds() -> float:
    fields = [int(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / TICKS  # all but idle and iowait


def config(steps: int):
    return parse_config(
        {
            "name": "warm-forks",
            "model": {"name_or_path": str(ROOT / "assets" / "demo-model")},
            "data": {"path": str(ROOT / "assets" / "datasets" / "demo_sft_train.jsonl"), "max_samples": 64},
            "train": {"max_steps": steps, "per_device_batch_size": 4, "max_length": 64, "save_steps": steps},
            "launch": {"threads_per_process": 1},
        }
    )


def one_run(workspace: Path, steps: int, warm: bool) -> dict[str, float]:
    os.environ[forks.SWITCH_ENV] = "1" if warm else "0"
    run_dir = runs.create_run(config(steps), workspace=workspace)
    busy, started = machine_busy_seconds(), time.monotonic()
    supervisor = runs.start(run_dir)
    forked = "fork-server" in " ".join(command_line(supervisor))
    assert forked == warm, f"the {'warm' if warm else 'cold'} arm's run was {'' if forked else 'not '}forked"
    first = None
    while True:
        current = runs.status(run_dir)
        if first is None and any(event["event"] == "train" for event in iter_metrics(run_dir)):
            first = time.monotonic() - started
        if current.is_final:
            break
        time.sleep(0.01)
    assert current.state == "completed", current
    return {"first_step": first, "done": time.monotonic() - started, "cpu": machine_busy_seconds() - busy}


def one_command(workspace: Path, command: str, steps: int, warm: bool) -> dict[str, float]:
    """``python -m engine check`` or ``train`` on the run's config, cold or handed to the server."""
    path = workspace / f"cli-{time.monotonic_ns()}.yaml"
    save_config(config(steps), path)
    args = [command, str(path)] + (["--run-dir", str(path.with_suffix(""))] if command == "train" else [])
    env = engine_env({forks.SWITCH_ENV: "1" if warm else "0"})
    busy, started = machine_busy_seconds(), time.monotonic()
    done = subprocess.run(engine_command(*args), env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    return {"done": time.monotonic() - started, "cpu": machine_busy_seconds() - busy}


def report(results: dict[str, list[dict[str, float]]], measures: tuple[tuple[str, str], ...]) -> None:
    for measure, label in measures:
        cold = statistics.median(r[measure] for r in results["cold"])
        warm = statistics.median(r[measure] for r in results["warm"])
        print(f"{label:28s} cold {cold:6.2f}   warm {warm:6.2f}   warm / cold {warm / cold:.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()
    if not forks.available():
        print("warm forks are not available on this machine")
        return 1
    workspace = Path(tempfile.mkdtemp(prefix="warm-forks-"))
    os.environ[forks.SWITCH_ENV] = "1"
    key = forks.server_key(engine_env())
    busy, started = machine_busy_seconds(), time.monotonic()
    forks.start_server(key)
    assert forks.wait_for_server(key, 300), "the fork server did not come up"
    print(f"server up in {time.monotonic() - started:.1f} s, {machine_busy_seconds() - busy:.1f} CPU-s (once)")
    results: dict[str, list[dict[str, float]]] = {"cold": [], "warm": []}
    commands: dict[str, dict[str, list[dict[str, float]]]] = {c: {"cold": [], "warm": []} for c in ("check", "train")}
    for round_number in range(args.rounds):
        for arm in ("cold", "warm") if round_number % 2 == 0 else ("warm", "cold"):
            result = one_run(workspace, args.steps, arm == "warm")
            results[arm].append(result)
            print(f"round {round_number + 1} {arm}: " + ", ".join(f"{k} {v:.2f}" for k, v in result.items()))
            for command, found in commands.items():
                found[arm].append(one_command(workspace, command, args.steps, arm == "warm"))
                print(f"  {command}: " + ", ".join(f"{k} {v:.2f}" for k, v in found[arm][-1].items()))
    print()
    run_measures = (
        ("first_step", "Start -> first step (s)"),
        ("done", "Start -> completed (s)"),
        ("cpu", "machine CPU-s per run"),
    )
    report(results, run_measures)
    for command, found in commands.items():
        report(found, (("done", f"engine {command}: to exit (s)"), ("cpu", f"engine {command}: machine CPU-s")))
    print(f"(medians of {args.rounds} rounds, {args.steps} steps each, arms alternated; workspace {workspace})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
