"""Visitor identities in demo mode: tokens the server mints and signs, so a client cannot invent one.

A token is ``<id>.<signature>``: a random id and an HMAC-SHA256 of it under a key that stays on the server
(``WORKSPACE/.visitor-key``, mode 0600, never sent to a page). Only the server can make a token that verifies,
so the per-visitor limits (one queued or running run, an upload quota) hold per token the server handed out;
and the server hands out a bounded number of new tokens per client address (studio.demo.budget). The browser keeps
its token in ``gr.BrowserState`` only so that it survives a refresh: Gradio publishes that component's
encryption secret in the page config, so the storage protects nothing and the signature is what counts.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
import secrets
from collections.abc import Mapping
from pathlib import Path

from engine.api import visitor_key_file

_TOKEN = re.compile(r"^([A-Za-z0-9_-]{16,64})\.([A-Za-z0-9_-]{43})$")
KEY_BYTES = 32


def visitor_key(workspace: Path) -> bytes:
    """The workspace's signing key, made on first use; kept in the workspace so a restart keeps visitors."""
    path = visitor_key_file(workspace)
    try:
        return base64.urlsafe_b64decode(path.read_bytes().strip())
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another studio on the same workspace made it first: use theirs
        return visitor_key(workspace)
    key = secrets.token_bytes(KEY_BYTES)
    with os.fdopen(fd, "wb") as handle:
        handle.write(base64.urlsafe_b64encode(key))
    return key


def _signature(key: bytes, visitor_id: str) -> str:
    digest = hmac.new(key, visitor_id.encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def mint_token(key: bytes) -> str:
    """A new visitor token: a fresh random id with the server's signature."""
    visitor_id = secrets.token_urlsafe(18)
    return f"{visitor_id}.{_signature(key, visitor_id)}"


def verify_token(key: bytes, token: object) -> str | None:
    """``token`` when the server signed it with ``key``; None for anything else (a made-up or altered id)."""
    if not key or not isinstance(token, str):
        return None
    match = _TOKEN.match(token)
    if match is None or not hmac.compare_digest(match.group(2), _signature(key, match.group(1))):
        return None
    return token


def client_address(peer: str | None, headers: Mapping[str, str], proxy_hops: int) -> str:
    """The address a new identity is counted against.

    ``peer`` is the TCP peer. Behind ``proxy_hops`` trusted proxies (a Hugging Face Space has one in front of
    the app) the client is the entry that many places from the right of ``X-Forwarded-For``: each proxy appends
    the address it saw, so entries further left are whatever the client chose to send. With no trusted proxy
    the header is ignored for the same reason.
    """
    if proxy_hops > 0:
        forwarded = [item.strip() for item in headers.get("x-forwarded-for", "").split(",") if item.strip()]
        if forwarded:
            return forwarded[-min(proxy_hops, len(forwarded))]
    return peer or "unknown"
