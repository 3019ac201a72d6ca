"""Vision-language data in the Train tab of a real Chromium: the vision section appears when the model field names
a vision-language model and goes again for a text model; LLaMA-Factory's mllm_demo.json, typed in as the dataset,
is previewed with each row's images drawn as thumbnails beside its turns. Screenshots at 1366x768 go to
test-artifacts/e2e/."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from e2e_harness import VIEWPORT, Studio, wait_for_form, wait_until

from tests.helpers.servers import free_port

pytestmark = pytest.mark.e2e
MLLM_DEMO = Path("/work/shared/datasets/mllm_demo.json")  # LLaMA-Factory's demo set: 6 rows, 3 JPEGs

THUMBNAILS_JS = """() => Array.from(document.querySelectorAll('.ts-image-row')).map((card) => {
  const turns = card.querySelector('.ts-turns').getBoundingClientRect();
  return {
    row: Number(card.dataset.row),
    markers: card.querySelectorAll('.ts-image-marker').length,
    images: Array.from(card.querySelectorAll('img.ts-thumb')).map((img) => {
      const box = img.getBoundingClientRect();
      return {
        loaded: img.complete && img.naturalWidth > 0,
        width: img.naturalWidth, height: img.naturalHeight, alt: img.alt,
        beside: box.right <= turns.left && box.top < turns.bottom && box.bottom > turns.top,
      };
    }),
  };
})"""


@pytest.fixture(scope="module")
def vision_studio(workspace: Path, artifacts: Path) -> Iterator[Studio]:
    if not MLLM_DEMO.is_file():
        pytest.skip(f"{MLLM_DEMO} is not on this machine")
    server = Studio(workspace, free_port(), extra_args=("--allow-path", str(MLLM_DEMO.parent), "--no-standby"))
    server.start()
    yield server
    server.kill()


def fill(page: Any, path: str, value: str, key: str = "Enter") -> None:
    """Type into a form field as a person does, then press ``key`` (Enter submits a text field)."""
    box = page.locator(f"#cfg-{path.replace('.', '-')} input, #cfg-{path.replace('.', '-')} textarea").first
    box.fill(value)
    box.press(key)


def test_vision_fields_and_thumbnails_of_mllm_demo(vision_studio: Studio, browser: Any, artifacts: Path) -> None:
    page = browser.new_page(viewport=VIEWPORT)
    page.goto(vision_studio.url)
    wait_for_form(page)
    section = page.locator("#ts-modality-vision")
    assert not section.is_visible()  # the preset's text model reads no images

    fill(page, "model.name_or_path", "assets/demo-vlm")
    page.locator("#cfg-model-name_or_path input").blur()
    wait_until(lambda: section.is_visible(), 30, what="the vision section")
    assert page.locator("#cfg-vision-max_pixels input").first.is_visible()
    section.scroll_into_view_if_needed()
    page.screenshot(path=str(artifacts / "27-train-vision-section.png"))

    fill(page, "data.path", str(MLLM_DEMO))
    cards = page.locator(".ts-image-row")
    rows = json.loads(MLLM_DEMO.read_text(encoding="utf-8"))

    def all_drawn() -> list[dict[str, Any]]:
        shown = page.evaluate(THUMBNAILS_JS) if cards.count() else []
        return shown if shown and all(image["loaded"] for card in shown for image in card["images"]) else []

    shown = wait_until(all_drawn, 60, what="the thumbnails to be drawn")
    error = page.locator(".ts-data-error").first.inner_text()
    assert "cannot be used" not in error, error
    assert [card["row"] for card in shown] == [1, 2, 3]
    for card in shown:
        names = [Path(name).name for name in rows[card["row"] - 1]["images"]]
        assert [image["alt"] for image in card["images"]] == names  # exactly the row's images, in order
        assert card["markers"] == len(names)
        for image in card["images"]:
            assert image["loaded"] and max(image["width"], image["height"]) == 96
            assert image["beside"], "a thumbnail is not beside its row's turns"
    cards.first.scroll_into_view_if_needed()
    page.screenshot(path=str(artifacts / "28-train-vision-preview.png"))

    fill(page, "model.name_or_path", "assets/demo-model")
    page.locator("#cfg-model-name_or_path input").blur()
    wait_until(lambda: not section.is_visible(), 30, what="the vision section to hide for a text model")
    page.close()
