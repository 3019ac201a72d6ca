"""The chat worker's line: the requests (replies, loads, unloads) that wait for the worker, first come first served,
one place per caller.

The worker writes one reply at a time. A request waits until it is first in line and the reply being written, if
any, is its caller's own (which the new request then replaces); a caller's newer request takes the place of their
own still waiting (SUPERSEDED there), their Stop takes it out (WITHDRAWN), a line of ``max_waiting`` is full
(LINE_FULL: each waiting request holds one of the studio's threads), and one that does not move for TURN_TIMEOUT
seconds gives up (BUSY). The client (engine.chat.client) owns the lock and says whether the worker is free for a
caller; the line keeps only who waits, in what order, and why a request was taken out.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from engine.chat.spec import ChatError

TURN_TIMEOUT = 300.0  # the longest a reply waits for the replies of other callers ahead of it
BUSY = "the chat is busy answering others; try again in a moment"
SUPERSEDED = "a newer message of the same caller took this one's place in line"
WITHDRAWN = "stopped before its turn came"
MAX_WAITING = 8  # requests in line at once: each holds a thread of the studio's while it waits
LINE_FULL = "the chat has {count} messages waiting for their turn already; try again in a moment"


class Line:
    """Who waits for the worker, in order; every method is called with the lock of ``turn`` held."""

    def __init__(self, turn: threading.Condition):
        self.turn = turn  # notified whenever the line or the reply being written changes
        self._requests: list[tuple[int, str | None]] = []  # request id and caller, first come first
        self._withdrawn: dict[int, str] = {}  # waiting requests whose caller asked again or stopped: why

    @property
    def waiting(self) -> int:
        """How many requests wait (not counting those on their way out of the line)."""
        return sum(request not in self._withdrawn for request, _ in self._requests)

    @property
    def empty(self) -> bool:
        """Whether no request is in line, not even one on its way out."""
        return not self._requests

    def waiting_for_others(self, caller: str | None) -> int:
        """How many requests of callers other than ``caller`` wait."""
        return sum(holder != caller and request not in self._withdrawn for request, holder in self._requests)

    def wait_for_turn(
        self,
        request_id: int,
        caller: str | None,
        free: Callable[[], bool],
        max_waiting: int = MAX_WAITING,
        recheck: Callable[[], None] = lambda: None,
    ) -> None:
        """Wait (the lock released while waiting) until the request is first in line and ``free()`` (the worker may
        take the caller's request: no reply being written, or the caller's own); ``recheck`` after each wake-up (the
        model may have changed meanwhile). The caller's earlier request still in line gives up its place (ChatError
        SUPERSEDED there); ChatError LINE_FULL at once when ``max_waiting`` others wait, WITHDRAWN when the caller
        stops meanwhile, BUSY after TURN_TIMEOUT seconds."""
        self.withdraw(caller, SUPERSEDED)
        if self.waiting >= max_waiting:
            raise ChatError(LINE_FULL.format(count=self.waiting))
        self._requests.append((request_id, caller))
        deadline = time.monotonic() + TURN_TIMEOUT
        try:
            while True:
                if request_id in self._withdrawn:
                    raise ChatError(self._withdrawn[request_id])
                if self._requests[0][0] == request_id and free():
                    return
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ChatError(BUSY)
                self.turn.wait(left)
                recheck()
        finally:
            self._requests.remove((request_id, caller))
            self._withdrawn.pop(request_id, None)
            self.turn.notify_all()  # the next in line may be free to go now

    def withdraw(self, caller: str | None, why: str) -> bool:
        """Take the caller's requests waiting in line out of it (each raises ChatError ``why``); False when none
        waited."""
        mine = [request for request, holder in self._requests if holder == caller and request not in self._withdrawn]
        self._withdrawn.update(dict.fromkeys(mine, why))
        self.turn.notify_all()
        return bool(mine)
