"""What a stranger can do to a public studio's machine from outside its forms: name any address in
X-Forwarded-For to get new visitor tokens past the per-address limit, leave uploads in Gradio's cache that no
event ever names, and send such uploads one after another to fill the disk within the hour they are kept. A real
demo studio on a real port."""

from __future__ import annotations

import json
import time
import urllib.error
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


def upload(base: str, name: str, size: int, headers: dict[str, str] | None = None) -> str:
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
    headers = {"Content-Type": f"multipart/form-data; boundary={boundary}", **(headers or {})}
    request = urllib.request.Request(f"{base}/gradio_api/upload", data=body, headers=headers)
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


def refused(call: Any) -> urllib.error.HTTPError:
    """The HTTP error ``call`` raised (it must raise one)."""
    with pytest.raises(urllib.error.HTTPError) as caught:
        call()
    return caught.value


def test_one_address_may_send_only_so_many_bytes_an_hour(tmp_path: Path) -> None:
    """Past ``sent_mb_per_hour`` an address's uploads are refused before they are stored, in the page's
    language, with when to try again; another address is not held up, and a body of no declared length is
    refused."""
    policy = DemoPolicy(enabled=True, max_upload_mb=1.0, sent_mb_per_hour=2.0, proxy_hops=1)
    demo, base = served(tmp_path, policy)
    cache = Path(demo.GRADIO_CACHE)
    try:
        one = {"X-Forwarded-For": "203.0.113.9"}  # the trusted proxy's entry names the client
        stored = [upload(base, f"part{index}.jsonl", 600_000, one) for index in range(3)]  # 1.8 MB of 2
        assert all(Path(path).stat().st_size == 600_000 for path in stored)
        before = sorted(path for path in cache.rglob("*") if path.is_file())
        error = refused(lambda: upload(base, "more.jsonl", 600_000, {**one, "Accept-Language": "ja"}))
        assert error.code == 429
        words = error.read().decode()
        assert "2 MB" in words and "0.6 MB" in words and "分後" in words, words  # Japanese, with the figures
        assert 0 < int(error.headers["Retry-After"]) <= 3600
        assert sorted(path for path in cache.rglob("*") if path.is_file()) == before  # nothing was stored
        other = upload(base, "other.jsonl", 600_000, {"X-Forwarded-For": "198.51.100.4"})
        assert Path(other).stat().st_size == 600_000
        chunked = urllib.request.Request(
            f"{base}/gradio_api/upload",
            data=iter([b"--x\r\n"]),  # an iterable body goes out chunked, with no Content-Length
            headers={"Content-Type": "multipart/form-data; boundary=x", "Transfer-Encoding": "chunked"},
        )
        assert refused(lambda: urllib.request.urlopen(chunked, timeout=60)).code == 411
    finally:
        demo.close()
