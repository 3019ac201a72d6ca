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
