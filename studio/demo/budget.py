"""A sliding-window budget per client address: how many new visitor tokens, and how many bytes of request bodies,
one address may take in any window of time.

Kept in the studio's memory: a restart forgets the counts, which costs a flooder one restart's worth of budget,
while the demo's other caps (queued runs, each visitor's disk quota, Gradio's sweep of unused uploads) still
bound what that buys.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable


class AddressBudget:
    """At most ``limit`` (a count, or bytes) per client address in any ``window_s`` seconds."""

    def __init__(self, limit: float, window_s: float, clock: Callable[[], float] = time.monotonic):
        self.limit, self.window_s, self.clock = limit, window_s, clock
        self._taken: dict[str, deque[tuple[float, float]]] = {}  # per address: (when, amount), oldest first
        self._lock = threading.Lock()

    def take(self, client: str, amount: float = 1.0) -> bool:
        """Count ``amount`` against ``client``; False (and nothing counted) when it would go over the limit."""
        now = self.clock()
        with self._lock:
            self._forget_before(now - self.window_s)
            taken = self._taken.setdefault(client, deque())
            if sum(part for _, part in taken) + amount > self.limit:
                if not taken:
                    del self._taken[client]
                return False
            taken.append((now, amount))
            return True

    def retry_in(self, client: str, amount: float = 1.0) -> float:
        """Seconds until ``client`` may take ``amount`` (0 when it may now; infinite when it never may)."""
        if amount > self.limit:
            return math.inf
        with self._lock:
            taken = list(self._taken.get(client, ()))
        held, leaves_at = sum(part for _, part in taken), self.clock()
        for when, part in taken:  # the oldest leave the window first
            if held + amount <= self.limit:
                break
            held, leaves_at = held - part, when + self.window_s
        return max(0.0, leaves_at - self.clock())

    def _forget_before(self, cutoff: float) -> None:
        for client in list(self._taken):
            taken = self._taken[client]
            while taken and taken[0][0] <= cutoff:
                taken.popleft()
            if not taken:
                del self._taken[client]
