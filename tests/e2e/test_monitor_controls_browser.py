"""The Monitor's Save now and Pause / Continue in a real Chromium, against a real studio process and a real run.

Pause a running run, save a checkpoint while it waits, kill the studio with SIGKILL and start it again: the run is
still paused, Continue (the same button) lets it go on in the same process, and Stop ends it. Screenshots at
1366x768 go to test-artifacts/e2e/ (controls-*.png).
"""

from __future__ import annotations

import pytest
from e2e_harness import wait_until
from test_studio_browser import log, open_studio

from engine import runs
from engine.store.rundir import checkpoint_steps, iter_metrics

pytestmark = pytest.mark.e2e

STEPS = 2000  # far more than the test lets it train: it ends with Stop


def offers(page, button: str) -> bool:
    """Whether the Monitor shows ``button`` (Pause and Continue take turns in one place) and it can be clicked."""
    locator = page.locator(f"#ts-{button}")
    return locator.is_visible() and locator.is_enabled()


def test_pause_save_restart_the_studio_continue_and_stop(studio, browser, start_run, artifacts):
    run_dir = start_run("e2e-controls", STEPS)
    page, monitor = open_studio(browser, studio.url)
    monitor.wait_state("running", timeout=90)
    monitor.wait_points(2)
    wait_until(lambda: offers(page, "save") and offers(page, "pause"), 10, what="Save now and Pause")
    assert not page.locator("#ts-continue").is_visible() and not monitor.enabled("resume")

    page.locator("#ts-pause").click()
    monitor.wait_state("paused", timeout=60)
    wait_until(lambda: offers(page, "continue"), 10, what="Continue in Pause's place")
    assert not page.locator("#ts-pause").is_visible()
    paused = runs.status(run_dir)
    assert paused.state == "paused" and paused.paused_at and paused.pid
    assert monitor.enabled("stop") and monitor.enabled("abort") and monitor.enabled("save")
    assert not monitor.enabled("resume")  # Resume starts a new process for an ended run; Continue is the button
    progress = page.locator(".ts-monitor-head .ts-progress")
    wait_until(lambda: "paused since" in progress.inner_text(), 10, what="since when it waits")
    assert "ETA" not in progress.inner_text()
    wait_until(lambda: max(monitor.steps(), default=0) == paused.step, 10, what="the chart up to the paused step")
    monitor.shot(artifacts, "controls-01-paused")
    log("controls-01-paused")

    page.locator("#ts-save").click()
    wait_until(lambda: paused.step in checkpoint_steps(run_dir), 60, what="the checkpoint of the paused step")
    assert runs.status(run_dir).state == "paused" and runs.status(run_dir).step == paused.step  # still waiting
    page.close()

    studio.kill()  # SIGKILL, while the run waits
    studio.start()
    page, monitor = open_studio(browser, studio.url)
    monitor.wait_state("paused", timeout=60)  # an open run brings the Monitor to the front, still paused
    wait_until(lambda: offers(page, "continue"), 10, what="Continue after the restart")
    assert runs.status(run_dir).pid == paused.pid and runs.status(run_dir).step == paused.step
    monitor.shot(artifacts, "controls-02-paused-after-studio-restart")
    log("controls-02-paused-after-studio-restart")

    page.locator("#ts-continue").click()
    monitor.wait_state("running", timeout=60)
    wait_until(lambda: offers(page, "pause"), 10, what="Pause again in Continue's place")
    wait_until(lambda: max(monitor.steps(), default=0) > paused.step, 60, what="new points after Continue")
    monitor.shot(artifacts, "controls-03-continued")
    log("controls-03-continued")

    page.locator("#ts-stop").click()
    monitor.wait_state("stopped", timeout=90)
    stopped = runs.status(run_dir)
    assert stopped.pid == paused.pid  # one process from start to Stop: Continue restarted nothing
    pauses = [event for event in iter_metrics(run_dir) if event["event"] == "pause"]
    assert [event["step"] for event in pauses] == [paused.step] and pauses[0]["seconds"] > 0
    assert paused.step < stopped.step < STEPS and stopped.checkpoints[-1] == stopped.step
    monitor.shot(artifacts, "controls-04-stopped")
    page.close()
