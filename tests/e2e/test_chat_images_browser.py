"""The Chat tab with an image, in a real Chromium against a real studio process: load a trained run of the demo
vision-language model, attach an image beside the message, and get the base and the fine-tuned replies side by
side, each under the user's turn with its image; a text model hides the image box.

The screenshot at 1366x768 goes to test-artifacts/e2e/chat-02-image-side-by-side.png.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from e2e_harness import VIEWPORT, wait_until

from tests.helpers.demo_vlm_run import SHAPES, VLM_RUN_NAME, trained_vlm_run

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A workspace holding a trained run of the demo VLM (the studio started on it lists it)."""
    path = tmp_path_factory.mktemp("e2e-chat-images")
    trained_vlm_run(tmp_path_factory, path)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def pick(page, label: str) -> None:
    """Choose ``label`` in the Chat tab's model picker."""
    page.locator("#ts-chat-model input").click()
    page.get_by_role("option", name=label).click()


def settled(locator) -> Callable[[], bool]:
    """A check: one element, with the same text on two polls in a row (its stream has ended), and not empty."""
    last: dict[str, str | None] = {"text": None}

    def check() -> bool:
        if locator.count() != 1:
            return False
        text = locator.inner_text()
        previous, last["text"] = last["text"], text
        return text == previous and bool(text.strip())

    return check


def test_an_image_goes_with_the_message_to_both_sides(studio, browser, artifacts):
    page = browser.new_page(viewport=VIEWPORT)
    page.goto(studio.url)
    page.get_by_role("tab", name="Chat").click()
    status, image_box = page.locator("#ts-chat-status"), page.locator("#ts-chat-image")
    wait_until(lambda: "No model loaded" in status.inner_text(), 20, what="the empty status")
    assert not image_box.is_visible()  # no model that reads images yet

    pick(page, f"{VLM_RUN_NAME} · final adapter")
    page.locator("#ts-chat-load").click()
    wait_until(lambda: "Loaded:" in status.inner_text(), 120, what="the model to load")
    wait_until(image_box.is_visible, 20, what="the image box")

    image_box.locator('input[type="file"]').set_input_files(str(SHAPES / "eval_0001.png"))
    wait_until(lambda: image_box.locator("img").count() > 0, 20, what="the image in its box")
    page.get_by_text("Side by side", exact=True).click()
    box = page.locator("#ts-chat-input textarea")
    box.fill("Which colour is this shape?")
    box.press("Enter")
    for side in ("#ts-chatbot-base", "#ts-chatbot-tuned"):
        reply = page.locator(f'{side} [data-testid="bot"]')
        wait_until(settled(reply), 90, 0.5, what=f"the reply in {side}")
        user = page.locator(f'{side} [data-testid="user"]')  # the user's turn: its image, then its text
        assert user.locator("img").count() == 1 and "Which colour is this shape?" in " ".join(user.all_inner_texts())
    assert box.input_value() == ""
    wait_until(lambda: image_box.locator("img").count() == 0, 20, what="the image box to empty")
    page.screenshot(path=str(artifacts / "chat-02-image-side-by-side.png"))

    pick(page, "Base · assets/demo-model")  # a text model: no image box
    page.locator("#ts-chat-load").click()
    text_loaded = lambda: "Loaded:" in (shown := status.inner_text()) and "Base · assets/demo-model" in shown  # noqa: E731
    wait_until(text_loaded, 120, what="the text model to load")  # not "starting the chat process for ..."
    wait_until(lambda: not image_box.is_visible(), 20, what="the image box to hide")
    page.locator("#ts-chat-unload").click()
    wait_until(lambda: "Unloaded" in status.inner_text(), 30, what="the unload")
    page.close()
