"""Plain HTTP routes on the studio's server for the page script that draws the Monitor's charts.

``GET /studio/live/charts?run=TOKEN&smoothing=S&log_y=0|1&have=JSON&charts=A,B&since=VERSION&wait=SECONDS&log=0|1``
answers with the charts whose data changed since the keys in ``have`` (studio.monitor.live), the progress
and stats panels, and with ``log=1`` the end of train.log, after waiting up to ``wait`` seconds while the
run's version is still ``since`` (a long poll: the answer leaves as soon as the trainer writes).
``GET /studio/live/plotly.js`` serves the basic bundle of plotly.js (assets/vendor), which the page loads
in the background soon after it opens.

They go on Gradio's own FastAPI app (``launch(app_kwargs={"routes": ...})``), so they share its port, and
they ask for the same login as the page when the studio runs with ``--auth``.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from fastapi import Request, Response
from fastapi.responses import FileResponse
from fastapi.routing import APIRoute
from starlette.concurrency import run_in_threadpool

from engine.api import LOG_FILE, METRICS_FILE, OPEN_STATES, STATUS_FILE, log_tail, runs, runs_dir
from studio.demo.policy import NORMAL, DemoPolicy
from studio.i18n.catalog import COOKIE, SOURCE, pick_language
from studio.monitor.live import CHARTS, FEEDS, NO_RUN, changed_charts, file_stamp, live_panels, run_of_token
from studio.monitor.session import monitor_key
from studio.path_guard import ASSETS_DIR

CHARTS_PATH = "/studio/live/charts"
PLOTLY_PATH = "/studio/live/plotly.js"
PLOTLY_FILE = ASSETS_DIR / "vendor" / "plotly-basic.min.js"  # scatter traces are all it needs
MAX_SMOOTHING = 0.99  # the slider's top; an EMA weight of 1 would never move
MAX_WAIT_SECONDS = 10.0  # a held answer comes back at least this often, so a page that left lets go
ACTIVE_WAIT_SECONDS = 1.0  # ... and at least once a second for a run that is going or queued
LOG_BYTES = 12_000  # the end of train.log the page shows: enough lines to see what happened
WATCH_SECONDS = 0.03  # how often a held answer looks at the run's files (three stat calls)


async def logged_in(request: Request) -> bool:
    """Whether the request carries the page's login (always, when the studio asks for none).

    It asks Gradio's app the way Gradio's own routes do (its auth dependency, else its login cookie), and
    refuses when it cannot tell: a future Gradio that moves these must not open the charts to everyone.
    """
    app = request.app
    try:
        if app.auth is None and app.auth_dependency is None:
            return True
        if app.auth_dependency is not None:
            user = app.auth_dependency(request)
            return (await user if inspect.isawaitable(user) else user) is not None
        cookie_id = app.cookie_id
        token = request.cookies.get(f"access-token-{cookie_id}") or request.cookies.get(
            f"access-token-unsecure-{cookie_id}"
        )
        return app.tokens.get(token) is not None
    except AttributeError:
        return False


def _json(payload: Any, status_code: int = 200) -> Response:
    # orjson writes a NaN loss as null, which the chart shows as a gap; json.dumps would write invalid NaN.
    return Response(
        orjson.dumps(payload),
        status_code=status_code,
        media_type="application/json",
        headers={"Cache-Control": "no-store"},
    )


class BadQuery(ValueError):
    """A query the page never sends (answered 400, without a traceback in the log)."""


def _have(text: str) -> dict[str, str]:
    """The page's chart keys (chart -> key, both text); anything malformed means it holds nothing.

    JSON nested deeper than the parser's recursion limit raises RecursionError, which is no ValueError: it is
    refused as a bad query rather than left to become a server error.
    """
    try:
        value = json.loads(text)
    except RecursionError:
        raise BadQuery("have: the value is nested too deeply") from None
    except ValueError:
        return {}
    if not isinstance(value, dict):
        return {}
    return {str(k): v for k, v in value.items() if isinstance(v, str)}  # a nested value is no key the page holds


@dataclass(frozen=True)
class ChartQuery:
    """What the page asks the charts route."""

    token: str = NO_RUN  # the run (studio.monitor.live.live_token), or none
    smoothing: float = 0.0
    log_y: bool = False
    have: dict[str, str] = field(default_factory=dict)  # chart -> the key of the figure the page shows
    wanted: tuple[str, ...] = CHARTS
    since: str = ""  # the run's version (``run_version``) at the page's previous answer
    wait: float = 0.0  # how long to hold the answer while the run's version is still ``since``
    log: bool = False  # whether to send the end of train.log (the page shows it only when its section is open)
    lang: str = SOURCE  # the page's language (its ts_lang cookie): the words on the charts and panels


def charts_response(
    run_dir: Path | None, query: ChartQuery, policy: DemoPolicy = NORMAL, workspace: Path | None = None
) -> Response:
    """The charts route's answer: keys, the changed wanted figures, the progress and stats panels, the log when
    asked, the metrics file's size, the run's version (see ``run_version``) and the key of the Monitor's header
    and buttons (``monitor_key``: the page asks Gradio for them again when it changes). In demo mode the panels
    and the log name files as the visitor knows them, not by the server's paths (DemoPolicy.shown)."""
    smoothing = min(MAX_SMOOTHING, max(0.0, query.smoothing))
    if run_dir is None:
        charts = changed_charts(None, "none", query.have, wanted=query.wanted, lang=query.lang)
        log = {"log": ""} if query.log else {}
        empty = {"panels": live_panels(None, None, None), **log, "size": 0, "version": "", "monitor": ""}
        return _json({**charts, **empty})
    version = run_version(run_dir)  # before reading: a line written meanwhile makes the next wait short
    status = runs.status(run_dir)
    with FEEDS.polled(run_dir) as feed:
        charts = changed_charts(feed, query.token, query.have, smoothing, query.log_y, query.wanted, query.lang)
        panels = policy.shown(live_panels(run_dir, status, feed, lang=query.lang), workspace)
    log = {"log": policy.shown(log_tail(run_dir, LOG_BYTES), workspace)} if query.log else {}
    monitor = monitor_key(run_dir, status, query.lang)
    size = int(version.split(".")[0])
    return _json({**charts, "panels": panels, **log, "size": size, "version": version, "monitor": monitor})


