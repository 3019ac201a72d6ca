"""The Train tab in a real Chromium: a bad field is refused next to it, a double click on Start starts one
run, and the page switches to that run's Monitor. Screenshots at 1366x768 go to test-artifacts/e2e/."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from e2e_harness import VIEWPORT, wait_for_form, wait_until

from engine import runs
from engine.store.rundir import iter_metrics

pytestmark = pytest.mark.e2e


def set_number(page: Any, path: str, value: str) -> None:
    """Type into a form field the way a person does, then leave it (which fires its change event)."""
    box = page.locator(f"#cfg-{path.replace('.', '-')} input").first
    box.fill(value)
    box.press("Tab")


def field_error(page: Any, path: str) -> str:
    slot = page.locator(f"#cfg-{path.replace('.', '-')}-error")
    return slot.inner_text() if slot.count() and slot.is_visible() else ""


def test_start_from_the_form(studio: Any, browser: Any, workspace: Path, artifacts: Path) -> None:
    page = browser.new_page(viewport=VIEWPORT)
    page.goto(studio.url)
    wait_for_form(page)
    # The form opens on the demo preset, so Start trains something at once.
    assert page.locator("#cfg-model-name_or_path input").input_value() == "assets/demo-model"
    page.screenshot(path=str(artifacts / "20-train-tab.png"))

    set_number(page, "train.learning_rate", "0")
    page.locator("#train-start").click()
    wait_until(lambda: "must be > 0" in field_error(page, "train.learning_rate"), 20, what="the field's error")
    message = page.locator("#train-start-message")
    wait_until(lambda: "Not started" in message.inner_text(), 20, what="Start to refuse")
    assert not runs.run_dirs(workspace), "a run started from an invalid form"
    page.screenshot(path=str(artifacts / "21-train-tab-field-error.png"))

    set_number(page, "train.learning_rate", "0.003")
    set_number(page, "train.max_steps", "8")
    page.locator("#train-start").dblclick()
    wait_until(lambda: page.get_by_role("tab", name="Monitor").get_attribute("aria-selected") == "true", 30)
    wait_until(lambda: runs.run_dirs(workspace), 10, what="the run directory")
    started = runs.run_dirs(workspace)
    assert len(started) == 1, f"a double click started {len(started)} runs"
    run_dir = started[0]
    assert runs.status(run_dir).state in {"starting", "running", "completed"}
    final = runs.wait(run_dir, timeout=240)
    assert final.state == "completed", final
    assert final.step == 8
    # The run trained what the form said: its config holds the typed values.
    config_text = (run_dir / "config.yaml").read_text()
    assert "max_steps: 8" in config_text and "learning_rate: 0.003" in config_text
    page.screenshot(path=str(artifacts / "22-train-started-monitor.png"))
    page.close()


METHOD_POINTS_JS = """(key) => {
  const plot = document.querySelector(`[data-live-chart="${key}"]`);  // the page script draws into it
  return plot && plot.data ? plot.data.reduce((n, trace) => n + (trace.x || []).length, 0) : 0;
}"""


def test_a_dpo_run_from_the_preset(studio: Any, browser: Any, workspace: Path, artifacts: Path) -> None:
    """Load the DPO preset: the Method section shows DPO's knobs, the dataset preview puts each pair's answers
    side by side, and the started run draws DPO's own charts on the Monitor."""
    page = browser.new_page(viewport=VIEWPORT)
    page.goto(studio.url)
    wait_for_form(page)
    page.locator("#train-config-choice input").click()
    page.get_by_role("option", name="preset: demo-dpo").first.click()
    wait_until(lambda: page.locator("#ts-method-dpo").is_visible(), 30, what="the DPO section")
    assert not page.locator("#ts-method-sft").is_visible()
    chosen = page.locator('.ts-answer[data-side="chosen"]').first
    wait_until(lambda: chosen.count() and chosen.is_visible(), 60, what="the side-by-side preview")
    assert page.locator('.ts-answer[data-side="rejected"]').first.is_visible()
    page.screenshot(path=str(artifacts / "23-train-dpo-preset.png"))

    set_number(page, "train.max_steps", "10")  # two logged steps at the preset's logging_steps of 5
    before = set(runs.run_dirs(workspace))
    page.locator("#train-start").click()
    wait_until(lambda: set(runs.run_dirs(workspace)) - before, 30, what="the DPO run directory")
    [run_dir] = set(runs.run_dirs(workspace)) - before
    assert "method: dpo" in (run_dir / "config.yaml").read_text()
    wait_until(lambda: page.get_by_role("tab", name="Monitor").get_attribute("aria-selected") == "true", 30)
    final = runs.wait(run_dir, timeout=240)
    assert final.state == "completed" and final.step == 10, final
    for key in ("rewards/margins", "rewards/accuracies"):
        logged = len([event for event in iter_metrics(run_dir) if event.get("event") == "train" and key in event])
        assert logged >= 2  # the preset logs every 5 steps
        # ... and the evaluations' points of the same metric, drawn beside them
        held_out = len(
            [event for event in iter_metrics(run_dir) if event.get("event") == "eval" and f"eval_{key}" in event]
        )
        total = logged + held_out
        wait_until(lambda k=key, n=total: page.evaluate(METHOD_POINTS_JS, k) == n, 30, what=f"the {key} chart")
    page.screenshot(path=str(artifacts / "24-monitor-dpo-charts.png"), full_page=True)
    page.close()


