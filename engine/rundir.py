"""The run directory contract: file names, atomic status writes and append-only metrics.

Every write here is atomic (write a temporary file, then rename) or append-only with whole lines, so a reader
in another process never sees half a status or half a metrics line. Only the standard library is imported:
the supervisor and the studio read these files without paying for torch.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

CONFIG_FILE = "config.yaml"
STATUS_FILE = "status.json"
METRICS_FILE = "metrics.jsonl"
LOG_FILE = "train.log"
CHECKPOINTS_DIR = "checkpoints"
ADAPTER_DIR = "adapter"
MODEL_DIR = "model"

ACTIVE_STATES = ("queued", "starting", "running", "stopping")
FINAL_STATES = ("stopped", "completed", "failed")


def write_text_atomic(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` so that readers see either the old or the new content, never a mix."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_status(run_dir: Path) -> dict[str, Any]:
    """The raw status.json of a run ({} if it has none yet). Use engine.runs.status for the reconciled view."""
    try:
        return json.loads((run_dir / STATUS_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except json.JSONDecodeError:
        # Only a hand-edited file can be half-written (writes are atomic); treat it as unknown.
        return {}


def update_status(run_dir: Path, **changes: Any) -> dict[str, Any]:
    """Merge ``changes`` into status.json and write it atomically; returns the new status."""
    status = read_status(run_dir)
    status.update(changes)
    status["updated_at"] = time.time()
    write_text_atomic(run_dir / STATUS_FILE, json.dumps(status, indent=1, sort_keys=True))
    return status


def append_metrics(run_dir: Path, events: list[dict[str, Any]]) -> None:
    """Append events as whole JSON lines in one write, so a tailing reader never sees half a line."""
    if not events:
        return
    payload = "".join(json.dumps(event, allow_nan=True) + "\n" for event in events).encode("utf-8")
    fd = os.open(run_dir / METRICS_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, payload)
    finally:
        os.close(fd)


def read_metrics(run_dir: Path, offset: int = 0) -> tuple[list[dict[str, Any]], int]:
    """Events appended since byte ``offset`` and the offset to pass next time.

    Reads only the new bytes (the cost does not grow with the run's length) and stops at the last complete
    line, so a line being written is picked up whole on the next call.
    """
    path = run_dir / METRICS_FILE
    try:
        with path.open("rb") as handle:
            handle.seek(offset)
            chunk = handle.read()
    except FileNotFoundError:
        return [], offset
    end = chunk.rfind(b"\n") + 1
    events = [json.loads(line) for line in chunk[:end].splitlines() if line.strip()]
    return events, offset + end


def iter_metrics(run_dir: Path) -> Iterator[dict[str, Any]]:
    """Every event of a run, in order."""
    events, _ = read_metrics(run_dir, 0)
    yield from events


def log_tail(run_dir: Path, max_bytes: int = 4000) -> str:
    """The last ``max_bytes`` of train.log, decoded leniently (a log may hold any bytes)."""
    path = run_dir / LOG_FILE
    try:
        size = path.stat().st_size
        with path.open("rb") as handle:
            handle.seek(max(0, size - max_bytes))
            return handle.read().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return ""


def checkpoint_steps(run_dir: Path) -> list[int]:
    """Steps of the complete checkpoints of a run, ascending.

    A checkpoint counts only once Trainer has written its trainer_state.json (the last file it saves), so a
    checkpoint cut short by a crash is never resumed from.
    """
    root = run_dir / CHECKPOINTS_DIR
    steps = []
    for child in root.glob("checkpoint-*") if root.is_dir() else []:
        suffix = child.name.removeprefix("checkpoint-")
        if suffix.isdigit() and (child / "trainer_state.json").is_file():
            steps.append(int(suffix))
    return sorted(steps)


def checkpoint_path(run_dir: Path, step: int) -> Path:
    """The directory of the checkpoint saved at ``step``."""
    return run_dir / CHECKPOINTS_DIR / f"checkpoint-{step}"
