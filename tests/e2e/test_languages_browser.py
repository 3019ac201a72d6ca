"""The studio in Chinese in a real Chromium whose language is zh-CN: the tabs, the form and Start speak Chinese,
a field refused by the engine is refused in Chinese, a run starts, the Monitor draws it under Chinese titles and
buttons, and Stop stops it. Then the header's menu switches the page to Japanese, and a reload keeps Japanese.
Screenshots at 1366x768 go to test-artifacts/e2e/60-*.png to 62-*.png.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from e2e_harness import VIEWPORT, wait_for_form, wait_until

from engine import runs
from studio.i18n.catalog import text

pytestmark = pytest.mark.e2e

TABS = ("train", "monitor", "runs", "sweeps", "chat", "evaluate", "export")


def words(key: str, lang: str, **values: object) -> str:
    """The catalog's text of ``key`` in ``lang``, checked to be a translation (not the English)."""
    said = text(key, lang, **values)
    assert said != text(key, "en", **values), f"{key} is not translated into {lang}"
    return said


TABS_ZH = tuple(words(f"tab.{name}", "zh-CN") for name in TABS)
TABS_JA = tuple(words(f"tab.{name}", "ja") for name in TABS)
CHART_TITLE_JS = """(name) => {
  const plot = document.querySelector(`[data-live-chart="${name}"]`);
  return plot && plot.layout && plot.layout.title ? plot.layout.title.text : "";
}"""
TRACE_NAMES_JS = """() => {
  const plot = document.querySelector('[data-live-chart="loss"]');
  return plot && plot.data ? plot.data.map((trace) => trace.name) : [];
}"""


def text_of(page: Any, selector: str) -> str:
    found = page.locator(selector).first
    return found.inner_text().strip() if found.count() else ""


def set_number(page: Any, path: str, value: str) -> None:
    box = page.locator(f"#cfg-{path.replace('.', '-')} input").first
    box.fill(value)
    box.press("Tab")


TOP_TABS_JS = """() => [...document.querySelectorAll('#ts-tabs [role=tab]')]
  .filter((tab) => tab.closest('.tabs') === document.getElementById('ts-tabs'))
  .map((tab) => tab.innerText.trim())"""


def tab_names(page: Any) -> list[str]:
    """The studio's own tabs (not the tabs inside them, such as the Train tab's YAML / Command line)."""
    return page.evaluate(TOP_TABS_JS)


