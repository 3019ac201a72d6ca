"""Demo mode's cap on what one client address may send in an hour: the bytes of its request bodies.

Gradio stores every upload in its cache before any event names it, and its sweep (``delete_cache`` in
studio.app) removes the unused ones within the hour; within that hour one address could still fill the disk a
20 MB file at a time, with no visitor token and so outside any visitor's quota. This ASGI middleware counts each
request body's declared length against its address's budget (studio.demo.budget) before the app reads a byte of
it, and answers 429 past the budget (having read the body to nowhere: a client still sending when the
connection closed would see a broken pipe, not the answer). A body without a declared length (chunked) cannot
be counted before it is stored, so it is refused with 411; browsers always declare one, and uvicorn holds a body
to what it declared.
Bodies of every route count (an event's payload may carry a file as base64, which Gradio stores too).
"""

from __future__ import annotations

import math
from typing import Any

from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import PlainTextResponse

from studio.demo.budget import AddressBudget
from studio.demo.identity import client_address
from studio.demo.policy import MB, DemoPolicy
from studio.i18n.catalog import key, request_language, text

PAST_HOURLY, NO_LENGTH = key("demo.quota.address_hour"), key("demo.quota.no_length")
HOUR_S = 3600.0
_BODILESS = frozenset({"GET", "HEAD", "OPTIONS"})


class SentBudget:
    """ASGI middleware: at most ``policy.sent_mb_per_hour`` MB of request bodies per client address an hour."""

    def __init__(self, app: Any, policy: DemoPolicy):
        self.app, self.policy = app, policy
        self.budget = AddressBudget(policy.sent_mb_per_hour * MB, HOUR_S)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("method") in _BODILESS:
            await self.app(scope, receive, send)
            return
        refusal = self.refusal(scope)
        if refusal is None:
            await self.app(scope, receive, send)
        else:
            await _discard_body(receive)
            await refusal(scope, receive, send)

    def refusal(self, scope: dict[str, Any]) -> PlainTextResponse | None:
        """The answer that refuses this request's body, or None when its address may send it."""
        headers = Headers(scope=scope)
        declared = headers.get("content-length")
        lang = request_language(Request(scope))
        if declared is None and "chunked" in headers.get("transfer-encoding", "").lower():
            return PlainTextResponse(text(NO_LENGTH, lang), status_code=411)
        size = int(declared) if declared and declared.isdigit() else 0
        peer = scope["client"][0] if scope.get("client") else None
        client = client_address(peer, dict(headers), self.policy.proxy_hops)
        if self.budget.take(client, size):
            return None
        wait = self.budget.retry_in(client, size)
        limit = f"{self.policy.sent_mb_per_hour:.0f} MB"
        minutes = "60" if math.isinf(wait) else str(max(1, math.ceil(wait / 60)))
        message = text(PAST_HOURLY, lang, size=f"{size / MB:.1f} MB", limit=limit, minutes=minutes)
        retry = str(int(HOUR_S if math.isinf(wait) else math.ceil(wait)))
        return PlainTextResponse(message, status_code=429, headers={"Retry-After": retry})


async def _discard_body(receive: Any) -> None:
    """Read a refused request's body and keep none of it."""
    while True:
        message = await receive()
        if message["type"] != "http.request" or not message.get("more_body", False):
            return
