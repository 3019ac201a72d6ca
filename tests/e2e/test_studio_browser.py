"""The studio in a real Chromium, against a real studio process and real training runs of the demo model.

In order (they share one studio and workspace): watch a run live, stop it, resume it to completion; reload
during a run, open it in a second tab, kill the studio mid-run and find the run still training, abort it;
open, compare and delete runs from the Runs tab. Screenshots at 1366x768 go to test-artifacts/e2e/.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from e2e_harness import ARTIFACTS, VIEWPORT, monitor_state, wait_until

from engine import runs
from engine.store.rundir import iter_metrics
from tests.helpers.run_progress import wait_for_state

pytestmark = pytest.mark.e2e

TRAIN_TRACE = "train loss"
MAX_STEPS = 60  # the resumed segment must outlast a few seconds of watching its points arrive
LOSS_POINTS_JS = """(name) => {
  const plot = document.querySelector('#ts-loss-chart .js-plotly-plot');
  const trace = plot && plot.data && plot.data.find((t) => t.name === name);
  return trace ? trace.x.slice() : [];
}"""


LOSS_VIEW_JS = """() => {
  const plot = document.querySelector('#ts-loss-chart .js-plotly-plot');
  return plot && plot.layout ? {names: plot.data.map((t) => t.name), y: plot.layout.yaxis.type,
                                x: plot.layout.xaxis.range.slice()} : null;
}"""


def check_chart_controls(page: Any) -> None:
    """Log scale, smoothing and a zoom, as a person uses them on the loss chart of a finished run."""
    view = lambda: page.evaluate(LOSS_VIEW_JS)  # noqa: E731
    assert "train (raw)" in view()["names"]  # smoothed by default, raw line behind
    page.locator("#ts-log-y input[type=checkbox]").check()
    wait_until(lambda: view()["y"] == "log", 10, what="the log scale")
    box = page.locator("#ts-loss-chart .nsewdrag").first.bounding_box()
    middle = box["y"] + box["height"] / 2
    page.mouse.move(box["x"] + box["width"] * 0.3, middle)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.6, middle, steps=5)
    page.mouse.up()
    zoomed = wait_until(lambda: (x := view()["x"]) and x[1] - x[0] < MAX_STEPS * 0.5 and x, 10, what="the zoom")
    page.locator("#ts-smoothing input[type=range]").fill("0")
    wait_until(lambda: "train (raw)" not in view()["names"], 10, what="the unsmoothed loss")
    assert TRAIN_TRACE in view()["names"]
    assert view()["x"] == zoomed and view()["y"] == "log"  # a redraw keeps the zoom and the scale


class Monitor:
    """Reads the Monitor the way a person does: the badge, the chart, the buttons."""

    def __init__(self, page: Any):
        self.page = page

    def state(self) -> str:
        badge = self.page.locator(".ts-monitor-head .ts-badge")
        return badge.inner_text().strip().lower() if badge.count() else ""

    def steps(self) -> list[int]:
        return self.page.evaluate(LOSS_POINTS_JS, TRAIN_TRACE)

    def wait_state(self, *states: str, timeout: float = 90) -> str:
        try:
            return wait_until(lambda: self.state() in states and self.state(), timeout, 0.2, f"state in {states}")
        except AssertionError as exc:  # say what the page shows instead (a loaded machine's failures are rare)
            shown = (
                self.page.locator(".ts-monitor-head").inner_text()
                if self.page.locator(".ts-monitor-head").count()
                else ""
            )
            raise AssertionError(f"{exc}; the badge says {self.state()!r}; the head: {shown!r}") from None

    def wait_points(self, at_least: int, timeout: float = 90) -> list[int]:
        return wait_until(lambda: len(self.steps()) >= at_least and self.steps(), timeout, 0.2, f"{at_least} points")

    def enabled(self, button: str) -> bool:
        return self.page.locator(f"#ts-{button}").is_enabled()

    def shot(self, artifacts: Path, name: str) -> None:
        self.page.screenshot(path=str(artifacts / f"{name}.png"))


T0 = time.time()


def log(message: str) -> None:
    """A time-stamped line (shown with pytest -s): where the seconds of a slow run went."""
    print(f"[{time.time() - T0:6.1f}s] {message}", flush=True)


def open_studio(browser: Any, url: str) -> tuple[Any, Monitor]:
    page = browser.new_page(viewport=VIEWPORT)
    page.goto(url)
    return page, Monitor(page)


def point_latencies(monitor: Monitor, run_dir: Path, seconds: float) -> list[float]:
    """For each step that appears on the chart, the time from the trainer writing it to the page showing it."""
    already = set(monitor.steps())  # on the chart before measuring began: not seen arriving
    seen: dict[int, float] = {}
    deadline = time.time() + seconds
    while time.time() < deadline:
        now = time.time()
        for step in monitor.steps():
            if step not in already:
                seen.setdefault(step, now)
        time.sleep(0.05)
    written = {e["step"]: e["time"] for e in iter_metrics(run_dir) if e.get("event") == "train"}
    return [seen[step] - written[step] for step in sorted(seen) if step in written]


def test_watch_stop_resume_complete(studio, browser, start_run, artifacts):
    # Bigger batches make slower steps, so Stop lands mid-run however fast the machine. A warm start trains before
    # a browser has opened the page: the run waits at its first step (Pause) until the page is up, which then
    # watches it from there as it would from the start.
    run_dir = start_run("e2e-live", MAX_STEPS, batch_size=8)
    wait_for_state(run_dir, "running")  # written as training begins; the step in the status comes later
    assert runs.pause(run_dir)
    page, monitor = open_studio(browser, studio.url)
    # An active run brings the Monitor to the front on page load.
    monitor.wait_state("paused", timeout=60)
    assert page.get_by_role("tab", name="Monitor").get_attribute("aria-selected") == "true"
    assert runs.status(run_dir).step < MAX_STEPS // 3  # it waits near its start
    assert runs.resume_paused(run_dir)
    monitor.wait_state("running", timeout=30)
    monitor.wait_points(2)
    assert monitor.enabled("stop") and monitor.enabled("abort") and not monitor.enabled("resume")
    monitor.shot(artifacts, "01-monitor-running")
    log("01-monitor-running")

    page.locator("#ts-stop").click()
    monitor.wait_state("stopped", timeout=90)
    wait_until(lambda: monitor.enabled("resume"), 10, what="Resume to be enabled")
    assert not monitor.enabled("stop") and not monitor.enabled("abort")
    stopped_at = runs.status(run_dir).step
    assert 0 < stopped_at < MAX_STEPS and stopped_at in runs.status(run_dir).checkpoints
    monitor.shot(artifacts, "02-monitor-stopped")
    log("02-monitor-stopped")

    page.locator("#ts-resume").click()
    monitor.wait_state("starting", "running", timeout=30)
    wait_until(lambda: max(monitor.steps(), default=0) > stopped_at, 60, what="points after the resume")
    latencies = point_latencies(monitor, run_dir, 3)
    (artifacts / "latency.json").write_text(json.dumps({"seconds": latencies}))
    # How late the points are is measured by benchmarks/browser_latency.py; a test only asks that they come.
    assert latencies, "no new point appeared while watching"
    monitor.shot(artifacts, "03-monitor-resumed")
    log("03-monitor-resumed")

    monitor.wait_state("completed", timeout=150)
    steps = wait_until(lambda: (s := monitor.steps()) and max(s) == MAX_STEPS and s, 10, what="the last step")
    assert len(steps) == len(set(steps)) == MAX_STEPS  # every step once, none twice across the resume
    assert not (monitor.enabled("stop") or monitor.enabled("resume") or monitor.enabled("abort"))
    assert "100%" in page.locator(".ts-progress").inner_text()
    monitor.shot(artifacts, "04-monitor-completed")
    log("04-monitor-completed")
    check_chart_controls(page)
    page.get_by_text("train.log", exact=True).click()  # the log section: filled while it is open
    log_box = page.locator("[data-live-log]")
    wait_until(lambda: f"train step {MAX_STEPS}/{MAX_STEPS}" in log_box.inner_text(), 10, what="the log")
    monitor.shot(artifacts, "05-monitor-zoomed-log-unsmoothed")
    page.close()


def test_reload_second_tab_and_studio_restart_during_a_run(studio, browser, start_run, artifacts):
    run_dir = start_run("e2e-restart", 2000)
    page, monitor = open_studio(browser, studio.url)
    monitor.wait_state("running", timeout=60)
    before = len(monitor.wait_points(2))

    # A reload during the run finds the run again, charts and controls included.
    page.reload()
    monitor.wait_state("running", timeout=30)
    monitor.wait_points(before)
    assert monitor.enabled("stop") and run_dir.name in page.locator(".ts-run-id").inner_text()
    monitor.shot(artifacts, "05-monitor-after-reload")
    log("05-monitor-after-reload")

    # A second browser tab sees the same run.
    other, other_monitor = open_studio(browser, studio.url)
    other_monitor.wait_state("running", timeout=30)
    assert run_dir.name in other.locator(".ts-run-id").inner_text()
    other.close()
    page.close()

    studio.kill()
    step = runs.status(run_dir).step
    wait_until(lambda: runs.status(run_dir).step > step + 2, 30, what="training to go on without the studio")
    assert runs.status(run_dir).state == "running"

    startup = studio.start()
    page, monitor = open_studio(browser, studio.url)
    monitor.wait_state("running", timeout=30)
    assert run_dir.name in page.locator(".ts-run-id").inner_text()
    first = len(monitor.wait_points(5))
    wait_until(lambda: len(monitor.steps()) > first, 20, what="the chart to keep growing after the restart")
    monitor.shot(artifacts, "06-monitor-after-studio-restart")
    log("06-monitor-after-studio-restart")

    # Abort asks first; the run then dies at once and says so.
    page.locator("#ts-abort").click()
    page.locator("#ts-abort-confirm").wait_for(state="visible")
    monitor.shot(artifacts, "07-monitor-abort-confirm")
    log("07-monitor-abort-confirm")
    page.locator("#ts-abort-confirm").click()
    try:
        monitor.wait_state("aborted", timeout=30)  # killed on request: a state of its own, not a crash
    except AssertionError as exc:  # seen once in a few runs beside a CPU hog: keep what tells the cause apart
        monitor.shot(artifacts, "08-monitor-abort-not-shown")
        shown = page.locator("#ts-abort-confirm").is_visible()
        raise AssertionError(f"{exc}; run state {runs.status(run_dir).state}, confirm still shown: {shown}") from None
    wait_until(lambda: "aborted by the user" in page.locator(".ts-monitor-head .ts-progress").inner_text(), 30)
    assert page.locator(".ts-error").count() == 0 or not page.locator(".ts-error").is_visible()
    monitor.shot(artifacts, "08-monitor-aborted")
    log("08-monitor-aborted")
    page.close()
    print(f"studio restart took {startup:.1f}s")


# Every animation frame: is the header already another run's while the loss chart still shows the old run's steps?
WATCH_STALE_CHARTS_JS = """([oldName, oldSteps]) => {
  window.tsStaleFrames = 0;
  const same = (a, b) => a.length === b.length && a.every((v, i) => v === b[i]);
  const look = () => {
    const name = document.querySelector('.ts-run-name')?.innerText || '';
    const plot = document.querySelector('#ts-loss-chart .js-plotly-plot');
    const trace = plot && plot.data && plot.data.find((t) => t.name === 'train loss');
    if (name && !name.includes(oldName) && trace && same(trace.x, oldSteps)) window.tsStaleFrames += 1;
    requestAnimationFrame(look);
  };
  requestAnimationFrame(look);
}"""


def check_the_old_charts_go_at_once(page: Any, monitor: Monitor, table: Any, workspace: Path, old: list[int]) -> None:
    """Open another run while a finished one is on the Monitor: no frame shows the new run's header over the old
    run's curve (the page script empties the charts as soon as the run changes)."""
    other = next(path for path in (workspace / "runs").iterdir() if "e2e-restart" in path.name)
    other_steps = sorted({e["step"] for e in iter_metrics(other) if e.get("event") == "train"})
    assert other_steps and other_steps != old  # else the check below could not tell the two runs apart
    page.evaluate(WATCH_STALE_CHARTS_JS, ["e2e-live", old])
    page.get_by_role("tab", name="Runs").click()
    table.get_by_role("gridcell").filter(has_text="e2e-restart").first.click()
    wait_until(lambda: "e2e-restart" in page.locator(".ts-run-name").inner_text(), 20, what="the other run's header")
    try:
        wait_until(lambda: monitor.steps() == other_steps, 20, what="the other run's curve")
    except AssertionError as missed:  # seen once beside two CPU hogs: say what the page showed instead
        monitor.shot(ARTIFACTS, "fail-other-run-curve")
        shown = monitor_state(page)
        raise AssertionError(f"{missed}; the page: {shown}; wanted {summary(other_steps)}") from None
    assert page.evaluate("() => window.tsStaleFrames") == 0


