"""Export a trained demo run from the Export tab of a real studio and download the zip through Chromium."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
from e2e_harness import EXPORT_TIMEOUT_MS, VIEWPORT, wait_until

from tests.helpers.demo_run import RUN_ID, trained_demo_run

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory, workspace: Path) -> Path:
    return trained_demo_run(tmp_path_factory, workspace)


def test_export_and_download_the_zip(demo_run, studio, browser, artifacts, tmp_path):
    page = browser.new_page(viewport=VIEWPORT, accept_downloads=True)
    page.goto(studio.url)
    page.get_by_role("tab", name="Export").click()
    # Opening the tab offers the finished runs and picks the one the page shows (the newest): the demo run.
    weights = page.locator("#ts-export-weights input")
    wait_until(lambda: weights.input_value() == "final result", 30, what="the run's weights")
    assert RUN_ID in page.locator("#ts-export-run input").input_value()

    page.locator("#ts-export-start").click()
    download_button = page.locator("#ts-export-download")
    download_button.wait_for(state="visible", timeout=EXPORT_TIMEOUT_MS)
    assert "Export finished." in page.locator("#ts-export-progress").inner_text()
    assert f"{RUN_ID}-adapter" in page.locator("#ts-export-result").inner_text()
    page.screenshot(path=str(artifacts / "20-export-done.png"))

    with page.expect_download() as info:
        download_button.click()
    saved = tmp_path / info.value.suggested_filename
    info.value.save_as(saved)
    assert saved.name == f"{RUN_ID}-adapter.zip"
    with zipfile.ZipFile(saved) as archive:
        names = archive.namelist()
        assert f"{RUN_ID}-adapter/adapter_model.safetensors" in names
        assert (
            archive.read(f"{RUN_ID}-adapter/adapter_model.safetensors")
            == (demo_run / "adapter" / "adapter_model.safetensors").read_bytes()
        )
    page.close()
