"""Helpers of the end-to-end tests: a studio subprocess, waiting, the demo run config, browser settings."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine.config import parse_config
from engine.store.paths import PROJECT_ROOT
from tests.helpers.machine_load import load_factor

CHROMIUM = Path(os.environ.get("STUDIO_E2E_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
ARTIFACTS = PROJECT_ROOT / "test-artifacts" / "e2e"
TIMINGS = bool(os.environ.get("STUDIO_E2E_TIMINGS"))  # print how long each wait_until took (with pytest -s)
VIEWPORT = {"width": 1366, "height": 768}  # a common laptop screen: the page must look good here


# How long a page's action (a click, a wait for an element, a download) may take before it fails: Playwright's own
# default of 30 s was too short for a page's first load beside two busy programs on 2 cores. A generous deadline
# costs nothing while things work: the action returns as soon as it can.
PAGE_TIMEOUT_MS = 120_000
EXPORT_TIMEOUT_MS = 300_000  # a whole export job, from its click to its download button


class PatientBrowser:
    """The Chromium of the tests, whose pages and contexts wait up to PAGE_TIMEOUT_MS for each action."""

    def __init__(self, browser: Any):
        self._browser = browser

    def new_page(self, **options: Any) -> Any:
        page = self._browser.new_page(**options)
        page.set_default_timeout(PAGE_TIMEOUT_MS)
        return page

    def new_context(self, **options: Any) -> Any:
        context = self._browser.new_context(**options)
        context.set_default_timeout(PAGE_TIMEOUT_MS)
        return context

    def __getattr__(self, name: str) -> Any:
        return getattr(self._browser, name)


def wait_for_form(page: Any, state: str = "visible") -> None:
    """Wait for the Train form (its Start button in ``state``) and for the kept form to be restored into it (the
    page's data-form-ready, studio.train.kept_form.FORM_READY): a field not typed into may change until then."""
    page.locator("#train-start").wait_for(state=state)
    page.locator("html[data-form-ready]").wait_for(state="attached")


def wait_until(check: Callable[[], Any], timeout: float, interval: float = 0.2, what: str = "condition") -> Any:
    """Poll ``check`` until it returns something truthy; fail with ``what`` after ``timeout`` seconds, stretched
    by how busy the machine is (``load_factor``): these waits say "it happens", never how fast."""
    timeout *= load_factor()
    began = time.time()
    deadline = began + timeout
    while True:
        value = check()
        if value:
            if TIMINGS:
                print(f"[{time.strftime('%H:%M:%S')}] waited {time.time() - began:5.1f}s for {what}", flush=True)
            return value
        if time.time() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} (load {os.getloadavg()[0]:.1f})")
        time.sleep(interval)


# What the Monitor shows, for a failure message: the header's run and key, the loss chart's steps and key, and how
# many chart elements there are (Gradio may have drawn the chart's HTML again).
MONITOR_STATE_JS = """() => {
  const head = document.querySelector('.ts-run-head[data-live]');
  const plot = document.querySelector('#ts-loss-chart .js-plotly-plot');
  const div = document.querySelector('[data-live-chart="loss"]');
  const trace = plot && plot.data && plot.data.find((t) => t.name === 'train loss');
  const x = trace ? trace.x : [];
  return {header: head && head.dataset.live, monitor: head && head.dataset.monitor, chart_key: div && div.dataset.key,
          points: x.length, first: x[0], last: x[x.length - 1], visible: !!(div && div.offsetParent),
          charts: document.querySelectorAll('[data-live-chart="loss"]').length,
          progress: document.querySelector('[data-live-panel="progress"]')?.innerText};
}"""


def monitor_state(page: Any) -> dict[str, Any]:
    """What the Monitor shows now (MONITOR_STATE_JS), for a failure message."""
    return page.evaluate(MONITOR_STATE_JS)


class Studio:
    """``python launch.py`` in a subprocess, as a user starts it; can be killed and started again."""

    def __init__(self, workspace: Path, port: int, extra_args: tuple[str, ...] = ()):
        self.workspace, self.port, self.extra_args = workspace, port, extra_args
        self.url = f"http://127.0.0.1:{port}/"
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0
        # Beside the workspace (each worker's own temporary folder): a failed test copies it to the artifacts.
        self.log_path = workspace.parent / f"studio-{workspace.name}.log"

    def start(self, timeout: float = 90) -> float:
        """Start it and wait for the first HTTP 200; returns the seconds that took. Its output goes to
        ``log_path``, each start's after the one before."""
        self.starts += 1
        began = time.time()
        with self.log_path.open("ab") as log:  # the studio keeps its own copy of the file
            log.write(f"--- start {self.starts} on port {self.port}\n".encode())
            log.flush()
            command = [sys.executable, "launch.py", "--port", str(self.port), "--workspace", str(self.workspace)]
            self.process = subprocess.Popen(
                [*command, *self.extra_args],
                cwd=PROJECT_ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=dict(os.environ, HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1"),
            )
        wait_until(self._serves, timeout, 0.2, "the studio to serve its page")
        return time.time() - began

    def _serves(self) -> bool:
        if self.process and self.process.poll() is not None:
            raise AssertionError(f"the studio exited with {self.process.returncode}; see {self.log_path}")
        try:
            with urllib.request.urlopen(self.url, timeout=2) as response:
                return response.status == 200
        except OSError:
            return False

    def kill(self) -> None:
        """SIGKILL, as a crash or a closed terminal would: no chance to clean anything up."""
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)


def demo_config(name: str, max_steps: int, batch_size: int = 4) -> Any:
    """The demo model on a small slice of the demo data: quick steps, a checkpoint every 10."""
    return parse_config(
        {
            "name": name,
            "data": {"path": "assets/datasets/demo_sft_train.jsonl", "max_samples": 64, "eval_size": 8},
            "train": {
                "max_steps": max_steps,
                "per_device_batch_size": batch_size,
                "learning_rate": 3e-3,
                "max_length": 64,
                "save_steps": 10,
                "logging_steps": 1,
                "eval_strategy": "steps",
                "eval_steps": 10,
                "eval_batch_size": 8,
            },
        }
    )
