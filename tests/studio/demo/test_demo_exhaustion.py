"""What a stranger can do to a public studio's machine from outside its forms: name any address in
X-Forwarded-For to get new visitor tokens past the per-address limit, and leave uploads in Gradio's cache that no
event ever names. A real demo studio on a real port."""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

import studio.app
from studio.app import build_app, launch_options
from studio.demo.policy import DemoPolicy
from tests.helpers.servers import free_port


def served(tmp_path: Path, policy: DemoPolicy) -> tuple[Any, str]:
    demo = build_app(tmp_path, policy)
    port = free_port()
    demo.queue().launch(server_port=port, prevent_thread_lock=True, quiet=True, **launch_options(tmp_path, policy))
    return demo, f"http://127.0.0.1:{port}"


def proxy_middleware(app: Any) -> ProxyHeadersMiddleware | None:
    """The ProxyHeadersMiddleware in a uvicorn server's chain of ASGI apps, if there is one."""
    while app is not None:
        if isinstance(app, ProxyHeadersMiddleware):
            return app
        app = getattr(app, "app", None)
    return None


def test_the_server_takes_no_client_address_from_x_forwarded_for(tmp_path: Path) -> None:
    """uvicorn trusts X-Forwarded-For from loopback unless told otherwise; the studio's server trusts it from
    nobody, so a local client cannot name the address its new visitor tokens are counted against."""
    demo, _ = served(tmp_path, DemoPolicy(enabled=True))
    try:
        middleware = proxy_middleware(demo.server.config.loaded_app)
        assert middleware is not None  # uvicorn rewrites the client here when it trusts the sender
        for sender in ("127.0.0.1", "::1", "10.0.0.7"):
            assert sender not in middleware.trusted_hosts
    finally:
        demo.close()


def upload(base: str, name: str, size: int) -> str:
    """POST a file to Gradio's upload route with no visitor token; the path Gradio stored it at."""
    boundary = "studio-test-boundary"
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="files"; filename="{name}"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n"
        ).encode()
        + b"x" * size
        + f"\r\n--{boundary}--\r\n".encode()
    )
    request = urllib.request.Request(
        f"{base}/gradio_api/upload", data=body, headers={"Content-Type": f"multipart/form-data; boundary={boundary}"}
    )
    return json.loads(urllib.request.urlopen(request, timeout=60).read())[0]


def test_an_upload_nobody_uses_is_deleted_after_its_age(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The studio keeps an anonymous upload only as long as ``UPLOADS_MAX_AGE_S`` (55 minutes; one second
    here), swept every ``UPLOADS_SWEEP_S``."""
    assert studio.app.UPLOADS_SWEEP_S + studio.app.UPLOADS_MAX_AGE_S <= 3600
    monkeypatch.setattr(studio.app, "UPLOADS_SWEEP_S", 1)
    monkeypatch.setattr(studio.app, "UPLOADS_MAX_AGE_S", 1)
    demo, base = served(tmp_path, DemoPolicy(enabled=True, max_upload_mb=1.0))
    try:
        stored = Path(upload(base, "orphan.jsonl", 4096))
        assert stored.is_file() and stored.stat().st_size == 4096
        deadline = time.monotonic() + 120  # a generous bound: the sweep runs every second
        while stored.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not stored.exists()
    finally:
        demo.close()
