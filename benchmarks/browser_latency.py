"""What a person waits for in the browser: Start → first loss point, trainer → chart, Stop → checkpoint.

Drives the real studio (``python launch.py``) in Debian's Chromium through Playwright, on the demo model:

- Start click → the first loss point on the chart, with the warm standby (the default) against a studio
  started with ``--no-standby`` (the cold baseline, which pays the training libraries' imports after the
  click), alternated round by round in one invocation;
- a metric written by the trainer (its ``time`` in metrics.jsonl) → the point visible on the chart: p50, p95;
- Stop click → checkpoint on disk and every process of the run gone, next to the run's step time and the
  checkpoint's save time (goal: at most one step + the save + 1 s).

    python benchmarks/browser_latency.py              # 2 rounds
    python benchmarks/browser_latency.py --rounds 3

Goals: Start → first point <= 3 s (warm); trainer → chart p95 <= 0.5 s.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "e2e")]
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from e2e_harness import CHROMIUM, CHROMIUM_ARGS, VIEWPORT, Studio, free_port, wait_until  # noqa: E402

from engine import runs  # noqa: E402
from engine.store.processes import is_alive  # noqa: E402
from engine.store.rundir import checkpoint_steps, iter_metrics  # noqa: E402
from engine.store.workspace import standby_dir  # noqa: E402

POINTS_JS = """() => {
  const plot = document.querySelector('#ts-loss-chart .js-plotly-plot');
  const trace = plot && plot.data && plot.data.find((t) => t.name === 'train loss');
  return trace ? trace.x.slice() : [];
}"""


def set_field(page: Any, path: str, value: str) -> None:
    box = page.locator(f"#cfg-{path.replace('.', '-')} input").first
    box.fill(value)
    box.press("Tab")


def start_from_form(page: Any, workspace: Path) -> tuple[float, Path]:
    """Fill the form for a long demo run, click Start; seconds until the chart shows a loss point."""
    page.locator("#train-start").wait_for(state="visible", timeout=60_000)
    set_field(page, "train.max_steps", "2000")
    set_field(page, "train.logging_steps", "1")
    set_field(page, "train.save_steps", "1000")
    time.sleep(1.0)  # let the form's change events settle, as a person's reading time would
    clicked = time.time()
    page.locator("#train-start").click()
    wait_until(lambda: len(page.evaluate(POINTS_JS)) >= 1, 120, 0.02, "the first loss point")
    first_point = time.time() - clicked
    return first_point, runs.run_dirs(workspace)[0]


def point_latencies(page: Any, run_dir: Path, seconds: float) -> list[float]:
    """For each step that appears while watching: chart time minus the trainer's write time."""
    already = set(page.evaluate(POINTS_JS))
    seen: dict[int, float] = {}
    deadline = time.time() + seconds
    while time.time() < deadline:
        now = time.time()
        for step in page.evaluate(POINTS_JS):
            if step not in already:
                seen.setdefault(step, now)
        time.sleep(0.02)
    written = {e["step"]: e["time"] for e in iter_metrics(run_dir) if e.get("event") == "train"}
    return [seen[step] - written[step] for step in sorted(seen) if step in written]


def stop_and_wait(page: Any, run_dir: Path) -> dict[str, float]:
    """Click Stop; seconds until the checkpoint is on disk and no process of the run lives."""
    before = runs.status(run_dir)
    pids = [before.pid, before.supervisor_pid]
    clicked = time.time()
    page.locator("#ts-stop").click()

    def done() -> bool:
        now = runs.status(run_dir)
        return now.state == "stopped" and bool(now.checkpoints) and not any(is_alive(p) for p in pids)

    wait_until(done, 120, 0.02, "the stop to finish")
    gone = time.time() - clicked
    events = [e for e in iter_metrics(run_dir) if e.get("event") == "train"]
    step_times = [b["time"] - a["time"] for a, b in zip(events, events[1:], strict=False)]
    checkpoint = checkpoint_steps(run_dir)[-1]
    saved_at = (run_dir / "checkpoints" / f"checkpoint-{checkpoint}").stat().st_mtime
    last_step = next(e["time"] for e in reversed(events) if e["step"] <= checkpoint)
    return {"stop": gone, "step": statistics.median(step_times), "save": max(0.0, saved_at - last_step)}


def one_round(browser: Any, warm: bool) -> dict[str, Any]:
    """A fresh studio and workspace: start a run from the form, watch it, stop it."""
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp)
        studio = Studio(workspace, free_port(), () if warm else ("--no-standby",))
        studio.start()
        try:
            if warm:
                wait_until(lambda: list(standby_dir(workspace).glob("*.ready")), 120, 0.2, "the standby")
            page = browser.new_page(viewport=VIEWPORT)
            page.goto(studio.url)
            first_point, run_dir = start_from_form(page, workspace)
            result: dict[str, Any] = {"first_point": first_point}
            if warm:
                result["latencies"] = point_latencies(page, run_dir, 8)
                result.update(stop_and_wait(page, run_dir))
            else:
                runs.abort(run_dir)
            page.close()
            return result
        finally:
            for run_dir in runs.run_dirs(workspace):
                runs.abort(run_dir)
            studio.kill()


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    warm: list[dict[str, Any]] = []
    cold: list[float] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        for number in range(1, args.rounds + 1):
            warm.append(one_round(browser, warm=True))
            cold.append(one_round(browser, warm=False)["first_point"])
            print(f"round {number}: start->first point warm {warm[-1]['first_point']:.2f} s, cold {cold[-1]:.2f} s")
        browser.close()
    first = statistics.median(r["first_point"] for r in warm)
    latencies = [x for r in warm for x in r["latencies"]]
    print(
        f"\nStart click -> first loss point (median of {args.rounds}): warm {first:.2f} s (goal <= 3 s), "
        f"cold {statistics.median(cold):.2f} s; warm / cold {first / statistics.median(cold):.2f}"
    )
    print(
        f"trainer -> chart over {len(latencies)} points: p50 {percentile(latencies, 0.5):.3f} s, "
        f"p95 {percentile(latencies, 0.95):.3f} s (goal p95 <= 0.5 s)"
    )
    stop = statistics.median(r["stop"] for r in warm)
    step = statistics.median(r["step"] for r in warm)
    save = statistics.median(r["save"] for r in warm)
    print(
        f"Stop click -> checkpoint on disk and processes gone: {stop:.2f} s; one step {step:.2f} s + save "
        f"{save:.2f} s + 1 s = {step + save + 1:.2f} s (goal: stop <= that)"
    )
    print(json.dumps({"warm": warm, "cold": cold}), file=sys.stderr)


if __name__ == "__main__":
    main()
