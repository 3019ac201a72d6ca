"""Demo mode in a real Chromium with two visitors (two browser contexts, so two localStorages): both press
Start, the second waits in line and sees its place, each Runs tab lists only its own run, the second run
starts once the first has ended, a refresh keeps the visitor, and the hub push is not offered.
Screenshots at 1366x768 go to test-artifacts/e2e/."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from e2e_harness import VIEWPORT, Studio, free_port, wait_until

from engine import runs

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def demo_workspace(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    path = tmp_path_factory.mktemp("e2e-demo-workspace")
    yield path
    for run_dir in runs.run_dirs(path):  # never leave a training process behind
        runs.abort(run_dir)
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def demo_studio(demo_workspace: Path, artifacts: Path) -> Iterator[Studio]:
    server = Studio(demo_workspace, free_port(), extra_args=("--demo",))
    server.start()
    yield server
    server.kill()


def fill(page: Any, path: str, value: str) -> None:
    """Type into a form field the way a person does, then leave it (which fires its change event)."""
    box = page.locator(f"#cfg-{path.replace('.', '-')} input, #cfg-{path.replace('.', '-')} textarea").first
    box.fill(value)
    box.press("Tab")


def open_visitor(browser: Any, url: str, name: str, steps: int) -> Any:
    """A new visitor (a browser context of its own) with the form filled in, ready to press Start."""
    page = browser.new_context(viewport=VIEWPORT).new_page()
    page.goto(url)
    page.locator("#train-start").wait_for(state="visible", timeout=30_000)
    fill(page, "name", name)
    fill(page, "train.max_steps", str(steps))
    return page


def progress(page: Any) -> str:
    return page.locator(".ts-monitor-head .ts-progress").inner_text()


def runs_table(page: Any) -> str:
    page.get_by_role("tab", name="Runs").click()
    return page.locator("#ts-runs-table").inner_text()


def test_two_visitors_take_turns(demo_studio: Studio, browser: Any, demo_workspace: Path, artifacts: Path) -> None:
    alice = open_visitor(browser, demo_studio.url, "alice-run", 4)
    alice.screenshot(path=str(artifacts / "39-demo-train-tab.png"))
    # Fixed fields are shown but cannot be changed; a capped one says its limit next to the field.
    assert alice.locator("#cfg-model-name_or_path input").is_disabled()
    assert alice.locator("#cfg-data-path input, #cfg-data-path textarea").first.is_disabled()
    fill(alice, "train.max_steps", "5000")
    error = alice.locator("#cfg-train-max_steps-error")
    wait_until(lambda: "at most 300 steps" in error.inner_text(), 20, what="the step cap next to the field")
    alice.screenshot(path=str(artifacts / "40-demo-train-step-cap.png"))
    fill(alice, "train.max_steps", "4")
    wait_until(lambda: not error.is_visible(), 20, what="the error to clear")
    bob = open_visitor(browser, demo_studio.url, "bob-run", 2)

    alice.locator("#train-start").click()
    wait_until(lambda: runs.run_dirs(demo_workspace), 30, what="Alice's run")
    bob.locator("#train-start").click()
    wait_until(lambda: "run ahead of yours" in progress(bob), 30, what="Bob's place in line")
    assert "1 run ahead of yours" in progress(bob)
    assert bob.locator("#ts-stop").inner_text() == "Cancel"
    bob.screenshot(path=str(artifacts / "41-demo-queued-monitor.png"))

    # Each visitor's Runs tab lists their own run only.
    wait_until(lambda: "alice-run" in runs_table(alice), 20, what="Alice's run in her list")
    assert "bob-run" not in runs_table(alice)
    wait_until(lambda: "bob-run" in runs_table(bob), 20, what="Bob's run in his list")
    assert "alice-run" not in runs_table(bob)
    bob.screenshot(path=str(artifacts / "42-demo-runs-own-only.png"))

    # Bob's run starts by itself once Alice's has ended, and completes.
    first, second = sorted(runs.run_dirs(demo_workspace), key=lambda d: runs.status(d)["created_at"])
    done = runs.wait(second, timeout=300)
    assert done["state"] == "completed" and done["step"] == 2, done
    alice_done = runs.status(first)
    assert alice_done["state"] == "completed" and done["launched_at"] >= alice_done["ended_at"]

    # A refresh keeps the visitor (the id lives in the browser): Bob still sees his run on the Monitor.
    bob.reload()
    bob.locator("#train-start").wait_for(state="visible", timeout=30_000)
    bob.get_by_role("tab", name="Monitor").click()
    wait_until(lambda: "bob-run" in bob.locator(".ts-run-name").inner_text(), 30, what="Bob's run after a refresh")
    wait_until(lambda: "completed" in bob.locator(".ts-monitor-head .ts-badge").inner_text().lower(), 20)
    bob.screenshot(path=str(artifacts / "43-demo-monitor-after-refresh.png"))

    # No hub push and no export name in the demo.
    bob.get_by_role("tab", name="Export").click()
    bob.locator("#ts-export-start").wait_for(state="visible")
    for hidden in ("#ts-export-repo", "#ts-export-token", "#ts-export-name"):
        assert not bob.locator(hidden).is_visible(), hidden
    offered = bob.locator("#ts-export-run input")
    wait_until(lambda: "bob-run" in offered.input_value(), 10, what="Bob's run offered")
    bob.screenshot(path=str(artifacts / "44-demo-export.png"))
    alice.context.close()
    bob.context.close()
