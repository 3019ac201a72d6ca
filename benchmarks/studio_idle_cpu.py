"""CPU an idle studio's server process spends with no page open: the studio as launched (``launch.py``, its queue
paced by ``studio.app.paced_queue``) against the same studio with Gradio's own queue pacing (a 1 ms idle poll on
Linux and macOS), arms alternated.

    python benchmarks/studio_idle_cpu.py [--rounds 3] [--seconds 20]

Each arm starts ``launch.py --no-standby`` on a fresh workspace, waits until it serves the page and a few seconds
more, then reads the server process's CPU time (/proc, Linux) over ``--seconds``.
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
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SETTLE_S = 5.0
# The baseline arm: launch.py with Gradio's own pacing (paced_queue swapped for a plain queue()).
GRADIO_PACING = (
    "import sys, launch, studio.app as app; app.paced_queue = lambda demo: demo.queue(); launch.main(sys.argv[1:])"
)
ARMS = {"paced": [str(ROOT / "launch.py")], "gradio": ["-c", GRADIO_PACING]}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_serving(url: str, process: subprocess.Popen, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the studio exited with {process.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise TimeoutError(f"{url} did not answer in {timeout} s")


def start_studio(command: list[str], workspace: str) -> tuple[subprocess.Popen[bytes], str]:
    """``python COMMAND`` (launch.py, or ``-c`` code that runs it) without its warm training process, on a free port,
    for ``workspace``, once it serves its page: the process and the page's URL (the process is ended if it fails)."""
    port = free_port()
    args = [*command, "--no-standby", "--port", str(port), "--workspace", workspace]
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT))
    process = subprocess.Popen([sys.executable, *args], cwd=ROOT, env=env, stdout=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/"
    try:
        wait_serving(url, process)
    except BaseException:
        process.terminate()
        process.wait(timeout=30)
        raise
    return process, url


def measure(arm: str, seconds: float) -> float:
    """CPU-seconds per 10 s of an idle studio's server process in ``arm``."""
    with tempfile.TemporaryDirectory() as workspace:
        process, _url = start_studio(ARMS[arm], workspace)
        try:
            time.sleep(SETTLE_S)
            before = cpu_seconds(process.pid)
            time.sleep(seconds)
            return (cpu_seconds(process.pid) - before) * 10 / seconds
        finally:
            process.terminate()
            process.wait(timeout=30)


def alternated(arms: list[str], rounds: int, measure: Callable[[str], float]) -> dict[str, list[float]]:
    """``measure(arm)`` (CPU-seconds per 10 s) of every arm ``rounds`` times, arms alternated (reversed every other
    round), each figure printed as it comes."""
    results: dict[str, list[float]] = {arm: [] for arm in arms}
    for round_number in range(rounds):
        for arm in arms if round_number % 2 == 0 else list(reversed(arms)):
            results[arm].append(measure(arm))
            print(f"round {round_number + 1} {arm:>6}: {results[arm][-1]:.3f} CPU-s per 10 s", flush=True)
    return results


def print_ratio(results: dict[str, list[float]], what: str, baseline: str) -> None:
    """The two arms' medians ("paced" against "gradio", named ``baseline``) and their ratio, overall and per round."""
    paced, gradio = (statistics.median(results[arm]) for arm in ("paced", "gradio"))
    ratios = [p / g for p, g in zip(results["paced"], results["gradio"], strict=True)]
    print(f"{what}, medians: paced {paced:.3f}, {baseline} {gradio:.3f} CPU-s per 10 s")
    rounds = ", ".join(f"{ratio:.2f}" for ratio in ratios)
    print(f"paced / {baseline}: {paced / gradio:.2f} of the medians, rounds {rounds}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    results = alternated(list(ARMS), args.rounds, lambda arm: measure(arm, args.seconds))
    print_ratio(results, "idle studio server", "Gradio's pacing")
    return 0


if __name__ == "__main__":
    sys.exit(main())
