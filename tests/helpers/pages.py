"""Requests as a browser page sends them, for handlers that answer in the page's language (studio.i18n)."""

from __future__ import annotations

from starlette.requests import Request


def page_request(lang: str | None) -> Request:
    """An HTTP request from a page showing ``lang`` (its ``ts_lang`` cookie); no cookie for None."""
    headers = [(b"cookie", f"ts_lang={lang}".encode())] if lang else []
    return Request({"type": "http", "method": "POST", "path": "/", "headers": headers, "query_string": b""})
