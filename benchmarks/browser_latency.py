"""What a person waits for in the browser: Start → first loss point, trainer → chart, Stop, Resume → new point.

Drives the real studio (``python launch.py``) in Debian's Chromium through Playwright, on the demo model:

- Start click → the first loss point on the chart, warm (the default: on a machine without GPUs the studio's
  fork server, engine.store.forks; elsewhere its standby) against a studio started with ``--no-standby`` and
  ``STUDIO_WARM_FORKS=0`` (the cold baseline, which pays the training libraries' imports after the click);
- a metric written by the trainer (its ``time`` in metrics.jsonl) → the point visible on the chart: p50, p95;
- Stop click → checkpoint on disk and the run's processes gone (or its worker kept idle for the resume), next
  to the run's step time and the checkpoint's save time (goal: at most one step + the save + 1 s);
- Resume click, right after the stop → the first new loss point on the chart.

Every round runs idle, then again beside a CPU hog that keeps one core busy (a program spinning on one of the
machine's cores, as a browser drawing or a compile would; started once the studio serves and is warm, killed at
the end of the round, and never older than ``HOG_LIMIT_S``). Each figure is printed for both, in seconds and in
the round's step times, since the step time itself grows under load: a latency below one step means the chart
keeps up with the trainer.

    python benchmarks/browser_latency.py              # 2 rounds, idle and loaded
    python benchmarks/browser_latency.py --rounds 3 --no-load

Goals: warm Start → first point <= 3 s; Resume → first new point <= 3 s (idle); trainer → chart p95 <= 0.5 s;
Stop <= one step + save + 1 s.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "e2e")]
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from e2e_harness import CHROMIUM, CHROMIUM_ARGS, VIEWPORT, Studio, wait_until  # noqa: E402

from engine import runs  # noqa: E402
from engine.store import forks  # noqa: E402
from engine.store.rundir import checkpoint_steps, iter_metrics  # noqa: E402
from engine.store.workspace import standby_dir  # noqa: E402
from tests.helpers.servers import free_port  # noqa: E402

POINTS_JS = """() => {
  const plot = document.querySelector('#ts-loss-chart .js-plotly-plot');
  const trace = plot && plot.data && plot.data.find((t) => t.name === 'train loss');
  return trace ? trace.x.slice() : [];
}"""
HOG_LIMIT_S = 900  # a hog outlives no round, even if this script is killed
HOG = "import time\nend = time.time() + {limit}\nwhile time.time() < end:\n    pass\n"
CONDITIONS = ("idle", "loaded")


@contextlib.contextmanager
def cpu_hog(enabled: bool) -> Iterator[None]:
    """A process that keeps one core busy while the block runs (nothing when not ``enabled``)."""
    if not enabled:
        yield
        return
    hog = subprocess.Popen([sys.executable, "-c", HOG.format(limit=HOG_LIMIT_S)])
    try:
        yield
    finally:
        hog.kill()
        hog.wait()


def set_field(page: Any, path: str, value: str) -> None:
    box = page.locator(f"#cfg-{path.replace('.', '-')} input").first
    box.fill(value)
    box.press("Tab")


def chart_steps(page: Any) -> list[int]:
    """The steps of the train-loss points on the Monitor's chart."""
    return page.evaluate(POINTS_JS)


def start_from_form(page: Any, workspace: Path) -> tuple[float, Path]:
    """Fill the form for a long demo run, click Start; seconds until the chart shows a loss point."""
    page.locator("#train-start").wait_for(state="visible", timeout=60_000)
    set_field(page, "train.max_steps", "2000")
    set_field(page, "train.logging_steps", "1")
    set_field(page, "train.save_steps", "1000")
    time.sleep(1.0)  # let the form's change events settle, as a person's reading time would
    clicked = time.time()
    page.locator("#train-start").click()
    wait_until(lambda: len(chart_steps(page)) >= 1, 120, 0.02, "the first loss point")
    first_point = time.time() - clicked
    return first_point, runs.run_dirs(workspace)[0]


