"""A real studio process, a real training run and a real Chromium, for the end-to-end tests.

Needs Debian's Chromium (``apt-get install -y chromium``) and ``pip install playwright``; never
``playwright install`` (it downloads browsers). Without them the e2e tests are skipped, not failed.
Screenshots go to ``test-artifacts/e2e/`` (gitignored).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from e2e_harness import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS, PatientBrowser, Studio, demo_config

from engine import runs
from tests.helpers.servers import free_port


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "e2e: drives a real browser against a real studio and training run")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip cleanly (with the reason) where the browser or playwright is missing."""
    reason = None
    if not CHROMIUM.exists():
        reason = f"{CHROMIUM} not found (apt-get install -y chromium)"
    else:
        try:
            import playwright.sync_api  # noqa: F401
        except ImportError:
            reason = "playwright is not installed (pip install playwright; no 'playwright install')"
    if reason:
        for item in items:
            if "e2e" in item.keywords:
                item.add_marker(pytest.mark.skip(reason=reason))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A failed browser test leaves a screenshot of every page it had open (``failed-<test>-<n>.png``) and the
    output of its studios (``failed-<test>-studio.log``): a wait that timed out says what it waited for, the page
    says what was there instead, the studio whether a handler failed."""
    outcome = yield
    report = outcome.get_result()
    used = getattr(item, "funcargs", {})
    if report.when != "call" or not report.failed:
        return
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    logs = [studio.log_path for studio in used.values() if isinstance(studio, Studio) and studio.log_path.is_file()]
    if logs:
        kept = ARTIFACTS / f"failed-{item.name}-studio.log"
        kept.write_bytes(b"".join(log.read_bytes() for log in logs))
        report.sections.append(("studio log", f"kept in {kept}"))
    browser = used.get("browser")
    if browser is None:
        return
    pages = [page for context in browser.contexts for page in context.pages if not page.is_closed()]
    for number, page in enumerate(pages, 1):
        try:
            page.screenshot(path=str(ARTIFACTS / f"failed-{item.name}-{number}.png"), full_page=True, timeout=10_000)
        except Exception as exc:  # noqa: BLE001 - a page that cannot be drawn must not hide the test's own failure
            report.sections.append(("failed-page screenshot", f"page {number}: {exc}"))


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    path = tmp_path_factory.mktemp("e2e-workspace")
    yield path
    for run in runs.list_runs(path):  # never leave a training process behind
        runs.abort(run.run_dir)
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def studio(workspace: Path, artifacts: Path) -> Iterator[Studio]:
    server = Studio(workspace, free_port())
    server.start()
    yield server
    server.kill()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield PatientBrowser(chromium)
        chromium.close()


@pytest.fixture
def start_run(workspace: Path) -> Callable[..., Path]:
    """Create and start a demo run through engine.runs (create_and_start: the studio's scheduler, every second,
    never sees it queued)."""

    def start(name: str, max_steps: int, batch_size: int = 4) -> Path:
        return runs.create_and_start(demo_config(name, max_steps, batch_size), workspace=workspace)

    return start