def summary(steps: list[int]) -> str:
    return f"{len(steps)} points, {steps[0]}..{steps[-1]}" if steps else "no points"


def test_runs_tab_open_compare_delete(studio, browser, workspace, artifacts):
    page, monitor = open_studio(browser, studio.url)
    page.get_by_role("tab", name="Runs").click()
    table = page.locator("#ts-runs-table")
    wait_until(lambda: "e2e-live" in table.inner_text() and "e2e-restart" in table.inner_text(), 30, what="the list")
    monitor.shot(artifacts, "09-runs-list")
    log("09-runs-list")

    # Clicking a row opens that run in the Monitor.
    table.get_by_role("gridcell").filter(has_text="e2e-live").first.click()
    wait_until(lambda: page.get_by_role("tab", name="Monitor").get_attribute("aria-selected") == "true", 10)
    monitor.wait_state("completed", timeout=20)
    assert "e2e-live" in page.locator(".ts-run-name").inner_text()
    live_steps = monitor.wait_points(MAX_STEPS, timeout=20)
    check_the_old_charts_go_at_once(page, monitor, table, workspace, live_steps)

    page.get_by_role("tab", name="Runs").click()
    picker = page.locator("#ts-runs-selected input")
    for name in ("e2e-live", "e2e-restart"):
        picker.click()
        page.get_by_role("option", name=name).first.click()
        # Under load the picker redraws between picks: compare only once it holds both runs.
        wait_until(lambda n=name: n in page.locator("#ts-runs-selected").inner_text(), 20, what=f"{name} picked")
    page.locator("#ts-compare").click()
    names = """() => (document.querySelector('#ts-compare-chart .js-plotly-plot')?.data || []).map((t) => t.name)"""
    wait_until(lambda: sorted(page.evaluate(names)) == ["e2e-live", "e2e-restart"], 20, what="two compared curves")
    wait_until(lambda: "train.max_steps" in page.locator("#ts-diff").inner_text(), 10, what="the config diff")
    monitor.shot(artifacts, "10-runs-compare")
    log("10-runs-compare")

    page.locator("#ts-delete").click()
    page.locator("#ts-delete-confirm").wait_for(state="visible")
    page.locator("#ts-delete-confirm").click()
    wait_until(lambda: "Deleted 2 runs" in page.locator(".ts-message").inner_text(), 20, what="the deletion")
    wait_until(lambda: "e2e-live" not in table.inner_text(), 20, what="the list to drop the runs")
    assert not list((workspace / "runs").iterdir())
    page.close()
