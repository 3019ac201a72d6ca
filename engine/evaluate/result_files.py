"""A folder of JSON results in a run directory, one file per result named by a sortable id: what Evaluate
(``evaluations/``) and Benchmarks (``benchmarks/``) keep. Standard library only."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from engine.store.ids import time_id
from engine.store.rundir import write_text_atomic


def result_header(run_id: str, weights: str, began: float) -> dict[str, Any]:
    """The fields every result starts with: a new id, when it was made, how long it took since ``began`` (a
    ``time.time()``), the run's id and the weights scored (adapter, model, checkpoint-N)."""
    now = time.time()
    return {
        "id": time_id(),  # sortable: the newest result sorts last, within one second too
        "created_at": now,
        "seconds": round(now - began, 2),
        "run_id": run_id,
        "weights": weights,
    }


def save_result(folder: Path, result: dict[str, Any]) -> Path:
    """Write one result (with its ``id``) atomically, so a reader never sees half of it; returns its path."""
    path = Path(folder) / f"{result['id']}.json"
    write_text_atomic(path, json.dumps(result, indent=1, allow_nan=True))
    return path


def list_results(folder: Path) -> list[Path]:
    """The result files of a folder, newest first."""
    return sorted(Path(folder).glob("*.json"), reverse=True) if Path(folder).is_dir() else []


def read_result(path: Path) -> dict[str, Any] | None:
    """One result, or None when it cannot be read."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
