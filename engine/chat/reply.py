"""One chat reply as the client hands it out: the text deltas as they stream, then how the reply ended. Its own
record, so that several callers' replies on one worker each keep their own ending (engine.chat.client)."""

from __future__ import annotations

from collections.abc import Generator, Iterator
from typing import Any


class Reply(Iterator[str]):
    """One reply as it streams: iterate for its text deltas. ``finish`` then holds how it ended (the worker's
    "done" event: ``reason`` "stop" (end of turn), "length" or "cancelled"; ``tokens``, ``prompt_tokens``,
    ``dropped`` turns, ``threads``); empty until it has ended."""

    def __init__(self, deltas: Generator[str, None, dict[str, Any]]):
        self._deltas = deltas
        self.finish: dict[str, Any] = {}

    def __next__(self) -> str:
        try:
            return next(self._deltas)
        except StopIteration as end:
            self.finish = end.value or {}
            raise

    def close(self) -> None:
        """Walk away from the reply: one still being written is cancelled."""
        self._deltas.close()
