"""``python -m engine check`` in a subprocess, as a user runs it (a fresh process: imports, exit code, stderr)."""

from __future__ import annotations

import os
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
