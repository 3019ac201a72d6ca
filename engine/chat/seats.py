"""A bound on the chat workers that run at once among several chat clients.

A public demo gives each visitor's run model a chat client of its own (a worker process: with the demo model about
20 MB forked from a warm fork server, 0.35 GB started cold), so that no visitor's Load replaces another's model.
``ChatSeats`` keeps their number bounded: a client holds a seat while its worker runs or a load of its is under way;
a load that finds every seat held first unloads the models nobody has used for ``idle_s`` seconds, and is refused
(``NoSeat``) when none is that idle, so nobody loses a model they are using. A daemon thread unloads such idle models
every ``sweep_s`` seconds too, freeing their memory when nobody asks for it.

Who holds a seat is read from the clients themselves (a running worker, a load counted here), never recorded
apart: a worker that dies frees its seat by dying.
"""

from __future__ import annotations

import threading
import weakref
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol

from engine.chat.spec import ChatError

SWEEP_S = 60.0  # how often idle models are looked for: a minute's memory more or less does not matter


class Seated(Protocol):
    """What the seats ask of a client (engine.chat.client.ChatClient): whether its worker runs, and to unload a
    model nobody has used for a while."""

    @property
    def pid(self) -> int | None: ...

    def unload_if_unused(self, idle_s: float) -> bool: ...


class NoSeat(ChatError):
    """Every seat is held by a model in use: ``seats`` of them, each freed once unused for ``idle_s`` seconds."""

    def __init__(self, seats: int, idle_s: float):
        self.seats, self.idle_s = seats, idle_s
        super().__init__(
            f"the chat holds {seats} models for others, all in use; a model unused for {idle_s / 60:g} minutes "
            "makes room: try again later"
        )


class ChatSeats:
    """At most ``count`` chat workers at once among the clients that share these seats (``ChatClient(seats=...)``);
    a model unused for ``idle_s`` seconds gives its seat up when a load needs it, and within ``sweep_s`` seconds
    anyway."""

    def __init__(self, count: int, idle_s: float, sweep_s: float = SWEEP_S):
        if count < 1 or idle_s <= 0:
            raise ValueError(f"chat seats need a count of at least 1 and an idle time above 0, not {count}, {idle_s}")
        self.count, self.idle_s, self.sweep_s = count, idle_s, sweep_s
        self._lock = threading.Lock()  # always the innermost lock: taken under a client's, never the other way
        self._clients: weakref.WeakSet[Seated] = weakref.WeakSet()
        self._loads: Counter[int] = Counter()  # loads under way, by the id of their client
        self._stopped = threading.Event()
        self._sweeper: threading.Thread | None = None

    def join(self, client: Seated) -> None:
        """Count ``client`` among those sharing the seats (ChatClient does this itself)."""
        with self._lock:
            self._clients.add(client)

    @property
    def held(self) -> int:
        """How many seats are held now."""
        with self._lock:
            return sum(self._holds(client) for client in list(self._clients))

    def _holds(self, client: Seated) -> bool:
        return client.pid is not None or self._loads[id(client)] > 0

    @contextmanager
    def seat(self, client: Seated) -> Iterator[None]:
        """Hold a seat for ``client`` while its load runs (after it, its running worker holds it). NoSeat when every
        seat is held by others and none of their models has been unused for ``idle_s``. A client that holds a seat
        already (it replaces its own model) keeps it."""
        self._ensure_sweeper()
        if not self._admit(client):
            self.reclaim()  # outside the lock: unloading takes the idle clients' own locks
            if not self._admit(client):
                raise NoSeat(self.count, self.idle_s)
        try:
            yield
        finally:
            with self._lock:
                self._loads[id(client)] -= 1
                if self._loads[id(client)] <= 0:
                    del self._loads[id(client)]

    def _admit(self, client: Seated) -> bool:
        """Count a load for ``client`` when it holds a seat already or one is free; False when not."""
        with self._lock:
            others = sum(self._holds(other) for other in list(self._clients) if other is not client)
            if not self._holds(client) and others >= self.count:
                return False
            self._loads[id(client)] += 1
            return True

    def reclaim(self) -> int:
        """Unload every model unused for ``idle_s`` seconds (its worker exits); how many were."""
        with self._lock:
            clients = list(self._clients)
        return sum(client.unload_if_unused(self.idle_s) for client in clients)

    def _ensure_sweeper(self) -> None:
        with self._lock:
            if self._sweeper is None:
                self._sweeper = threading.Thread(target=self._sweep, daemon=True, name="chat-seats")
                self._sweeper.start()

    def _sweep(self) -> None:
        while not self._stopped.wait(self.sweep_s):
            self.reclaim()

    def stop(self) -> None:
        """End the sweeping thread (the models stay loaded)."""
        self._stopped.set()
