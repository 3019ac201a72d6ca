"""GGUF export of the demo run: cold from the command line against the studio's way (a job forked from the warm
server, engine.store.forks), arms alternated.

A 60-step demo run is trained first (tests.helpers.demo_run's settings). Each round then exports it to q8_0 twice:
``python -m engine export RUN --kind gguf`` in a fresh process (imports torch, transformers, peft and gguf), and
``engine.export.exports.start_export`` as the Export tab starts it, with the fork server brought up before the first
round as a studio does when it opens. Wall seconds from start to the finished file, per arm. Keep the machine
otherwise idle.

    python benchmarks/gguf_export.py              # 3 rounds
    python benchmarks/gguf_export.py --rounds 5
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import yaml  # noqa: E402

from engine.export.exports import plan_export, start_export  # noqa: E402
from engine.runs import jobs  # noqa: E402
from engine.store import forks  # noqa: E402
from engine.store.processes import engine_env  # noqa: E402
from tests.helpers.demo_run import demo_config  # noqa: E402


def train(workspace: Path) -> Path:
    """The 60-step demo run in ``workspace``."""
    run_dir = workspace / "runs" / "demo-run"
    config = workspace / "demo.yaml"
    config.write_text(yaml.safe_dump(demo_config()))
    command = [sys.executable, "-m", "engine", "train", str(config), "--run-dir", str(run_dir)]
    subprocess.run(command, cwd=ROOT, check=True, capture_output=True, env=engine_env())
    return run_dir


def cold(run_dir: Path, name: str) -> float:
    """Seconds for the command-line export in a fresh process."""
    started = time.monotonic()
    command = [sys.executable, "-m", "engine", "export", str(run_dir), "--kind", "gguf", "--out", name]
    subprocess.run(command, cwd=ROOT, check=True, capture_output=True, env={**engine_env(), forks.SWITCH_ENV: "0"})
    return time.monotonic() - started


def warm(run_dir: Path, name: str) -> float:
    """Seconds for the export job the Export tab starts (forked from the warm server)."""
    started = time.monotonic()
    status = jobs.wait(start_export(plan_export(run_dir, kind="gguf", out=name), make_zip=False), timeout=300)
    if status.state != "completed":
        raise SystemExit(f"the warm export failed: {status.error}")
    return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    workspace = Path(tempfile.mkdtemp(prefix="gguf-export-"))
    try:
        run_dir = train(workspace)
        os.environ[forks.SWITCH_ENV] = "1"
        if not forks.prepare(holder=os.getpid()) or not forks.wait_for_server(forks.server_key(engine_env()), 120):
            raise SystemExit("the fork server did not come up")
        times: dict[str, list[float]] = {"cold": [], "warm": []}
        for round_number in range(args.rounds):
            for arm, export in (("cold", cold), ("warm", warm))[:: 1 if round_number % 2 == 0 else -1]:
                times[arm].append(export(run_dir, f"{arm}-{round_number}"))
            print(f"round {round_number + 1}: cold {times['cold'][-1]:.2f} s, warm {times['warm'][-1]:.2f} s")
        cold_median, warm_median = statistics.median(times["cold"]), statistics.median(times["warm"])
        print(
            f"median: cold {cold_median:.2f} s, warm {warm_median:.2f} s; cold / warm {cold_median / warm_median:.1f}"
        )
    finally:
        shutil.rmtree(workspace, ignore_errors=True)


if __name__ == "__main__":
    main()
