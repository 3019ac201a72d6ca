"""Cost of one Monitor chart update as a run grows: 100, 10k and 100k logged points.

A live run appends one metrics line per logged step; for each, the page's chart script asks the studio's
charts route, which reads the new lines (by byte offset, through the run's shared feed) and answers with the
charts that changed, as JSON. This measures exactly that answer (studio.monitor.routes.charts_response, what the
route runs after its long poll ends) once the page holds the history: append one train event, build the
answer, repeat. It also reports the size of the loss chart sent to the browser, which stays bounded
(decimation to at most studio.charts.MAX_POINTS points per line).

    python benchmarks/chart_update.py                 # 100, 10k, 100k points
    python benchmarks/chart_update.py --ticks 400

Goal: the update at 100k points costs at most 1.5x the update at 100 points.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine.config import RunConfig  # noqa: E402
from engine.runs.control import create_run  # noqa: E402
from engine.store.rundir import METRICS_FILE, update_status  # noqa: E402
from studio.monitor.live import live_token  # noqa: E402
from studio.monitor.routes import ChartQuery, charts_response  # noqa: E402


def train_event(step: int) -> dict[str, float | int | str]:
    """A realistic train line: a noisy decaying loss and the other logged values."""
    return {
        "event": "train",
        "step": step,
        "epoch": step / 1000,
        "time": 1_700_000_000 + step * 0.5,
        "loss": 2.0 + math.exp(-step / 5000) + 0.1 * math.sin(step * 0.37),
        "learning_rate": 1e-4,
        "grad_norm": 1.0 + 0.2 * math.cos(step * 0.11),
        "tokens_per_second": 1000.0 + step % 17,
        "num_input_tokens_seen": step * 400,
    }


def make_run(workspace: Path, points: int) -> Path:
    """A running run whose metrics.jsonl already holds ``points`` train events."""
    run_dir = create_run(RunConfig(name=f"bench-{points}"), workspace=workspace)
    with open(run_dir / METRICS_FILE, "w", encoding="utf-8") as handle:
        for step in range(1, points + 1):
            handle.write(json.dumps(train_event(step)) + "\n")
    # A finished state keeps the status reconciliation out of the timing (it checks no processes).
    update_status(run_dir, state="stopped", step=points, max_steps=points * 2)
    return run_dir


def tick_seconds(run_dir: Path, points: int, ticks: int) -> tuple[float, int]:
    """Median seconds of one answer after one new line, and the loss chart's size in bytes."""
    query = ChartQuery(live_token(run_dir), smoothing=0.6)
    have = orjson.loads(charts_response(run_dir, query).body)["keys"]  # the page has shown the history
    timings = []
    size = 0
    with open(run_dir / METRICS_FILE, "a", encoding="utf-8") as handle:
        for step in range(points + 1, points + ticks + 1):
            handle.write(json.dumps(train_event(step)) + "\n")
            handle.flush()
            started = time.perf_counter()
            answer = charts_response(run_dir, replace(query, have=have))
            timings.append(time.perf_counter() - started)
            body = orjson.loads(answer.body)
            assert body["figures"], "the new line changed no chart"
            have = body["keys"]
            size = len(orjson.dumps(body["figures"]["loss"]))
    return statistics.median(timings), size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ticks", type=int, default=200, help="updates timed per size")
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 10_000, 100_000])
    args = parser.parse_args()
    results: dict[int, tuple[float, int]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        tick_seconds(make_run(Path(tmp), min(args.sizes)), min(args.sizes), 20)  # warm-up: imports, caches
        for points in args.sizes:
            results[points] = tick_seconds(make_run(Path(tmp), points), points, args.ticks)
            seconds, size = results[points]
            print(
                f"{points:>7} points: {seconds * 1e3:6.2f} ms per update, loss chart {size / 1e3:5.1f} kB", flush=True
            )
    smallest, largest = min(results), max(results)
    ratio = results[largest][0] / results[smallest][0]
    print(f"update at {largest} points / at {smallest} points: {ratio:.2f}  (goal <= 1.5)")


if __name__ == "__main__":
    main()
