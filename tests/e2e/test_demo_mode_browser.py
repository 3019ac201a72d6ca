"""Demo mode in a real Chromium with two visitors (two browser contexts, so two localStorages): both press
Start, the second waits in line and sees its place, each Runs tab lists only its own run, the second run
starts once the first has ended, a refresh keeps the visitor, and the hub push is not offered. Then each
visitor's trained model and export stay theirs: Bob can neither see nor use the model Alice loaded in Chat,
and his export's zip downloads through Gradio's cache while exports/ answers no one by URL.
Screenshots at 1366x768 go to test-artifacts/e2e/."""

from __future__ import annotations

import shutil
import urllib.error
import urllib.request
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from e2e_harness import EXPORT_TIMEOUT_MS, VIEWPORT, Studio, wait_for_form, wait_until

from engine import runs
from studio.demo.policy import DemoPolicy
from tests.helpers.run_progress import wait_for_state
from tests.helpers.servers import free_port

pytestmark = pytest.mark.e2e
# Alice's run waits (Pause) at its first step while Bob queues behind it, so it need be no longer than that.
ALICE_STEPS = 20


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
    box = field(page, path)
    box.fill(value)
    box.press("Tab")


def field(page: Any, path: str) -> Any:
    """The box of a form field."""
    return page.locator(f"#cfg-{path.replace('.', '-')} input, #cfg-{path.replace('.', '-')} textarea").first


def open_visitor(browser: Any, url: str, name: str, steps: int) -> Any:
    """A new visitor (a browser context of its own) with the form filled in, ready to press Start."""
    page = browser.new_context(viewport=VIEWPORT).new_page()
    page.goto(url)
    wait_for_form(page)
    fill(page, "name", name)
    fill(page, "train.max_steps", str(steps))
    return page


def progress(page: Any) -> str:
    return page.locator(".ts-monitor-head .ts-progress").inner_text()


def runs_table(page: Any) -> str:
    """The Runs table's text, the tab shown first (clicked only when it is not: polled in a loop, a click on the
    selected tab while the page re-renders can wait for a stable element until its own timeout on a busy machine)."""
    tab = page.get_by_role("tab", name="Runs")
    if tab.get_attribute("aria-selected") != "true":
        tab.click()
    return page.locator("#ts-runs-table").inner_text()


def http_status(url: str) -> int:
    """The HTTP status of a plain GET (no browser, no visitor)."""
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def chat_is_each_visitors_own(alice: Any, bob: Any, artifacts: Path) -> None:
    """Alice loads her run's model in Chat; Bob sees no trace of it (nothing of his is loaded, his message asks him
    to load a model, his Unload finds nothing), loads the base model in a worker of his own, and Alice's model
    still answers her."""
    alice.get_by_role("tab", name="Chat").click()
    alice.locator("#ts-chat-model input").click()
    alice.get_by_role("option", name="alice-run · final adapter").first.click()
    alice.locator("#ts-chat-load").click()
    status = alice.locator("#ts-chat-status")
    wait_until(lambda: "Loaded:" in status.inner_text(), 120, what="Alice's model to load")
    assert "alice-run" in status.inner_text()

    bob.get_by_role("tab", name="Chat").click()
    bob_status = bob.locator("#ts-chat-status")
    wait_until(lambda: "No model loaded." in bob_status.inner_text(), 20, what="Bob's status")
    assert "alice-run" not in bob_status.inner_text() and "another visitor" not in bob_status.inner_text()
    send(bob, "Write 2024-03-15 out in full.")
    note = bob.locator("#ts-chat-note")
    wait_until(lambda: "Load a model first" in note.inner_text(), 20, what="Bob's message refused")
    assert bob.locator('#ts-chatbot [data-testid="bot"]').count() == 0
    # Every text Bob's status line takes from here on: the tab's own refresh on opening (its lane shared by every
    # visitor, show_progress hidden) can land after the answer to Unload on a busy machine and write the status
    # again, and a poll of the line alone could miss the answer in between.
    bob.evaluate(STATUS_TEXTS_JS)
    bob.locator("#ts-chat-unload").click()
    nothing = "No model is loaded."
    wait_until(lambda: any(nothing in shown for shown in status_texts(bob)), 20, what=nothing)
    assert "Base · assets/demo-model" in bob.locator("#ts-chat-model input").input_value()
    bob.locator("#ts-chat-load").click()
    wait_until(lambda: "Loaded:" in bob_status.inner_text(), 120, what="Bob's base model to load")
    bob.screenshot(path=str(artifacts / "45-demo-chat-a-worker-each.png"))

    send(alice, "Write 2024-03-15 out in full.")  # Bob's Load left Alice's model alone: it answers her
    reply = alice.locator('#ts-chatbot [data-testid="bot"]')
    wait_until(lambda: reply.count() == 1 and reply.inner_text().strip(), 60, what="Alice's reply")
    assert "alice-run" in status.inner_text()
    for page in (alice, bob):  # every text the status takes: a late refresh may write the line again (see above)
        page.evaluate(STATUS_TEXTS_JS)
        page.locator("#ts-chat-unload").click()
        wait_until(lambda page=page: any("Unloaded" in shown for shown in status_texts(page)), 30, what="an unload")


def status_texts(page: Any) -> list[str]:
    """Every text the Chat tab's status line has shown since STATUS_TEXTS_JS ran on ``page``."""
    return page.evaluate("() => window.tsStatusTexts")


def send(page: Any, message: str) -> None:
    """Type ``message`` in the Chat tab's box and send it."""
    box = page.locator("#ts-chat-input textarea")
    box.fill(message)
    box.press("Enter")


