"""How much longer another visitor waits while one visitor's hostile payload goes through a public demo studio.

A real demo studio serves on a port in this process. Visitor B is a separate process that watches a run's live
charts as a page does: it asks the charts route every 50 ms and reports each answer's latency. Meanwhile visitor
A's payloads go through the calls the studio makes for them, on a thread as Gradio's worker pool runs an event:
each hostile payload of benchmarks/hostile_memory.py, and a flood of anonymous uploads to Gradio's upload route
(20 files of 19 MB from one address). For ``--rounds`` rounds, B's latencies while a payload runs are compared
with B's latencies while A sends nothing for as long (arms alternated), so both arms see the same machine.

    python benchmarks/visitor_wait.py
    python benchmarks/visitor_wait.py --rounds 3

The goal (a public demo): no other visitor's request waits more than 1 s longer than usual.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hostile_memory import payloads  # noqa: E402

from studio.path_guard import gradio_upload_dir  # noqa: E402

# Visitor B: GET the charts route of one run every 50 ms; print (start time, latency) per answer as JSON lines.
WATCHER = """
import json, sys, time, urllib.request
url = sys.argv[1]
while True:
    started = time.time()
    urllib.request.urlopen(url, timeout=120).read()
    print(json.dumps([started, time.time() - started]), flush=True)
    time.sleep(0.05)
"""
UPLOAD_MB, UPLOADS = 19, 20


class Watcher:
    """Visitor B's process and the latencies it has reported."""

    def __init__(self, url: str):
        self.process = subprocess.Popen([sys.executable, "-c", WATCHER, url], stdout=subprocess.PIPE, text=True)
        self.answers: list[tuple[float, float]] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.answers.append(tuple(json.loads(line)))

    def during(self, start: float, end: float) -> list[float]:
        """Latencies of the requests that were sent or still waiting between ``start`` and ``end``."""
        return [latency for sent, latency in self.answers if sent <= end and sent + latency >= start]

    def close(self) -> None:
        self.process.kill()


def timed(call: Callable[[], Any], watcher: Watcher) -> tuple[list[float], float]:
    """B's latencies while ``call`` runs on a thread of its own (a refusal is an answer too), and how long it ran."""

    def run() -> None:
        with contextlib.suppress(Exception):  # the hostile arm is meant to be refused
            call()

    time.sleep(0.5)  # B's answers to earlier calls are in
    start = time.time()
    worker = threading.Thread(target=run)
    worker.start()
    worker.join()
    end = time.time()
    time.sleep(0.3)  # B's request still waiting at the end answers
    return watcher.during(start, end), end - start


def serve(workspace: Path) -> tuple[Any, str, str]:
    """A demo studio on a free port: it, its base URL, and the charts URL of a finished run of 2,000 points."""
    from chart_update import make_run

    from studio.app import build_app, launch_options, paced_queue
    from studio.demo.policy import DemoPolicy
    from studio.monitor.live import live_token
    from studio.monitor.routes import CHARTS_PATH

    policy = DemoPolicy(enabled=True)
    run_dir = make_run(workspace, 2000)
    demo = build_app(workspace, policy)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    options = launch_options(workspace, policy)
    paced_queue(demo).launch(server_port=port, prevent_thread_lock=True, quiet=True, **options)
    base = f"http://127.0.0.1:{port}"
    return demo, base, f"{base}{CHARTS_PATH}?run={live_token(run_dir)}&smoothing=0.6"


def upload_flood(base: str) -> Callable[[], Any]:
    """One address sends ``UPLOADS`` files of ``UPLOAD_MB`` MB to Gradio's upload route, one after another."""
    boundary = "visitor-wait"
    body = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="files"; filename="big.jsonl"\r\n\r\n'.encode()
        + b"x" * (UPLOAD_MB * 2**20)
        + f"\r\n--{boundary}--\r\n".encode()
    )

    def flood() -> None:
        for _ in range(UPLOADS):
            request = urllib.request.Request(
                f"{base}/gradio_api/upload",
                data=body,
                headers={"Content-Type": f"multipart/form-data; boundary={boundary}"},
            )
            with contextlib.suppress(urllib.error.HTTPError):  # refused past the address's hourly budget
                urllib.request.urlopen(request, timeout=120).read()

    return flood


def port_of(base: str) -> str:
    return base.rsplit(":", 1)[1]


def summary(latencies: list[float]) -> str:
    """Median, 95th percentile and largest latency, in ms."""
    if not latencies:
        return "no answers"
    ordered = sorted(latencies)
    p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
    return f"{statistics.median(ordered) * 1e3:5.0f} / {p95 * 1e3:5.0f} / {ordered[-1] * 1e3:5.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2, help="benign / hostile rounds per payload")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        demo, base, charts_url = serve(Path(scratch) / "workspace")
        watcher = Watcher(charts_url)
        try:
            while len(watcher.answers) < 20:
                time.sleep(0.1)
            files = gradio_upload_dir() / f"visitor-wait-{port_of(base)}"  # where the demo takes a visitor's file from
            files.mkdir(parents=True, exist_ok=True)
            calls = payloads(files)
            calls.append((f"{UPLOADS} anonymous uploads of {UPLOAD_MB} MB", lambda: None, upload_flood(base)))
            print(
                "B's latency, median / p95 / max in ms, while A sends nothing (for as long) and while A's payload runs"
            )
            print(f"{'payload (A)':48} {'quiet':>19} {'hostile':>19}  max - quiet max")
            for name, benign, hostile in calls:
                benign()  # imports and caches first
                seen: dict[str, list[float]] = {"quiet": [], "hostile": []}
                for _ in range(args.rounds):  # arms alternated; the quiet arm lasts as long as the hostile one
                    latencies, seconds = timed(hostile, watcher)
                    seen["hostile"] += latencies
                    seen["quiet"] += timed(lambda seconds=seconds: time.sleep(seconds), watcher)[0]
                extra = max(seen["hostile"] or [0.0]) - max(seen["quiet"] or [0.0])
                print(
                    f"{name:48} {summary(seen['quiet']):>19} {summary(seen['hostile']):>19}  {extra:+.2f} s", flush=True
                )
        finally:
            watcher.close()
            demo.close()
            shutil.rmtree(files, ignore_errors=True)


if __name__ == "__main__":
    main()
