"""Cold start of the studio against a bare Gradio app: process start to the first HTTP 200 of the page.

The studio may cost at most 1.0 s more than a bare app (it must not import torch or the training libraries).
Both arms run as fresh processes, alternated round by round in one invocation because these machines are
noisy, and the medians are compared.

    python benchmarks/studio_cold_start.py               # 5 rounds
    python benchmarks/studio_cold_start.py --rounds 7 --limit 1.0   # exit 1 if the studio costs more
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

BARE_APP = """
import sys
import gradio as gr

with gr.Blocks() as demo:
    gr.Markdown("# hello")
    gr.Textbox(label="name")
demo.launch(server_name="127.0.0.1", server_port=int(sys.argv[1]))
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def time_to_first_200(command: list[str], port: int, timeout: float = 120) -> float:
    """Start ``command``, poll its page until it answers 200, stop it; returns the seconds to the 200."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", GRADIO_ANALYTICS_ENABLED="False")
    began = time.perf_counter()
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while time.perf_counter() - began < timeout:
            if process.poll() is not None:
                raise RuntimeError(f"{command} exited with {process.returncode}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1) as response:
                    if response.status == 200:
                        return time.perf_counter() - began
            except OSError:
                time.sleep(0.02)
        raise TimeoutError(f"{command} did not serve within {timeout}s")
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--limit", type=float, default=1.0, help="allowed extra seconds for the studio")
    args = parser.parse_args()
    times: dict[str, list[float]] = {"bare gradio": [], "studio": []}
    with tempfile.TemporaryDirectory() as workspace:
        arms = {
            "bare gradio": lambda port: [sys.executable, "-c", BARE_APP, str(port)],
            "studio": lambda port: [sys.executable, "launch.py", "--port", str(port), "--workspace", workspace],
        }
        for round_no in range(1, args.rounds + 1):
            order = list(arms) if round_no % 2 else list(reversed(arms))  # alternate who goes first
            for name in order:
                port = free_port()
                times[name].append(time_to_first_200(arms[name](port), port))
            print(f"round {round_no}: " + ", ".join(f"{name} {times[name][-1]:.2f}s" for name in arms), flush=True)
    medians = {name: statistics.median(values) for name, values in times.items()}
    extra = medians["studio"] - medians["bare gradio"]
    for name, median in medians.items():
        print(f"{name:12s} median {median:.2f}s  (min {min(times[name]):.2f}s, max {max(times[name]):.2f}s)")
    verdict = "OK" if extra <= args.limit else "TOO SLOW"
    print(f"studio - bare = {extra:+.2f}s (limit {args.limit:.1f}s): {verdict}")
    return 0 if extra <= args.limit else 1


if __name__ == "__main__":
    sys.exit(main())
