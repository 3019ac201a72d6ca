"""Page scripts that must run before Gradio's own: first in the ``<head>`` of the HTML page the studio serves.

Gradio adds ``launch(head=...)`` to the page from its frontend, after its modules have loaded, so a script there
comes too late to wrap a browser function those modules keep a reference to (assets/tracker_pacing.js does). This
ASGI middleware puts such scripts at the very start of the served ``<head>`` instead. Only whole, uncompressed HTML
pages (200 answers to GET) are touched; every other answer (the queue's event stream, files, JSON) passes through as
it comes.
"""

from __future__ import annotations

import re
from typing import Any

from starlette.datastructures import MutableHeaders

HEAD_TAG = re.compile(rb"<head(\s[^>]*)?>", re.IGNORECASE)


def with_prelude(page: bytes, prelude: bytes) -> bytes:
    """``page`` with ``prelude`` right after its ``<head>`` tag (unchanged when it has none)."""
    found = HEAD_TAG.search(page)
    return page if found is None else page[: found.end()] + prelude + page[found.end() :]


def _is_plain_page(start: dict[str, Any]) -> bool:
    """Whether a response (its start message) is a whole HTML page as it is: 200, text/html, not compressed."""
    headers = MutableHeaders(raw=list(start.get("headers", [])))
    html = headers.get("content-type", "").startswith("text/html")
    return start.get("status") == 200 and html and "content-encoding" not in headers


class PagePrelude:
    """ASGI middleware: ``scripts`` (JavaScript sources) first in the ``<head>`` of every HTML page answered to GET."""

    def __init__(self, app: Any, scripts: list[str]):
        self.app = app
        self.prelude = "".join(f"<script>{script}</script>" for script in scripts).encode()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("method") != "GET":
            await self.app(scope, receive, send)
            return
        start: dict[str, Any] | None = None
        body = bytearray()

        async def send_with_prelude(message: dict[str, Any]) -> None:
            nonlocal start
            if message["type"] == "http.response.start" and _is_plain_page(message):
                start = message  # held back until the whole page is here: its length changes
                return
            if start is None or message["type"] != "http.response.body":
                await send(message)
                return
            body.extend(message.get("body", b""))
            if message.get("more_body", False):
                return
            page = with_prelude(bytes(body), self.prelude)
            headers = MutableHeaders(raw=list(start.get("headers", [])))
            headers["content-length"] = str(len(page))
            await send({**start, "headers": headers.raw})
            await send({"type": "http.response.body", "body": page})

        await self.app(scope, receive, send_with_prelude)