def point_latencies(page: Any, run_dir: Path, seconds: float) -> list[float]:
    """For each step that appears while watching: chart time minus the trainer's write time."""
    already = set(chart_steps(page))
    seen: dict[int, float] = {}
    deadline = time.time() + seconds
    while time.time() < deadline:
        now = time.time()
        for step in chart_steps(page):
            if step not in already:
                seen.setdefault(step, now)
        time.sleep(0.02)
    written = {e["step"]: e["time"] for e in iter_metrics(run_dir) if e.get("event") == "train"}
    return [seen[step] - written[step] for step in sorted(seen) if step in written]


def stop_and_wait(page: Any, run_dir: Path) -> dict[str, float]:
    """Click Stop; seconds until the checkpoint is on disk and no process of the run is left (a worker kept for
    the resume is released: the status names it no more)."""
    clicked = time.time()
    page.locator("#ts-stop").click()

    def done() -> bool:
        now = runs.status(run_dir)
        return now.state == "stopped" and bool(now.checkpoints) and not runs.run_processes(run_dir)

    wait_until(done, 120, 0.02, "the stop to finish")
    gone = time.time() - clicked
    events = [e for e in iter_metrics(run_dir) if e.get("event") == "train"]
    step_times = [b["time"] - a["time"] for a, b in zip(events, events[1:], strict=False)]
    checkpoint = checkpoint_steps(run_dir)[-1]
    saved_at = (run_dir / "checkpoints" / f"checkpoint-{checkpoint}").stat().st_mtime
    last_step = next(e["time"] for e in reversed(events) if e["step"] <= checkpoint)
    return {"stop": gone, "step": statistics.median(step_times), "save": max(0.0, saved_at - last_step)}


def resume_and_wait(page: Any, run_dir: Path) -> dict[str, Any]:
    """Click Resume as soon as it is offered; seconds until the chart shows a step after the checkpoint."""
    stopped_at = checkpoint_steps(run_dir)[-1]
    resume = page.locator("#ts-resume")
    wait_until(resume.is_enabled, 30, 0.02, "Resume to be offered")
    clicked = time.time()
    resume.click()
    wait_until(lambda: max(chart_steps(page), default=0) > stopped_at, 120, 0.02, "a point after the resume")
    log = (run_dir / "train.log").read_text(errors="replace")
    # Warm: claimed by the standby that kept the worker ("warm"), or forked by the warm server ("warm fork").
    return {"resume": time.time() - clicked, "resume_warm": f"start (checkpoint {stopped_at}, warm" in log}


@contextlib.contextmanager
def cold_environment(cold: bool) -> Iterator[None]:
    """For the studio started within: no warm forks either (a second start would otherwise bring a server up)."""
    before = os.environ.get(forks.SWITCH_ENV)
    if cold:
        os.environ[forks.SWITCH_ENV] = "0"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(forks.SWITCH_ENV, None)
        else:
            os.environ[forks.SWITCH_ENV] = before


def studio_is_warm(studio: Studio, workspace: Path) -> bool:
    """Whether the studio's fork server listens, or its workspace's standby is ready."""
    return bool(forks.held_server(studio.process.pid) or list(standby_dir(workspace).glob("*.ready")))


def one_round(browser: Any, warm: bool, loaded: bool) -> dict[str, Any]:
    """A fresh studio and workspace: start a run from the form; warm, also watch it, stop it and resume it."""
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp)
        with cold_environment(not warm):
            studio = Studio(workspace, free_port(), () if warm else ("--no-standby",))
            studio.start()
        try:
            if warm:
                wait_until(lambda: studio_is_warm(studio, workspace), 120, 0.2, "the fork server or the standby")
            with cpu_hog(loaded):
                return measure(browser, studio, workspace, warm)
        finally:
            for run_dir in runs.run_dirs(workspace):
                runs.abort(run_dir)
            studio.kill()


