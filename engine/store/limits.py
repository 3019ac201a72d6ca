"""Untrusted work in a child process whose limits hold: a memory cap, a CPU-time cap and a wall-clock cap.

A pattern, a template or a file from a stranger can cost gigabytes or minutes to compile or decode; in the studio's
own process that cost lands on every visitor. ``run_limited`` runs a small script (standard library plus the one
library it needs) in a child that caps itself first (``limited_child.py``) and answers on stdout. When a cap is
reached the answer is ``OverLimit``, and the caller refuses the input: there is no fallback to the unlimited path.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

BOOTSTRAP = Path(__file__).with_name("limited_child.py")


@dataclass(frozen=True)
class Limits:
    """A child's caps: its address space, its CPU seconds, and the seconds its caller waits in all (start
    included; a starved machine ends the child there, even with CPU time left)."""

    memory_bytes: int
    cpu_s: float
    wall_s: float


class OverLimit(Exception):
    """The child reached a cap: ``kind`` is "memory" or "time"."""

    def __init__(self, kind: str):
        super().__init__(f"over the {kind} limit")
        self.kind = kind


def run_limited(script: Path, payload: str, limits: Limits) -> str:
    """Run ``script`` (a Python file run as ``__main__``) under ``limits`` with ``payload`` on its stdin; its
    stdout. OverLimit when a cap ended it; RuntimeError with its last line of stderr when it failed otherwise."""
    command = [sys.executable, "-P", str(BOOTSTRAP), str(limits.memory_bytes), str(limits.cpu_s), str(script)]
    try:
        done = subprocess.run(
            command, input=payload.encode("utf-8"), capture_output=True, timeout=limits.wall_s, check=False
        )
    except subprocess.TimeoutExpired:  # subprocess.run has killed the child
        raise OverLimit("time") from None
    errors = done.stderr.decode("utf-8", "replace").strip()
    if done.returncode in (-signal.SIGXCPU, -signal.SIGKILL):
        raise OverLimit("time")
    if done.returncode != 0:
        if "MemoryError" in errors or "Cannot allocate memory" in errors or "bad_alloc" in errors:
            raise OverLimit("memory")
        raise RuntimeError(errors.splitlines()[-1] if errors else f"exit code {done.returncode}")
    return done.stdout.decode("utf-8", "replace")
