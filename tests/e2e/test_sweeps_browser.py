"""The Sweeps tab in a real Chromium against a real studio: the Train form (cut to 4 steps) becomes a sweep's base,
a 2-trial sweep starts from the page, its trials table fills with completed trials, the parallel-coordinates and
progress charts draw them, and a trial's row opens its run in the Monitor. A screenshot at 1366x768 goes to
test-artifacts/e2e/."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from e2e_harness import VIEWPORT, wait_for_form, wait_until

from engine.sweeps import driver_running, stop_sweep, sweep_status

pytestmark = pytest.mark.e2e

PLOT_JS = """(id) => {
  const plot = document.querySelector(`#${id} .js-plotly-plot`);
  const points = (t) => (t.type === 'parcoords' ? t.line.color : t.y) || [];
  return plot && plot.data ? plot.data.map((t) => ({type: t.type, n: points(t).length})) : [];
}"""


def set_number(page: Any, selector: str, value: str) -> None:
    """Type into a number box the way a person does, then leave it."""
    box = page.locator(f"{selector} input").first
    box.fill(value)
    box.press("Tab")


def text_now(locator: Any) -> str:
    """The locator's text as the page shows it now ("" while it is not there): a wait's check must not block on
    Playwright's own 30 s wait for the element, which a busy machine can exceed while Gradio draws a tab."""
    return " ".join(locator.all_inner_texts())


def table_states(page: Any) -> list[str]:
    """The state badges of the trials table, top to bottom (the table's hidden sizing row has empty ones)."""
    texts = page.locator("#ts-sweep-table .ts-badge").all_inner_texts()
    return [text.strip().lower() for text in texts if text.strip()]


def test_build_start_and_watch_a_sweep(studio: Any, browser: Any, workspace: Path, artifacts: Path) -> None:
    page = browser.new_page(viewport=VIEWPORT)
    page.goto(studio.url)
    wait_for_form(page)
    # The demo preset cut to 4 steps: each trial logs the objective, eval_loss, once, at its last step.
    set_number(page, "#cfg-train-max_steps", "4")

    page.get_by_role("tab", name="Sweeps").click()
    page.locator("#ts-sweep-use-base").click()  # "Start from": the Train tab's form
    code = page.locator("#ts-sweep-yaml")
    wait_until(lambda: "max_steps: 4" in text_now(code), 20, what="the form as the sweep's base")
    set_number(page, "#ts-sweep-trials", "2")
    wait_until(lambda: "trials: 2" in text_now(code), 20, what="the trials in the YAML")
    wait_until(lambda: "Ready:" in text_now(page.locator("#ts-sweep-check")), 20, what="the YAML checked")
    name = re.search(r"^name: (\S+)$", page.locator("#ts-sweep-yaml .cm-content").inner_text(), re.M).group(1)
    try:
        page.locator("#ts-sweep-start").click()
        message = page.locator("#ts-sweep-start-message")
        try:
            wait_until(lambda: f"Started the sweep {name}" in text_now(message), 30, what="the sweep to start")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; the page says: {text_now(message)!r}") from None
        # A trial at work, or one already done: a 4-step trial may run for only a second or two, between two of
        # the table's refreshes on a busy machine (the wait below still needs the table to show both ends).
        seen = {"queued", "starting", "running", "completed"}
        wait_until(lambda: seen & set(table_states(page)), 120, what="a trial in the table")
        wait_until(lambda: table_states(page) == ["completed", "completed"], 240, what="both trials to complete")
        # The charts are drawn after the table in the same answer: wait for them to hold both trials.
        both = [{"type": "parcoords", "n": 2}]
        wait_until(lambda: page.evaluate(PLOT_JS, "ts-sweep-parallel") == both, 30, what="the parallel chart")
        progress = [{"type": "scatter", "n": 2}, {"type": "scatter", "n": 2}]
        wait_until(lambda: page.evaluate(PLOT_JS, "ts-sweep-progress") == progress, 30, what="the progress chart")
        wait_until(lambda: "completed" in text_now(page.locator("#ts-sweep-status")).lower(), 30)
        assert "Best: trial" in page.locator("#ts-sweep-best").inner_text()
        page.evaluate("window.scrollTo(0, 0)")  # the trials and charts, as the tab opens
        page.screenshot(path=str(artifacts / "30-sweeps-tab.png"))
        page.screenshot(path=str(artifacts / "31-sweeps-tab-full.png"), full_page=True)
    finally:
        if driver_running(workspace, name):  # never leave a driver starting trials after the test
            stop_sweep(workspace, name)
            wait_until(lambda: not driver_running(workspace, name), 120, what="the driver to stop")
    summary = sweep_status(workspace, name)
    assert [trial.state for trial in summary.trials] == ["complete", "complete"]
    best = summary.best
    assert best is not None and best.run_id in page.locator("#ts-sweep-table").inner_text()

    page.locator("#ts-sweep-table [role='gridcell']").first.click()  # the best trial's row
    wait_until(lambda: page.get_by_role("tab", name="Monitor").get_attribute("aria-selected") == "true", 20)
    wait_until(lambda: best.run_id in page.content(), 20, what="the trial's run in the Monitor")
