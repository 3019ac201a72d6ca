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
VIEWPORT = {"width": 1366, "height": 768}  # a common laptop screen: the page must look good here


def wait_until(check: Callable[[], Any], timeout: float, interval: float = 0.2, what: str = "condition") -> Any:
    """Poll ``check`` until it returns something truthy; fail with ``what`` after ``timeout`` seconds, stretched
    by how busy the machine is (``load_factor``): these waits say "it happens", never how fast."""
    timeout *= load_factor()
    deadline = time.time() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.time() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} (load {os.getloadavg()[0]:.1f})")
        time.sleep(interval)


class Studio:
    """``python launch.py`` in a subprocess, as a user starts it; can be killed and started again."""

    def __init__(self, workspace: Path, port: int, extra_args: tuple[str, ...] = ()):
        self.workspace, self.port, self.extra_args = workspace, port, extra_args
        self.url = f"http://127.0.0.1:{port}/"
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self, timeout: float = 90) -> float:
        """Start it and wait for the first HTTP 200; returns the seconds that took."""
        self.starts += 1
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        log = (ARTIFACTS / f"studio-{self.starts}.log").open("wb")
        began = time.time()
        self.process = subprocess.Popen(
            [
                sys.executable,
                "launch.py",
                "--port",
                str(self.port),
                "--workspace",
                str(self.workspace),
                *self.extra_args,
            ],
            cwd=PROJECT_ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=dict(os.environ, HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1"),
        )
        wait_until(self._serves, timeout, 0.2, "the studio to serve its page")
        return time.time() - began

    def _serves(self) -> bool:
        if self.process and self.process.poll() is not None:
            raise AssertionError(f"the studio exited with {self.process.returncode}; see {ARTIFACTS}")
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
