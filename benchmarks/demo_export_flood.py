"""What one demo visitor's Export button, pressed again and again, costs the machine: the export processes that run
at once and the disk the exports hold.

One visitor owns a finished demo run (the demo preset cut to 20 steps, trained once through the CLI) and presses
Export (merged, float32) through the Export tab's own handler, as their page does: first N times without waiting
(each press a new request, as a script or an impatient visitor sends them), then N times waiting for each export
to end. Printed for each: the exports started and refused, the most export processes running at once, and what
``WORKSPACE/exports`` holds at the end.

    python benchmarks/demo_export_flood.py [--presses 8]
    PYTHONPATH=/path/to/older/tree python benchmarks/demo_export_flood.py     # the same presses on another tree
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from engine.runs import jobs  # noqa: E402 (after the offline switch)
from engine.store.paths import PROJECT_ROOT  # noqa: E402
from engine.store.rundir import update_status  # noqa: E402
from studio.demo.caller import Caller  # noqa: E402
from studio.demo.identity import mint_token  # noqa: E402
from studio.demo.policy import DemoPolicy, owner_tag  # noqa: E402
from studio.demo.quota import tree_bytes  # noqa: E402
from studio.export import tab as export_tab  # noqa: E402

RUN_ID = "demo-run"
STEPS = 20


def train_run(run_dir: Path) -> None:
    """The demo preset at STEPS steps, trained through ``python -m engine train``."""
    config = yaml.safe_load((PROJECT_ROOT / "assets" / "presets" / "demo.yaml").read_text())
    config["train"].update(max_steps=STEPS, save_steps=STEPS, eval_steps=STEPS)
    config_path = run_dir.parent.parent / "demo.yaml"
    config_path.write_text(yaml.safe_dump(config))
    command = [sys.executable, "-m", "engine", "train", str(config_path), "--run-dir", str(run_dir)]
    subprocess.run(command, check=True, capture_output=True, cwd=PROJECT_ROOT)


def running(job_dirs: list[str]) -> int:
    """How many of the jobs are still going."""
    return sum(jobs.status(Path(job_dir)).is_running for job_dir in job_dirs)


def press(caller: Caller, presses: int, wait: bool) -> str:
    """Press Export ``presses`` times (waiting for each export to end when ``wait``); what it cost, in words."""
    shutil.rmtree(caller.workspace / "exports", ignore_errors=True)
    started, refused, most = [], [], 0
    for _ in range(presses):
        outputs = export_tab.start_clicked(caller, RUN_ID, "", "merged", "float32", "", "", "", True)
        (started if outputs[0] else refused).append(outputs[0] or outputs[2])
        most = max(most, running(started))
        if wait and outputs[0]:
            jobs.wait(Path(outputs[0]))
    while count := running(started):
        most = max(most, count)
        time.sleep(0.1)
    held = tree_bytes(caller.workspace / "exports") / 2**20
    said = f"; refused: {re.sub('<[^>]+>', '', refused[0])}" if refused else ""  # the message's text, no markup
    return f"{len(started)} started, {len(refused)} refused, at most {most} at once, exports/ {held:.1f} MB{said}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--presses", type=int, default=8)
    args = parser.parse_args()
    key = secrets.token_bytes(32)
    visitor = mint_token(key)
    with tempfile.TemporaryDirectory() as folder:
        workspace = Path(folder) / "workspace"
        run_dir = workspace / "runs" / RUN_ID
        run_dir.parent.mkdir(parents=True)
        train_run(run_dir)
        update_status(run_dir, owner=owner_tag(visitor))
        caller = Caller(workspace, DemoPolicy(enabled=True, key=key), visitor)
        print(f"tree: {Path(export_tab.__file__).parents[2]}")
        print(f"{args.presses} presses at once:        {press(caller, args.presses, wait=False)}")
        print(f"{args.presses} presses, one after another: {press(caller, args.presses, wait=True)}")


if __name__ == "__main__":
    main()