def test_start_watch_and_stop_a_run_in_chinese(studio: Any, browser: Any, workspace: Path, artifacts: Path) -> None:
    context = browser.new_context(locale="zh-CN", viewport=VIEWPORT)
    page = context.new_page()
    page.goto(studio.url)
    wait_for_form(page)

    # The page follows the browser: tabs, the form's labels and help (from the schema), Start, the header's menu.
    wait_until(lambda: tuple(tab_names(page)) == TABS_ZH, 30, what="the tabs in Chinese")
    assert text_of(page, "#train-start") == words("train.start", "zh-CN")
    field = text_of(page, "#cfg-train-learning_rate")
    assert words("field.train.learning_rate.label", "zh-CN") in field, field
    assert words("field.train.learning_rate.help", "zh-CN").split("。")[0] in field, field
    batch = words("field.train.per_device_batch_size.label", "zh-CN")
    assert batch in text_of(page, "#cfg-train-per_device_batch_size")
    assert page.locator("#ts-language input").input_value() == text("language.name", "zh-CN")
    # The header's right end is composed by the server when the page loads: on a busy machine it comes a little later.
    workspace_zh = words("header.workspace", "zh-CN")
    wait_until(lambda: workspace_zh in text_of(page, ".ts-workspace"), 30, what="the header in Chinese")

    # A value the engine refuses is refused in Chinese, next to the field and beside Start.
    set_number(page, "train.learning_rate", "0")
    page.locator("#train-start").click()
    error = "#cfg-train-learning_rate-error"
    refused = [words("problem.greater_than", "zh-CN", gt=bound) for bound in ("0", "0.0")]
    wait_until(lambda: any(r in text_of(page, error) for r in refused), 30, what="the field's error in Chinese")
    not_started = words("start.fix_fields", "zh-CN")
    wait_until(lambda: text_of(page, "#train-start-message") == not_started, 20, what="Start's refusal in Chinese")
    assert not runs.run_dirs(workspace)
    set_number(page, "train.learning_rate", "0.003")
    set_number(page, "train.max_steps", "400")  # long enough to watch it and stop it
    wait_until(lambda: not page.locator(error).is_visible(), 20, what="the error to go")
    page.screenshot(path=str(artifacts / "60-zh-CN-train.png"))

    # Start: the Monitor comes to the front and draws the run under Chinese titles and buttons.
    page.locator("#train-start").click()
    monitor_tab = page.get_by_role("tab", name=TABS_ZH[1])
    wait_until(lambda: monitor_tab.get_attribute("aria-selected") == "true", 60, what="the Monitor")
    wait_until(lambda: runs.run_dirs(workspace), 10, what="the run directory")
    [run_dir] = runs.run_dirs(workspace)
    running = words("state.running", "zh-CN")
    wait_until(lambda: text_of(page, ".ts-monitor-head .ts-badge") == running, 120, what="the running badge")
    loss = words("chart.loss", "zh-CN")
    wait_until(lambda: page.evaluate(CHART_TITLE_JS, "loss") == loss, 60, what="the loss chart's title")
    for chart in ("learning_rate", "grad_norm", "throughput"):
        assert page.evaluate(CHART_TITLE_JS, chart) == words(f"chart.{chart}", "zh-CN"), chart
    train_loss = words("chart.train_loss", "zh-CN")
    wait_until(lambda: train_loss in page.evaluate(TRACE_NAMES_JS), 120, what="the first loss points")
    progress = text_of(page, "[data-live-panel=progress]")
    elapsed = words("progress.elapsed", "zh-CN", time="").strip()
    assert words("progress.step", "zh-CN", step="").split()[0] in progress and elapsed in progress, progress
    buttons = {name: text_of(page, f"#ts-{name}") for name in ("save", "pause", "stop", "resume", "abort")}
    assert buttons == {name: text(f"monitor.{name}", "zh-CN") for name in buttons}
    assert buttons["save"] != text("monitor.save", "en")
    assert words("monitor.smoothing", "zh-CN") in text_of(page, "#ts-smoothing")
    assert words("monitor.log_scale", "zh-CN") in text_of(page, "#ts-log-y")

    page.locator("#ts-stop").click()
    stopped = words("state.stopped", "zh-CN")
    wait_until(lambda: text_of(page, ".ts-monitor-head .ts-badge") == stopped, 180, what="the stopped badge")
    assert runs.status(run_dir).state == "stopped"
    page.screenshot(path=str(artifacts / "61-zh-CN-monitor.png"))

    # The header's menu switches the page at once; the choice outlives a reload.
    page.locator("#ts-language input").click()
    page.get_by_role("option", name=text("language.name", "ja")).click()
    wait_until(lambda: tuple(tab_names(page)) == TABS_JA, 30, what="the tabs in Japanese")
    workspace_ja = words("header.workspace", "ja")
    wait_until(lambda: workspace_ja in text_of(page, ".ts-workspace"), 20, what="the header in Japanese")
    stopped_ja = words("state.stopped", "ja")
    wait_until(lambda: text_of(page, ".ts-monitor-head .ts-badge") == stopped_ja, 20, what="the badge in Japanese")
    page.reload()
    wait_for_form(page, "attached")
    wait_until(lambda: tuple(tab_names(page)) == TABS_JA, 30, what="Japanese after a reload")
    assert page.locator("#ts-language input").input_value() == text("language.name", "ja")
    page.get_by_role("tab", name=TABS_JA[0]).click()
    start_ja = words("train.start", "ja")
    wait_until(lambda: text_of(page, "#train-start") == start_ja, 20, what="Start in Japanese")
    page.screenshot(path=str(artifacts / "62-ja-train-after-reload.png"))
    context.close()