def run_version(run_dir: Path) -> str:
    """Changes whenever the trainer writes a metrics line, the run's status changes or its log grows: the
    metrics file's size, the status file's modification time and the log's size."""
    metrics, status, log = (file_stamp(run_dir / name) for name in (METRICS_FILE, STATUS_FILE, LOG_FILE))
    return f"{metrics[0]}.{status[1]}.{log[0]}"


async def wait_for_change(request: Request, run_dir: Path, since: str, seconds: float) -> None:
    """Return once the run's version differs from ``since``, after ``seconds``, or when the page goes away.

    Holding the answer until the trainer writes is what puts a new point on the chart within a few tens of
    milliseconds, where polling on a timer would add half its period on average.
    """
    deadline = time.monotonic() + seconds
    while since and run_version(run_dir) == since and time.monotonic() < deadline:
        if await request.is_disconnected():
            return
        await asyncio.sleep(WATCH_SECONDS)


def hold_seconds(run_dir: Path, wait: float) -> float:
    """How long to hold an answer: what the page asks, capped; at most a second for a run that is going or
    queued, so its elapsed time and place in line stay current while nothing is written."""
    state = runs.status(run_dir).state
    cap = ACTIVE_WAIT_SECONDS if state in OPEN_STATES else MAX_WAIT_SECONDS
    return max(0.0, min(wait, cap))


def live_routes(workspace: Path, policy: DemoPolicy = NORMAL) -> list[APIRoute]:
    """The routes for one workspace's studio (``policy``: what its pages may be shown)."""
    runs_root = runs_dir(Path(workspace))

    async def live_charts(
        request: Request,
        run: str = NO_RUN,
        smoothing: float = 0.0,
        log_y: bool = False,
        have: str = "{}",
        charts: str = ",".join(CHARTS),
        since: str = "",
        wait: float = 0.0,
        log: bool = False,
    ) -> Response:
        if not await logged_in(request):
            return _json({"error": "log in first"}, 401)
        wanted = tuple(name for name in charts.split(",") if name in CHARTS)
        try:
            lang = pick_language(request.cookies.get(COOKIE), request.headers.get("accept-language"))
            query = ChartQuery(run, smoothing, log_y, _have(have), wanted, since, wait, log, lang)
        except BadQuery as exc:
            return _json({"error": str(exc)}, 400)
        run_dir = None
        if run != NO_RUN:
            run_dir = run_of_token(runs_root, run)
            if run_dir is None:
                return _json({"error": "no such run"}, 404)
            await wait_for_change(request, run_dir, since, hold_seconds(run_dir, wait))
        # File reads and figure building go to the thread pool: the event loop serves every page's events.
        return await run_in_threadpool(charts_response, run_dir, query, policy, workspace)

    async def plotly_js(request: Request) -> Response:
        if not await logged_in(request):
            return _json({"error": "log in first"}, 401)
        return FileResponse(PLOTLY_FILE, media_type="text/javascript", headers={"Cache-Control": "max-age=86400"})

    return [
        APIRoute(CHARTS_PATH, live_charts, methods=["GET"], include_in_schema=False),
        APIRoute(PLOTLY_PATH, plotly_js, methods=["GET"], include_in_schema=False),
    ]
