"""How long Chat takes to answer a conversation longer than the model's context: the worker leaves the oldest turns
out until prompt and reply fit.

Conversations of 21 to 2,001 turns (user / assistant pairs of about 100 words each, then a question) go to a real
chat worker on the demo model (a context of 256 tokens); printed for each: the seconds from the request to the end
of an 8-token greedy reply, and the turns left out.

    python benchmarks/chat_long_conversation.py
    PYTHONPATH=/path/to/older/tree python benchmarks/chat_long_conversation.py     # the same on another tree
"""

from __future__ import annotations

import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from engine.chat.client import ChatClient, ChatError, ModelSpec, SamplingParams  # noqa: E402 (after the switch)

PAIRS = (10, 100, 400, 1000)


def conversation(pairs: int) -> list[dict[str, str]]:
    turns = []
    for number in range(pairs):
        turns += [
            {"role": "user", "content": f"question {number} " + "word " * 100},
            {"role": "assistant", "content": "answer " * 100},
        ]
    return [*turns, {"role": "user", "content": "Write 2024-03-15 out in full."}]


def main() -> None:
    client = ChatClient()
    try:
        list(client.load(ModelSpec(base="assets/demo-model")))
        for pairs in PAIRS:
            started = time.monotonic()
            try:
                reply = client.generate(conversation(pairs), SamplingParams(temperature=0, max_new_tokens=8))
                "".join(reply)
                dropped = getattr(reply, "finish", client.last_finish).get("dropped")
                outcome = f"{dropped} turns left out"
            except ChatError as exc:
                outcome = f"failed: {exc}"
            print(f"{2 * pairs + 1:>5} turns: {time.monotonic() - started:7.2f} s  {outcome}", flush=True)
    finally:
        client.unload()


if __name__ == "__main__":
    main()
