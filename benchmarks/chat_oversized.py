"""How long an oversized chat request holds the chat worker: a message, or tools, far longer than the model's context.

A real chat worker on the demo model (a context of 256 tokens) gets a user message of 0.1 to 20 MB, then tools of
0.01 to 7 MB with a short message; each is refused as too long for the context. Printed for each: the seconds until
the refusal (the worker's time, for whoever waits behind it), then the seconds of a short reply right after.

    python benchmarks/chat_oversized.py
    PYTHONPATH=/path/to/older/tree python benchmarks/chat_oversized.py     # the same on another tree
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from engine.chat.client import ChatClient, ChatError, ModelSpec, SamplingParams  # noqa: E402 (after the switch)

SHORT = SamplingParams(temperature=0, max_new_tokens=8)
HI = [{"role": "user", "content": "hi"}]


def timed(client: ChatClient, what: str, messages: list[dict[str, str]], tools: Any = None) -> None:
    started = time.monotonic()
    try:
        "".join(client.generate(messages, SHORT, tools=tools))
        outcome = "answered"
    except ChatError as exc:
        outcome = str(exc)[:70]
    seconds = time.monotonic() - started
    started = time.monotonic()
    "".join(client.generate(HI, SHORT))
    print(f"{what:>22}: {seconds:6.2f} s  {outcome}; a short reply after it {time.monotonic() - started:.2f} s")


def main() -> None:
    client = ChatClient()
    try:
        list(client.load(ModelSpec(base="assets/demo-model")))
        for megabytes in (0.1, 1, 5, 20):
            message = "word " * int(megabytes * 1024 * 1024 / 5)
            timed(client, f"message of {megabytes:g} MB", [{"role": "user", "content": message}])
        for count in (100, 10_000, 50_000):
            tools = [
                {"name": f"f{n}", "description": "d" * 50, "parameters": {"type": "object", "properties": {}}}
                for n in range(count)
            ]
            text = json.dumps(tools)
            timed(client, f"tools of {len(text) / 1e6:.2f} MB", HI, text)
    finally:
        client.unload()


if __name__ == "__main__":
    main()