TRACE_POINTS_JS = """(key) => {
  const plot = document.querySelector(`[data-live-chart="${key}"]`);
  return plot && plot.data ? plot.data.map((trace) => (trace.x || []).length) : [];
}"""
SAMPLE_ROWS_JS = "() => document.querySelectorAll('#ts-completions-table .ts-completions tbody tr').length"


def test_a_grpo_run_from_the_preset(studio: Any, browser: Any, workspace: Path, artifacts: Path) -> None:
    """Load the GRPO preset: add a reward with the picker and check the rewards; the started run draws the reward
    chart, and the Monitor's "Sample completions" section lists the answers it sampled with their rewards."""
    page = browser.new_page(viewport=VIEWPORT)
    page.goto(studio.url)
    wait_for_form(page)
    page.locator("#train-config-choice input").click()
    page.get_by_role("option", name="preset: demo-grpo").first.click()
    wait_until(lambda: page.locator("#ts-method-grpo").is_visible(), 30, what="the GRPO section")
    rewards = page.locator("#cfg-grpo-rewards textarea")
    wait_until(lambda: rewards.input_value().count("\n") == 1, 30, what="the preset's two rewards")
    page.locator("#reward-kind-grpo input").click()
    page.get_by_role("option", name="Close to a length in tokens").click()
    page.locator("#reward-add-grpo").click()
    wait_until(lambda: "kind: length" in rewards.input_value(), 20, what="the added reward")
    page.locator("#reward-check-grpo").click()
    result = page.locator("#reward-check-result-grpo")
    wait_until(lambda: "3 rewards load" in result.inner_text(), 60, what="the reward check")
    page.screenshot(path=str(artifacts / "25-train-grpo-rewards.png"))

    set_number(page, "train.max_steps", "10")  # two logged steps at the preset's logging_steps of 5
    # One prompt's group of 8 answers a step instead of the preset's 4: the charts and samples are the same kind.
    set_number(page, "train.per_device_batch_size", "8")
    before = set(runs.run_dirs(workspace))
    page.locator("#train-start").click()
    wait_until(lambda: set(runs.run_dirs(workspace)) - before, 30, what="the GRPO run directory")
    [run_dir] = set(runs.run_dirs(workspace)) - before
    config_text = (run_dir / "config.yaml").read_text()
    assert "method: grpo" in config_text and "per_device_batch_size: 8" in config_text
    wait_until(lambda: page.get_by_role("tab", name="Monitor").get_attribute("aria-selected") == "true", 30)
    final = runs.wait(run_dir, timeout=240)
    assert final.state == "completed" and final.step == 10, final
    logged = len([event for event in iter_metrics(run_dir) if event.get("event") == "train" and "reward" in event])
    assert logged >= 2  # the preset logs every 5 steps
    # The reward chart draws the weighted sum and each of the three reward functions, a point per logged step each.
    wait_until(lambda: page.evaluate(TRACE_POINTS_JS, "reward") == [logged] * 4, 30, what="the reward chart")
    page.locator("#ts-completions").get_by_text("Sample completions").click()
    wait_until(lambda: page.evaluate(SAMPLE_ROWS_JS) > 0, 30, what="the sampled answers")
    header = page.locator("#ts-completions-table thead").inner_text()
    assert "exact_match" in header and "length" in header
    page.screenshot(path=str(artifacts / "26-monitor-grpo-samples.png"), full_page=True)
    page.close()


KEPT_FORM_JS = "() => JSON.parse(localStorage.getItem('ts-train-form') || 'null')"


def kept(page: Any, path: str) -> Any:
    """What the page has stored of the Train form's field ``path`` (None: nothing yet)."""
    stored = page.evaluate(KEPT_FORM_JS)
    return stored.get(path) if stored else None


def test_the_form_comes_back_after_a_reload(studio: Any, browser: Any, artifacts: Path) -> None:
    """The Train form is kept in the browser: kto and 77 steps come back after a reload, not sft and the preset's
    steps; another browser (its own storage) still opens on the preset."""
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    page.goto(studio.url)
    wait_for_form(page)
    method = page.locator("#cfg-method input").first
    preset = method.input_value(), page.locator("#cfg-train-max_steps input").first.input_value()
    assert preset != ("kto", "77")

    set_number(page, "train.max_steps", "77")
    method.click()
    page.get_by_role("option", name="kto", exact=True).first.click()
    wait_until(lambda: (kept(page, "method"), kept(page, "train.max_steps")) == ("kto", 77), 30, what="the store")
    page.reload()
    wait_for_form(page)
    steps = page.locator("#cfg-train-max_steps input").first
    wait_until(lambda: (method.input_value(), steps.input_value()) == ("kto", "77"), 30, what="the kept form")
    page.screenshot(path=str(artifacts / "26-train-form-after-reload.png"))
    # Typing goes on being kept as it is typed: nothing writes the stored form back over the field meanwhile.
    name = page.locator("#cfg-name input:visible, #cfg-name textarea:visible").first  # the Sweeps tab has one too
    typed = "a-long-run-name-typed-one-key-at-a-time"
    name.click()
    name.press("Control+a")
    name.type(typed, delay=40)
    wait_until(lambda: kept(page, "name") == typed, 30, what="the typed name to be stored")
    assert name.input_value() == typed
    context.close()

    other = browser.new_context(viewport=VIEWPORT)
    fresh = other.new_page()
    fresh.goto(studio.url)
    wait_for_form(fresh)
    assert fresh.locator("#cfg-method input").first.input_value() == preset[0]
    other.close()
