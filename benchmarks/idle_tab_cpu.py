"""CPU an idle studio tab costs the browser: the studio as launched (its page prelude paces Gradio's StatusTracker
frames, assets/tracker_pacing.js) against the same studio without the prelude, arms alternated.

    python benchmarks/idle_tab_cpu.py [--rounds 3] [--seconds 20]

Each arm is one ``launch.py --no-standby`` on a fresh workspace. Each round opens the Train tab in a new headless
Chromium (Debian's, as the browser tests use it) at 1366x768, waits for the form and a few seconds more, then reads
the CPU time of that Chromium's processes (the browser and all it started; /proc, Linux) over ``--seconds``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from studio_idle_cpu import ROOT, SETTLE_S, alternated, cpu_seconds, print_ratio, start_studio

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--no-first-run", "--disable-background-networking"]
# The baseline arm: launch.py without the studio's middleware (the prelude; no demo mode here, so nothing else).
NO_PRELUDE = "import sys, launch, studio.app as app; app.middleware = lambda policy: []; launch.main(sys.argv[1:])"
ARMS = {"paced": [str(ROOT / "launch.py")], "gradio": ["-c", NO_PRELUDE]}


def parents() -> dict[int, int]:
    """Every process's parent (/proc)."""
    found: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                found[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):  # ended meanwhile
                continue
    return found


def tree_cpu(root: int) -> float:
    """CPU-seconds of ``root`` and every process below it."""
    parent_of = parents()
    tree, frontier = [root], [root]
    while frontier:
        frontier = [pid for pid, parent in parent_of.items() if parent in frontier]
        tree += frontier
    total = 0.0
    for pid in tree:
        try:
            total += cpu_seconds(pid)
        except (OSError, IndexError, ValueError):  # ended meanwhile
            continue
    return total


def browser_pid(user_data_dir: str) -> int:
    """The Chromium whose command line names ``user_data_dir`` and whose parent's does not (the browser process)."""
    mine = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if user_data_dir.encode() in (entry / "cmdline").read_bytes():
                    mine.add(int(entry.name))
            except OSError:
                continue
    parent_of = parents()
    return next(pid for pid in mine if parent_of.get(pid) not in mine)


def measure(url: str, seconds: float) -> float:
    """Chromium's CPU-seconds per 10 s with the studio page at ``url`` open and idle."""
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as profile, sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            profile, executable_path=CHROMIUM, args=CHROMIUM_ARGS, viewport={"width": 1366, "height": 768}
        )
        try:
            page = context.new_page()
            page.goto(url)
            page.locator("#train-start").wait_for(timeout=180_000)
            time.sleep(SETTLE_S)
            root = browser_pid(profile)
            before = tree_cpu(root)
            time.sleep(seconds)
            return (tree_cpu(root) - before) * 10 / seconds
        finally:
            context.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as paced_ws, tempfile.TemporaryDirectory() as gradio_ws:
        studios = {"paced": start_studio(ARMS["paced"], paced_ws), "gradio": start_studio(ARMS["gradio"], gradio_ws)}
        try:
            results = alternated(list(ARMS), args.rounds, lambda arm: measure(studios[arm][1], args.seconds))
        finally:
            for process, _url in studios.values():
                process.terminate()
                process.wait(timeout=30)
    print_ratio(results, "idle studio tab, Chromium", "without the prelude")
    return 0


if __name__ == "__main__":
    sys.exit(main())
