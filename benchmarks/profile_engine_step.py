"""Where the engine's training steps spend their time: one engine arm of throughput_real.py (same model, data and
settings) trained in this process by engine.training.recipe.run, the function the worker runs, under cProfile and
torch.profiler. Prints the Python functions with the most time of their own and the most time below them, then
PyTorch's operators by their own CPU time and (on a GPU) by their own CUDA time.

    python benchmarks/profile_engine_step.py --arm engine --steps 6 --batch 16     # on a GPU machine
    python benchmarks/profile_engine_step.py --arm engine-padded --steps 2 --rows 8 --batch 2
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from throughput_real import ENGINE_VARIANTS, build_model, engine_config, write_rows  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arm", choices=sorted(ENGINE_VARIANTS), default="engine")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--rows", type=int, default=200)
    parser.add_argument("--top", type=int, default=25, help="rows of each table")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from torch.profiler import ProfilerActivity, profile

    from engine.runs.control import create_run
    from engine.training import recipe

    build_model()
    with tempfile.TemporaryDirectory() as tmp:
        data = write_rows(args.rows, Path(tmp))
        run_dir = create_run(engine_config(args.arm, data, args.steps, args.batch), run_dir=Path(tmp) / "run")
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
        python = cProfile.Profile()
        started = time.perf_counter()
        with profile(activities=activities) as operators:
            python.enable()
            code = recipe.run(run_dir)
            python.disable()
        wall = time.perf_counter() - started
        lines = (run_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
        events = [event for event in map(json.loads, lines) if event.get("event") == "train"]
    print(f"\nrecipe.run exit {code}, {wall:.1f} s in all (model and data loading included)")
    if len(events) >= 2:
        seconds = (events[-1]["time"] - events[0]["time"]) / (len(events) - 1)
        tokens = (events[-1]["num_input_tokens_seen"] - events[0]["num_input_tokens_seen"]) / (len(events) - 1)
        print(f"steps after the first, profiled: {seconds:.3f} s a step, {tokens:.0f} tokens a step")
    for order in ("tottime", "cumulative"):
        text = io.StringIO()
        pstats.Stats(python, stream=text).sort_stats(order).print_stats(args.top)
        body = text.getvalue()
        print(f"\n--- Python, by {order} ---\n" + body[body.find("   ncalls") :].rstrip())
    sorts = ["self_cpu_time_total"] + (["self_cuda_time_total"] if torch.cuda.is_available() else [])
    for order in sorts:
        print(f"\n--- PyTorch operators, by {order} ---")
        print(operators.key_averages().table(sort_by=order, row_limit=args.top, max_name_column_width=60))


if __name__ == "__main__":
    main()
