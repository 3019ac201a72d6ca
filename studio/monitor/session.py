"""The Monitor's per-browser-session logic: which panels changed since the last update, and their new values.

One ``MonitorSession`` lives in a ``gr.State`` per browser tab. Each timer tick asks it for an update; it reads
the run's status, and returns None for every output that has not changed (the Gradio layer turns None into
gr.skip()). What changes with every logged step (the charts, the progress bar, the stats, the log) is not among
them: the page script draws that from studio.monitor.live, and finds the run in the header's ``data-live``
token.
"""

from __future__ import annotations

import dataclasses
import hashlib
import threading
import time
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from engine.api import CONFIG_FILE, RunStatus, requests, runs
from studio.demo.caller import Caller
from studio.i18n.catalog import SOURCE
from studio.monitor.live import live_token
from studio.monitor.view import REQUEST_STATES, Controls, controls_for, empty_html, error_html, header_html

NO_CONTROLS = Controls(stop=False, resume=False, abort=False)


@dataclass
class MonitorUpdate:
    """New values for the Monitor's outputs; None means unchanged (send nothing)."""

    header: str | None = None
    error: str | None = None
    config: str | None = None
    controls: Controls | None = None

    def changed(self) -> list[str]:
        """Names of the outputs that carry a new value."""
        return [f.name for f in fields(self) if getattr(self, f.name) is not None]

    def shown(self, caller: Caller) -> MonitorUpdate:
        """This update as the caller's page may show it: in demo mode the run's error, log tail and config.yaml
        name files as the visitor knows them (``mine.jsonl``, ``workspace/runs/...``), not by their server
        paths."""
        if not caller.policy.enabled:
            return self
        texts = {name: caller.shown(getattr(self, name)) for name in ("header", "error", "config")}
        return dataclasses.replace(self, **texts)


# Every output again after this long, whatever was sent: a page applies two events' outputs in the order their
# answers arrive, so a tab switch's redraw that answers after the next poll leaves the older header on the page
# while this session believes it sent the newer one (seen: a run's badge stuck at "starting" until its end).
RESEND_SECONDS = 5.0


class MonitorSession:
    """What one browser tab has shown: the run, its status, and a key per output of what was sent."""

    def __init__(self, resend_seconds: float = RESEND_SECONDS) -> None:
        self.lock = threading.Lock()  # a timer tick and a button's refresh may run at the same time
        self.run_dir: str | None = None
        self.status = RunStatus()
        self._sent: dict[str, Any] = {}
        self.resend_seconds = resend_seconds
        self._everything_at = time.monotonic()  # when every output was last sent

    def update(self, run_dir: str | None, lang: str = SOURCE) -> MonitorUpdate:
        """Poll the run and return what changed since the previous call (everything, after a run switch), its words
        in ``lang`` (a page that switched its language gets the header and error again)."""
        with self.lock:
            if run_dir != self.run_dir:
                self.run_dir, self._sent = run_dir, {}
            if time.monotonic() - self._everything_at >= self.resend_seconds:
                self._sent = {}
            if not self._sent:
                self._everything_at = time.monotonic()
            update = MonitorUpdate()
            if not run_dir or not (Path(run_dir) / CONFIG_FILE).is_file():
                self.status = RunStatus()
                self._empty(update, lang)
                return update
            self.status = runs.status(Path(run_dir))
            self._panels(update, lang)
            return update

    def forget_sent(self) -> None:
        """Make the next update send every output, as if to a fresh page."""
        with self.lock:
            self._sent = {}

    def _put(self, update: MonitorUpdate, name: str, key: Any, make: Any) -> None:
        """Set ``name`` on the update when its key differs from what was last sent (``make`` builds the value)."""
        if self._sent.get(name, object()) != key:
            self._sent[name] = key
            setattr(update, name, make())

    def _empty(self, update: MonitorUpdate, lang: str) -> None:
        empty = empty_html(lang)
        self._put(update, "header", empty, lambda: empty)
        for name in ("error", "config"):
            self._put(update, name, "", lambda: "")
        self._put(update, "controls", NO_CONTROLS, lambda: NO_CONTROLS)

    def _panels(self, update: MonitorUpdate, lang: str) -> None:
        run_dir = Path(self.run_dir)
        header, error, controls = monitor_view(run_dir, self.status, lang)
        self._put(update, "header", header, lambda: header)
        self._put(update, "error", error, lambda: error)
        self._put(update, "controls", controls, lambda: controls)
        self._put(update, "config", str(run_dir), lambda: _read_text(run_dir / CONFIG_FILE))


def monitor_view(run_dir: Path, status: RunStatus, lang: str = SOURCE) -> tuple[str, str, Controls]:
    """The header, the error box and the buttons of a run in ``status``, in ``lang``: what the Monitor's Gradio
    outputs show (the charts and panels aside). The header carries their key (``monitor_key``)."""
    run_dir = Path(run_dir)
    key, error, controls = _view(run_dir, status, lang)
    return header_html(status, run_dir.name, live_token(run_dir), lang, key), error, controls


def monitor_key(run_dir: Path, status: RunStatus, lang: str = SOURCE) -> str:
    """A short key that changes whenever ``monitor_view`` does, and which its header carries (``data-monitor``).

    The page script (assets/live_charts.js) gets it with every charts answer and, when it differs from the
    header's, asks for the Monitor's Gradio refresh: the run started, paused, stopped or ended. This replaces a
    timer that sent an event every second (each costs the browser's main thread 65 ms or more, and a chart point
    that arrives meanwhile waits).
    """
    return _view(Path(run_dir), status, lang)[0]


def _view(run_dir: Path, status: RunStatus, lang: str) -> tuple[str, str, Controls]:
    """The key, the error box and the buttons. The key is of the header's words (name, badge, id: its state), the
    error box and the buttons; the charts route needs only the key, so the header itself is made by
    ``monitor_view`` alone."""
    asked = status.state in REQUEST_STATES and requests.pause_requested(run_dir)  # Continue before it waits
    error, controls = error_html(status, lang), controls_for(status, asked)
    view = repr((header_html(status, run_dir.name, lang=lang), error, controls))
    return hashlib.blake2b(view.encode(), digest_size=8).hexdigest(), error, controls


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return ""