def measure(browser: Any, studio: Studio, workspace: Path, warm: bool) -> dict[str, Any]:
    """The measures of one round on an open studio."""
    page = browser.new_page(viewport=VIEWPORT)
    page.goto(studio.url)
    first_point, run_dir = start_from_form(page, workspace)
    result: dict[str, Any] = {"first_point": first_point}
    if warm:
        result["latencies"] = point_latencies(page, run_dir, 8)
        result.update(stop_and_wait(page, run_dir))
        result.update(resume_and_wait(page, run_dir))
    else:
        wait_until(lambda: len(chart_steps(page)) >= 6, 120, 0.05, "a few steps")
        events = [e["time"] for e in iter_metrics(run_dir) if e.get("event") == "train"]
        result["step"] = statistics.median(b - a for a, b in zip(events, events[1:], strict=False))
    page.close()
    return result


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def median_of(rounds: list[dict[str, Any]], key: str) -> float:
    return statistics.median(r[key] for r in rounds)


def figures(warm: list[dict[str, Any]], cold: list[dict[str, Any]]) -> dict[str, str]:
    """One condition's figures, each in seconds and in step times of its rounds."""
    step = median_of(warm, "step")
    latencies = [x for r in warm for x in r["latencies"]]
    first, resume = median_of(warm, "first_point"), median_of(warm, "resume")
    cold_first, cold_step = median_of(cold, "first_point"), median_of(cold, "step")
    stop, save = median_of(warm, "stop"), median_of(warm, "save")
    p50, p95 = percentile(latencies, 0.5), percentile(latencies, 0.95)
    warm_resumes = sum(r["resume_warm"] for r in warm)

    def steps(seconds: float, per: float = step) -> str:
        return f"{seconds:.2f} s = {seconds / per:.1f} steps"

    return {
        "step time (median)": f"{step:.3f} s (cold rounds {cold_step:.3f} s)",
        "Start -> first point, warm": steps(first),
        "Start -> first point, cold": f"{steps(cold_first, cold_step)} (warm / cold {first / cold_first:.2f})",
        "Resume -> first new point": f"{steps(resume)} (warm {warm_resumes}/{len(warm)})",
        "trainer -> chart p50": steps(p50),
        "trainer -> chart p95": f"{steps(p95)} ({len(latencies)} points)",
        "Stop -> checkpoint, processes done": f"{stop:.2f} s (goal <= {step + save + 1:.2f} s)",
        "  of which past step + save": f"{stop - step - save:.2f} s (goal <= 1 s)",
    }


def report(results: dict[str, dict[str, list[dict[str, Any]]]]) -> None:
    """Print every figure for each condition measured, side by side."""
    table = {condition: figures(kinds["warm"], kinds["cold"]) for condition, kinds in results.items()}
    names = list(next(iter(table.values())))
    width = max(map(len, names))
    columns = {c: max(len(c), *map(len, table[c].values())) for c in table}
    print(f"\n{'':{width}}  " + " | ".join(f"{c:<{columns[c]}}" for c in table))
    for name in names:
        print(f"{name:{width}}  " + " | ".join(f"{table[c][name]:<{columns[c]}}" for c in table))
    print(
        "\nGoals: warm Start -> first point <= 3 s; Resume -> first new point <= 3 s (idle); trainer -> chart "
        "p95 <= 0.5 s; Stop <= step + save + 1 s. 'loaded': a CPU hog keeps one core busy beside everything."
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--no-load", action="store_true", help="skip the rounds beside a one-core CPU hog")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    conditions = CONDITIONS[:1] if args.no_load else CONDITIONS
    results = {c: {"warm": [], "cold": []} for c in conditions}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        for number in range(1, args.rounds + 1):
            for condition in conditions:
                loaded = condition == "loaded"
                warm = one_round(browser, warm=True, loaded=loaded)
                cold = one_round(browser, warm=False, loaded=loaded)
                results[condition]["warm"].append(warm)
                results[condition]["cold"].append(cold)
                print(
                    f"round {number} {condition}: start->first point warm {warm['first_point']:.2f} s, cold "
                    f"{cold['first_point']:.2f} s; resume {warm['resume']:.2f} s; stop {warm['stop']:.2f} s; "
                    f"step {warm['step']:.3f} s",
                    flush=True,
                )
        browser.close()
    report(results)
    print(json.dumps(results), file=sys.stderr)


if __name__ == "__main__":
    main()
