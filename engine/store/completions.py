"""``completions.jsonl`` in a run directory: samples of what a run of a sampling method (Method.writes_samples)
generated, with each reward's score.

Written by the trainer at its logging steps (engine.training.methods.online.trainer), read by the Monitor's sample panel
while the run goes and after it ended. One JSON object per line, appended whole:

``{"step": 12, "time": ..., "prompt": "...", "completion": "...", "rewards": {"exact_match": 1.0, ...},
"reward": 1.5, "advantage": 0.7}`` (``reward`` is the weighted sum; a reward that did not apply is null).

Bounded: a file past ``MAX_BYTES`` is renamed to ``completions.1.jsonl`` (replacing the older one) and a new
one begun, so a run keeps at most about twice that. Standard library only.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

COMPLETIONS_FILE = "completions.jsonl"
OLDER_COMPLETIONS_FILE = "completions.1.jsonl"
MAX_BYTES = 4 * 1024 * 1024


def append_completions(run_dir: Path, samples: list[dict[str, Any]], max_bytes: int = MAX_BYTES) -> None:
    """Append samples as whole JSON lines in one write (NaN scores as null), rotating a full file first."""
    if not samples:
        return
    path = Path(run_dir) / COMPLETIONS_FILE
    if path.is_file() and path.stat().st_size >= max_bytes:
        os.replace(path, Path(run_dir) / OLDER_COMPLETIONS_FILE)
    payload = "".join(json.dumps(_finite(sample), ensure_ascii=False) + "\n" for sample in samples)
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(payload)


def latest_completions(run_dir: Path, limit: int = 200) -> list[dict[str, Any]]:
    """The newest ``limit`` samples, oldest first (from the current file, topped up from the older one)."""
    found: list[dict[str, Any]] = []
    for name in (COMPLETIONS_FILE, OLDER_COMPLETIONS_FILE):
        if len(found) >= limit:
            break
        found = _read_lines(Path(run_dir) / name)[-(limit - len(found)) :] + found
    return found


def _read_lines(path: Path) -> list[dict[str, Any]]:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return []
    samples = []
    for line in text.splitlines():
        try:
            sample = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line being written as we read
        if isinstance(sample, dict):
            samples.append(sample)
    return samples


def _finite(value: Any) -> Any:
    """``value`` with NaN and infinities (a reward that did not apply) as None, so the line is plain JSON."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_finite(item) for item in value]
    return value
