"""Which chat client answers a caller: one for the whole studio, or one per visitor on a public demo.

In one's own studio a single chat worker serves every page, so a loaded model survives a page refresh and shows on
every page. On a public demo that would let one visitor's Load replace the model another visitor is chatting with,
so each visitor (by the tag the chat worker knows them by, studio.chat.models.worker_tag) gets a client and a worker
of their own, and ``ChatSeats`` bounds how many run at once (``DemoPolicy.max_chat_models``): a model unused for
``DemoPolicy.chat_idle_minutes`` gives its seat to another visitor's Load, and is unloaded within a minute anyway.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from engine.api import ChatClient, ChatSeats
from studio.chat.models import worker_tag
from studio.demo.caller import Caller
from studio.demo.policy import DemoPolicy

FORGET_S = 3600.0  # a visitor's client with no worker, not asked for this long, is dropped (a new one is made)


class ChatClients:
    """The chat clients of a studio (``for_caller``); ``shared`` is the one outside demo mode."""

    def __init__(self, workspace: Path, policy: DemoPolicy, shared: ChatClient | None = None):
        self.workspace = workspace
        self.shared = shared or ChatClient(workspace)
        self.seats = ChatSeats(policy.max_chat_models, policy.chat_idle_minutes * 60) if policy.enabled else None
        self._visitors: dict[str | None, ChatClient] = {}
        self._asked: dict[str | None, float] = {}  # when each visitor's client was last handed out
        self._lock = threading.Lock()

    def for_caller(self, caller: Caller) -> ChatClient:
        """The client that answers ``caller``: the shared one outside demo mode, else the visitor's own."""
        if self.seats is None:
            return self.shared
        tag = worker_tag(caller)  # None for a caller without a valid visitor id: those share one client
        with self._lock:
            now = time.monotonic()
            if tag not in self._visitors:
                self._forget(now)
                self._visitors[tag] = ChatClient(self.workspace, seats=self.seats)
            self._asked[tag] = now
            return self._visitors[tag]

    def _forget(self, now: float) -> None:
        """Drop the clients of visitors gone for FORGET_S (lock held): without a worker they are a few fields each,
        but a public demo meets visitors for months. One handed out since is in use, and stays."""
        for tag, client in list(self._visitors.items()):
            if now - self._asked[tag] > FORGET_S and client.pid is None and client.loading is None:
                del self._visitors[tag], self._asked[tag]
