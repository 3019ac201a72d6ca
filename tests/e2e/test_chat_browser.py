"""The Chat tab in a real Chromium against a real studio process: load the base model, chat, unload.

The screenshot at 1366x768 goes to test-artifacts/e2e/chat-01-reply.png.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from e2e_harness import VIEWPORT, wait_until

pytestmark = pytest.mark.e2e


def chat_workers_of(pid: int) -> list[int]:
    """Chat worker processes whose parent is ``pid`` (read from /proc)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if not proc.name.isdigit() or b"chat-worker" not in (proc / "cmdline").read_bytes():
                continue
            parent = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue  # the process ended while we looked
        if parent == pid:
            found.append(int(proc.name))
    return found


def test_load_the_base_model_and_chat(studio, browser, artifacts):
    page = browser.new_page(viewport=VIEWPORT)
    page.goto(studio.url)
    page.get_by_role("tab", name="Chat").click()
    status = page.locator("#ts-chat-status")
    wait_until(lambda: "No model loaded" in status.inner_text(), 20, what="the empty status")
    assert "Base · assets/demo-model" in page.locator("#ts-chat-model input").input_value()

    page.locator("#ts-chat-load").click()
    wait_until(lambda: "Loaded:" in status.inner_text(), 120, what="the model to load")
    assert "Base · assets/demo-model" in status.inner_text()
    assert len(chat_workers_of(studio.process.pid)) == 1

    box = page.locator("#ts-chat-input textarea")
    box.fill("Write 2024-03-15 out in full.")
    box.press("Enter")
    user = page.locator('#ts-chatbot [data-testid="user"]')
    reply = page.locator('#ts-chatbot [data-testid="bot"]')
    wait_until(lambda: user.count() == 1 and reply.count() == 1 and reply.inner_text().strip(), 60, what="a reply")
    last = {"text": None}

    def reply_settled() -> bool:  # the same text on two polls in a row: the stream has ended
        text = reply.inner_text()
        previous, last["text"] = last["text"], text
        return text == previous and bool(text.strip())

    wait_until(reply_settled, 60, 0.5, what="the reply to finish")
    assert user.inner_text().strip() == "Write 2024-03-15 out in full."
    assert box.input_value() == ""
    page.screenshot(path=str(artifacts / "chat-01-reply.png"))

    page.locator("#ts-chat-unload").click()
    wait_until(lambda: "Unloaded" in status.inner_text(), 30, what="the unload")
    wait_until(lambda: not chat_workers_of(studio.process.pid), 15, what="the chat process to exit")
    page.close()
