"""Requests as a browser page sends them, for handlers that answer in the page's language (studio.i18n)."""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.requests import Request


def page_request(lang: str | None) -> Request:
    """An HTTP request from a page showing ``lang`` (its ``ts_lang`` cookie); no cookie for None."""
    headers = [(b"cookie", f"ts_lang={lang}".encode())] if lang else []
    return Request({"type": "http", "method": "POST", "path": "/", "headers": headers, "query_string": b""})


def call_event(blocks: Any, name: str, args: list[Any], lang: str | None = None) -> list[Any]:
    """Run the event handler named ``name`` of ``blocks`` as the server does (preprocess, fn, postprocess), from a
    page showing ``lang`` (no page language for None), without a browser."""
    from gradio.state_holder import SessionState

    fn = next(fn for fn in blocks.fns.values() if fn.name == name)
    request = page_request(lang) if lang else None
    return asyncio.run(blocks.process_api(fn, args, state=SessionState(blocks), request=request))["data"]
