"""studio.page_prelude against a real Starlette app: the prelude goes first into the <head> of an HTML answer (whole
or in chunks) with its length corrected, and nothing else is touched (JSON, a compressed page, a POST, an error
page, an event stream)."""

from __future__ import annotations

import gzip

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from studio.page_prelude import PagePrelude

PAGE = '<!doctype html><html lang="en"><HEAD data-x="1"><title>t</title></HEAD><body>hi</body></html>'
SCRIPT = "window.first = true;"


def chunks():
    yield PAGE[:20].encode()
    yield PAGE[20:].encode()


def events():
    yield b"data: <head>\n\n"


ROUTES = [
    Route("/", lambda request: HTMLResponse(PAGE), methods=["GET", "POST"]),
    Route("/chunked", lambda request: StreamingResponse(chunks(), media_type="text/html")),
    Route("/json", lambda request: JSONResponse({"html": "<head>"})),
    Route("/missing", lambda request: HTMLResponse(PAGE, status_code=404)),
    Route(
        "/gzip",
        lambda request: Response(
            gzip.compress(PAGE.encode()), headers={"content-encoding": "gzip"}, media_type="text/html"
        ),
    ),
    Route("/events", lambda request: StreamingResponse(events(), media_type="text/event-stream")),
]
CLIENT = TestClient(Starlette(routes=ROUTES, middleware=[Middleware(PagePrelude, scripts=[SCRIPT])]))
WITH_PRELUDE = PAGE.replace('<HEAD data-x="1">', f'<HEAD data-x="1"><script>{SCRIPT}</script>')


def test_an_html_page_gets_the_scripts_first_in_its_head():
    for path in ("/", "/chunked"):
        answer = CLIENT.get(path)
        assert answer.text == WITH_PRELUDE
        assert int(answer.headers["content-length"]) == len(WITH_PRELUDE.encode())


def test_other_answers_pass_untouched():
    assert CLIENT.get("/json").json() == {"html": "<head>"}
    assert CLIENT.get("/gzip").text == PAGE  # the client decompressed what the server sent as it was
    assert CLIENT.post("/").text == PAGE
    assert CLIENT.get("/missing").text == PAGE
    assert CLIENT.get("/events").text == "data: <head>\n\n"
