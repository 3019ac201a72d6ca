"""``python -m engine`` commands in a subprocess, as a user runs them (a fresh process: imports, exit code,
stderr), and a terminal's Ctrl-C for one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from engine.store.paths import PROJECT_ROOT


def run_check(config: Path, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run ``python -m engine check CONFIG`` from ``cwd`` (offline), capturing its output as text."""
    return subprocess.run(
        [sys.executable, "-m", "engine", "check", str(config)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env=dict(os.environ, PYTHONPATH=str(PROJECT_ROOT), HF_HUB_OFFLINE="1"),
    )


def run_train(config: Path, run_dir: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Run ``python -m engine train CONFIG --run-dir RUN_DIR`` in the foreground from the project root (offline),
    capturing its output as text."""
    return subprocess.run(
        [sys.executable, "-m", "engine", "train", str(config), "--run-dir", str(run_dir)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=PROJECT_ROOT,
        env=dict(os.environ, PYTHONPATH=str(PROJECT_ROOT), HF_HUB_OFFLINE="1"),
    )


def ctrl_c_as_in_a_terminal() -> None:
    """A ``preexec_fn``: SIGINT in the child as a terminal's program gets it. The test run may have been started
    with SIGINT ignored (a non-interactive shell's background job is), an ignored signal stays ignored across exec,
    and Python then installs no KeyboardInterrupt: a command that relies on it would not see the test's Ctrl-C."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
