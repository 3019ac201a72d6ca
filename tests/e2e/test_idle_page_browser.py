"""An idle studio page in a real Chromium asks few animation frames: Gradio 6.31's StatusTracker leaves the loading
screen's 60-a-second timer loop running in every page (its chunk, statustracker-*.js), and the studio's page prelude
(studio.page_prelude, assets/tracker_pacing.js) gives that chunk at most 10 frames a second.

A script of the test's own, run before any of the page's, counts the frames asked of the browser: those asked straight
from the tracker's chunk (none may be: the prelude runs first and paces them all) and those the prelude passes on
(the leaked loop's, paced). If Gradio stops leaking the loop, the idle page asks none and this test says so.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from e2e_harness import VIEWPORT, Studio, wait_for_form, wait_until

from tests.helpers.servers import free_port

pytestmark = pytest.mark.e2e

FRAME_COUNTER = r"""(() => {
  window.tsFrames = { tracker: 0, paced: 0 };
  const frame = window.requestAnimationFrame.bind(window);
  window.requestAnimationFrame = (callback) => {
    const stack = new Error().stack || "";
    if (/\/statustracker-[\w-]*\.js/.test(stack)) window.tsFrames.tracker++;
    if (stack.includes("studio-tracker-pacing.js")) window.tsFrames.paced++;
    return frame(callback);
  };
})();"""
WINDOW_MS = 2000
# The paced frames of one window of the page's own clock (a busy machine only delays the timers: fewer, never more).
PACED_IN_WINDOW = f"""async () => {{
  const before = window.tsFrames.paced;
  await new Promise((resolve) => setTimeout(resolve, {WINDOW_MS}));
  return window.tsFrames.paced - before;
}}"""
MOST_IN_WINDOW = WINDOW_MS // 100 + 1  # one frame every 100 ms


@pytest.fixture(scope="module")
def studio(workspace: Path) -> Iterator[Studio]:
    """A studio without its warm training process: nothing here trains."""
    server = Studio(workspace, free_port(), extra_args=("--no-standby",))
    server.start()
    yield server
    server.kill()


def test_gradios_status_tracker_gets_ten_frames_a_second_on_an_idle_page(studio, browser):
    page = browser.new_page(viewport=VIEWPORT)
    page.add_init_script(FRAME_COUNTER)
    page.goto(studio.url)
    wait_for_form(page)
    assert page.evaluate("() => window.tsFrames.tracker") == 0  # none straight from the chunk: the prelude ran first
    # While the page loads, every component's tracker runs its loop (paced too); once idle, the leaked one is left.
    wait_until(
        lambda: 1 <= page.evaluate(PACED_IN_WINDOW) <= MOST_IN_WINDOW,
        60,
        interval=0,
        what="an idle window with the leaked loop's paced frames (none at all: has Gradio stopped leaking it? "
        "then the prelude can go)",
    )
    assert page.evaluate("() => window.tsFrames.tracker") == 0
    page.close()
