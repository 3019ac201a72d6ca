"""Which chat client answers a caller: one for the whole studio, or on a public demo one per visitor and one per
bundled model.

In one's own studio a single chat worker serves every page, so a loaded model survives a page refresh and shows on
every page. On a public demo that would let one visitor's Load replace the model another visitor is chatting with.
There a run's model loads in a client (and worker) of the visitor's own, and a bundled base model, open to everyone,
in a client of that model's own that every visitor who loads it shares (its replies come one at a time, first come
first served: engine.chat.client): its memory is paid once, however many chat with it, and a visitor's Unload only
leaves it. ``ChatSeats`` bounds how many workers run at once (``DemoPolicy.max_chat_models``): a model unused for
``DemoPolicy.chat_idle_minutes`` gives its seat to another Load, and is unloaded within a minute anyway.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from engine.api import BUNDLED_MODELS, ChatClient, ChatSeats
from studio.chat.models import worker_tag
from studio.demo.caller import Caller
from studio.demo.policy import DemoPolicy

FORGET_S = 3600.0  # a visitor not asked about this long, without a worker of their own, is forgotten
PUBLIC = frozenset(f"base:{model}" for model in BUNDLED_MODELS)  # the picks every visitor may share


class ChatClients:
    """The chat clients of a studio: ``for_caller`` answers, ``for_load`` loads; ``shared`` is the one client
    outside demo mode."""

    def __init__(self, workspace: Path, policy: DemoPolicy, shared: ChatClient | None = None):
        self.workspace = workspace
        self.shared = shared or ChatClient(workspace)
        self.seats = ChatSeats(policy.max_chat_models, policy.chat_idle_minutes * 60) if policy.enabled else None
        self._own: dict[str | None, ChatClient] = {}  # each visitor's, by worker tag (None: callers without an id)
        self._public: dict[str, ChatClient] = {}  # by pick, for the PUBLIC picks
        self._on: dict[str | None, ChatClient] = {}  # the public client a visitor chats with, while they do
        self._asked: dict[str | None, float] = {}  # when each visitor was last asked about
        self._lock = threading.Lock()

    @property
    def clients(self) -> list[ChatClient]:
        """Every client made so far."""
        with self._lock:
            return [self.shared, *self._own.values(), *self._public.values()]

    def for_caller(self, caller: Caller) -> ChatClient:
        """The client that answers ``caller``: the shared one outside demo mode; else the public client of the
        bundled model they loaded last, or their own."""
        if self.seats is None:
            return self.shared
        tag = worker_tag(caller)
        with self._lock:
            self._touch(tag)
            return self._on.get(tag) or self._own_client(tag)

    def for_load(self, caller: Caller, pick: str | None) -> ChatClient:
        """The client a Load of ``pick`` (a model list key) goes to, which answers ``caller`` from then on: in demo
        mode a bundled model's public one, any other pick the visitor's own."""
        if self.seats is None:
            return self.shared
        tag = worker_tag(caller)
        with self._lock:
            self._touch(tag)
            if pick not in PUBLIC:
                self._on.pop(tag, None)
                return self._own_client(tag)
            if pick not in self._public:
                self._public[pick] = ChatClient(self.workspace, seats=self.seats)
            self._on[tag] = self._public[pick]
            return self._on[tag]

    def is_public(self, client: ChatClient) -> bool:
        """Whether ``client`` is shared by visitors (a bundled model's, in demo mode)."""
        with self._lock:
            return any(client is public for public in self._public.values())

    def unload_own(self, caller: Caller) -> None:
        """Unload the model of the caller's own client, if any: a Load of a bundled model replaces it for them, as
        any Load replaces the model before it (else one visitor going back and forth would hold two seats)."""
        tag = worker_tag(caller)
        with self._lock:
            own = self._own.get(tag)
        if own is not None and own.pid is not None:
            own.unload_for(tag)

    def leave(self, caller: Caller) -> bool:
        """Stop answering ``caller`` from a public client (their Unload: the model stays for the others); False when
        they were not on one."""
        with self._lock:
            return self._on.pop(worker_tag(caller), None) is not None

    def _own_client(self, tag: str | None) -> ChatClient:
        """The visitor's own client, made on first use (lock held)."""
        if tag not in self._own:
            self._own[tag] = ChatClient(self.workspace, seats=self.seats)
        return self._own[tag]

    def _touch(self, tag: str | None) -> None:
        """Note that ``tag`` was asked about now (lock held); a visitor not met before first has the visitors gone for
        FORGET_S forgotten: a client without a worker is a few fields, but a public demo meets visitors for months."""
        now = time.monotonic()
        if tag not in self._asked:
            for gone in [other for other, asked in self._asked.items() if now - asked > FORGET_S]:
                own = self._own.get(gone)
                if own is None or (own.pid is None and own.loading is None):
                    self._own.pop(gone, None)
                    self._on.pop(gone, None)
                    del self._asked[gone]
        self._asked[tag] = now
