"""What the Train form costs the page: a preset picked -> its method section shown; a number typed -> its error shown.

Drives the real studio (``python launch.py``) in Debian's Chromium through Playwright, twice a round: this checkout
and a baseline commit, checked out with ``git worktree`` into a temporary folder, each started fresh on an empty
workspace, the arms alternated round by round. The default baseline, b838812, is the last commit whose live preview
followed every field's ``change``: a loaded preset sent one preview per field it changed (up to fifteen), and
Gradio's page spends tens of milliseconds per event and component on the loading statuses
(see benchmarks/README.md, "The Train form's events").

Timed, from the click or the last key to what the page shows:
- pick "preset: demo-dpo" in the config files list -> the DPO section visible ("shown"), and the YAML preview
  showing the preset's name and method ("previewed"); then "preset: demo-grpo", the same;
- type -5 into the max steps field (one input, one preview) -> its error visible below it.

    python benchmarks/form_latency.py                    # 3 rounds against b838812
    python benchmarks/form_latency.py --rounds 5 --baseline HEAD~3

Goal: a preset shown and previewed within 3 s of the pick, idle.
"""

from __future__ import annotations

import argparse
import contextlib
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

from e2e_harness import CHROMIUM, CHROMIUM_ARGS, VIEWPORT, wait_for_form, wait_until  # noqa: E402

from tests.helpers.servers import free_port  # noqa: E402

PRESETS = (("demo-dpo", "dpo"), ("demo-grpo", "grpo"))
STEPS = "#cfg-train-max_steps"
SETTLE_S = 3.0  # the page's events of the last step (its load, a preset's checks) finish before the next one
FIGURES = ("demo-dpo shown", "demo-dpo previewed", "demo-grpo shown", "demo-grpo previewed", "max steps error")
# Whether the YAML preview (a CodeMirror editor: its first lines are in the page) holds every one of the lines.
PREVIEWS = """(lines) => [...document.querySelectorAll('.cm-content')].some(
  (code) => lines.every((line) => code.innerText.includes(line)))"""


@contextlib.contextmanager
def worktree(rev: str) -> Iterator[Path]:
    """The project at ``rev`` in a temporary folder (a detached git worktree), removed afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="form-latency-"))
    subprocess.run(["git", "worktree", "add", "--detach", str(folder), rev], cwd=ROOT, check=True, capture_output=True)
    try:
        yield folder
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(folder)], cwd=ROOT, capture_output=True)


@contextlib.contextmanager
def studio(root: Path) -> Iterator[str]:
    """``launch.py`` of the checkout at ``root`` on a fresh workspace; yields its URL."""
    port = free_port()
    with tempfile.TemporaryDirectory() as workspace:
        command = [sys.executable, str(root / "launch.py"), "--port", str(port), "--workspace", workspace]
        # Nothing warmed beside the page (a fork server imports the training libraries as the studio starts).
        command.append("--no-standby")
        env = dict(os.environ, HF_HUB_OFFLINE="1", GRADIO_ANALYTICS_ENABLED="False", STUDIO_WARM_FORKS="0")
        process = subprocess.Popen(command, cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        url = f"http://127.0.0.1:{port}/"
        try:
            wait_until(lambda: serves(url, process), 120, 0.2, "the studio to serve its page")
            yield url
        finally:
            process.terminate()
            process.wait(30)


def serves(url: str, process: subprocess.Popen[bytes]) -> bool:
    import urllib.request

    if process.poll() is not None:
        raise RuntimeError(f"the studio exited with {process.returncode}")
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def pick_preset(page: Any, name: str, section: str) -> tuple[float, float]:
    """Seconds from the pick of ``preset: name`` to the method section ``section`` shown, and to the live preview
    (the YAML beside the form) showing the preset's name and method."""
    page.locator("#train-config-choice input").click()
    option = page.get_by_role("option", name=f"preset: {name}").first
    option.wait_for(state="visible")
    began = time.perf_counter()
    option.click()
    page.locator(f"#ts-method-{section}").wait_for(state="visible", timeout=120_000)
    shown = time.perf_counter() - began
    page.wait_for_function(PREVIEWS, arg=[f"name: {name}", f"method: {section}"], timeout=120_000)
    return shown, time.perf_counter() - began


def type_steps(page: Any) -> float:
    """Seconds from the last key of an out-of-range max steps to its error shown below the field."""
    field = page.locator(f"{STEPS} input").first
    field.fill("")
    began = time.perf_counter()
    field.press_sequentially("-5")
    page.locator(f"{STEPS}-error").wait_for(state="visible", timeout=120_000)
    return time.perf_counter() - began


def one_round(browser: Any, root: Path) -> dict[str, float]:
    """One studio of the checkout at ``root``, one page: every figure once."""
    with studio(root) as url:
        page = browser.new_page(viewport=VIEWPORT)
        try:
            page.goto(url)
            wait_for_form(page)
            time.sleep(SETTLE_S)
            figures = {}
            for name, section in PRESETS:
                figures[f"{name} shown"], figures[f"{name} previewed"] = pick_preset(page, name, section)
                time.sleep(SETTLE_S)
            figures["max steps error"] = type_steps(page)
            return figures
        finally:
            page.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline", default="b838812", help="the commit to compare with")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    times: dict[str, dict[str, list[float]]] = {"this checkout": {}, args.baseline: {}}
    with worktree(args.baseline) as baseline, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        arms = {"this checkout": ROOT, args.baseline: baseline}
        for round_no in range(1, args.rounds + 1):
            order = list(arms) if round_no % 2 else list(reversed(arms))  # alternate who goes first
            for arm in order:
                figures = one_round(browser, arms[arm])
                for name, seconds in figures.items():
                    times[arm].setdefault(name, []).append(seconds)
                shown = ", ".join(f"{name} {seconds:.2f} s" for name, seconds in figures.items())
                print(f"round {round_no}, {arm}: {shown}", flush=True)
        browser.close()
    print(f"\nmedians of {args.rounds} rounds: this checkout / {args.baseline}")
    for name in FIGURES:
        ours, theirs = statistics.median(times["this checkout"][name]), statistics.median(times[args.baseline][name])
        print(f"{name:>19}: {ours:5.2f} s / {theirs:5.2f} s  ratio {ours / theirs:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