STATUS_TEXTS_JS = """() => {
  const line = document.querySelector('#ts-chat-status');
  window.tsStatusTexts = [line.innerText];
  new MutationObserver(() => window.tsStatusTexts.push(line.innerText))
    .observe(line, {subtree: true, childList: true, characterData: true});
}"""


def export_reaches_its_visitor_only(bob: Any, url: str, workspace: Path, run_dir: Path, saved_in: Path) -> None:
    """Bob exports his run and downloads the zip from Gradio's cache; exports/ answers a URL with 403."""
    bob.get_by_role("tab", name="Export").click()
    wait_until(lambda: bob.locator("#ts-export-weights input").input_value() == "final result", 30, what="weights")
    bob.locator("#ts-export-start").click()
    button = bob.locator("#ts-export-download")
    button.wait_for(state="visible", timeout=EXPORT_TIMEOUT_MS)
    with bob.expect_download() as info:
        button.click()
    name = f"{run_dir.name}-adapter.zip"
    assert info.value.suggested_filename == name and "/exports/" not in info.value.url, info.value.url
    info.value.save_as(saved_in / name)
    with zipfile.ZipFile(saved_in / name) as archive:
        assert f"{run_dir.name}-adapter/adapter_model.safetensors" in archive.namelist()
    [exported] = (workspace / "exports").glob(f"visitors/*/{name}")  # Bob's own folder (studio.demo.jobs)
    assert http_status(f"{url}gradio_api/file={exported}") == 403  # its name is easy to guess: no one may fetch it


def test_two_visitors_take_turns(
    demo_studio: Studio, browser: Any, demo_workspace: Path, artifacts: Path, tmp_path: Path
) -> None:
    alice = open_visitor(browser, demo_studio.url, "alice-run", ALICE_STEPS)
    alice.screenshot(path=str(artifacts / "39-demo-train-tab.png"))
    # Fixed fields are shown but cannot be changed; the model is a pick among the bundled ones (no other can be
    # typed in); a capped one says its limit next to the field.
    assert alice.locator("#cfg-model-name_or_path input").is_enabled()
    alice.locator("#cfg-model-name_or_path input").click()
    options = alice.locator("ul[role='listbox'] li")
    wait_until(lambda: options.count() == 2, 20, what="the model picker's choices")
    shown = [options.nth(i).inner_text().replace("✓", "").strip() for i in range(2)]  # ✓ marks the picked one
    assert shown == ["assets/demo-model", "assets/demo-vlm"]
    alice.keyboard.press("Escape")
    assert alice.locator("#cfg-data-path input, #cfg-data-path textarea").first.is_disabled()
    fill(alice, "train.max_steps", "5000")
    error = alice.locator("#cfg-train-max_steps-error")
    cap = f"at most {DemoPolicy(enabled=True).max_steps} steps"
    try:  # count() first: inner_text() would wait for the element past wait_until's own deadline
        wait_until(lambda: error.count() and cap in error.inner_text(), 20, what="the step cap next to the field")
    except AssertionError as missed:
        raise AssertionError(f"{missed}; the field holds {field(alice, 'train.max_steps').input_value()}") from None
    alice.screenshot(path=str(artifacts / "40-demo-train-step-cap.png"))
    fill(alice, "train.max_steps", str(ALICE_STEPS))
    wait_until(lambda: not error.is_visible(), 20, what="the error to clear")
    bob = open_visitor(browser, demo_studio.url, "bob-run", 2)

    alice.locator("#train-start").click()
    [alice_run] = wait_until(lambda: runs.run_dirs(demo_workspace), 30, what="Alice's run")
    bob.locator("#train-start").click()
    # Alice's run waits at its first step until Bob has seen his place, however fast it would train its 20 steps
    # (paused once it reads "running", written as training begins: the step in the status comes later).
    wait_for_state(alice_run, "running", timeout=300)
    assert runs.pause(alice_run)
    wait_for_state(alice_run, "paused")
    wait_until(lambda: "run ahead of yours" in progress(bob), 30, what="Bob's place in line")
    assert "1 run ahead of yours" in progress(bob)
    assert bob.locator("#ts-stop").inner_text() == "Cancel"
    bob.screenshot(path=str(artifacts / "41-demo-queued-monitor.png"))
    assert runs.resume_paused(alice_run)

    # Each visitor's Runs tab lists their own run only.
    wait_until(lambda: "alice-run" in runs_table(alice), 60, what="Alice's run in her list")
    assert "bob-run" not in runs_table(alice)
    wait_until(lambda: "bob-run" in runs_table(bob), 60, what="Bob's run in his list")
    assert "alice-run" not in runs_table(bob)
    bob.screenshot(path=str(artifacts / "42-demo-runs-own-only.png"))

    # Bob's run starts by itself once Alice's has ended, and completes.
    first, second = sorted(runs.run_dirs(demo_workspace), key=lambda d: runs.status(d).created_at)
    done = runs.wait(second, timeout=300)
    assert done.state == "completed" and done.step == 2, done
    alice_done = runs.status(first)
    assert alice_done.state == "completed" and done.launched_at >= alice_done.ended_at

    # A refresh keeps the visitor (the id lives in the browser): Bob still sees his run on the Monitor.
    bob.reload()
    wait_for_form(bob)
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

    chat_is_each_visitors_own(alice, bob, artifacts)
    export_reaches_its_visitor_only(bob, demo_studio.url, demo_workspace, second, tmp_path)
    alice.context.close()
    bob.context.close()
