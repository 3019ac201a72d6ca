"""The base model's benchmark scores, kept per (base model, task, settings) in the workspace, so that benchmarking a
second run of the same base does not score the base again.

``WORKSPACE/benchmarks/base/<task>-<key>.json``::

    {"key": {"model", "task", "settings", "lm_eval"}, "created_at", "rows": [...]}

``key`` holds what the scores depend on: the base model (its name, or its folder with the size and time of every
weight file, so a changed local model is scored afresh; its dtype and quantization), the task (a task file's and a
held-out task's own bytes, an lm-eval task's name and the lm-eval version), and the settings (limit, few-shot
examples, chat template, answer budget). ``rows`` are the task's result rows for the base as the benchmark result
holds them (engine.evaluate.benchmarks.results). Standard library only.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

from engine.data.loading import resolve_path
from engine.runs.artifacts import FinishedRun, TrainedWeights
from engine.store.rundir import write_text_atomic

CACHE_DIR = "benchmarks/base"
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".gguf")


def cache_dir(workspace: Path) -> Path:
    """Where a workspace keeps base scores."""
    return Path(workspace) / CACHE_DIR


def _files_of(folder: Path) -> list[list[Any]]:
    """Name, size and modification time of a folder's weight and config files: what changes when the model does."""
    files = [p for p in sorted(folder.iterdir()) if p.suffix in WEIGHT_SUFFIXES or p.name == "config.json"]
    return [[p.name, p.stat().st_size, p.stat().st_mtime_ns] for p in files if p.is_file()]


def model_identity(run: FinishedRun, start: TrainedWeights | None) -> dict[str, Any]:
    """What the base arm's scores depend on: the base model as the run loads it, or the run it started from."""
    model = run.config.model
    folder = resolve_path(model.name_or_path)  # a local model (as given, from the cwd or the project), else a hub id
    local = folder is not None and folder.is_dir()
    identity: dict[str, Any] = {
        "name_or_path": str(folder.resolve()) if local else model.name_or_path,
        "revision": model.revision,
        "dtype": str(model.dtype),
        "quantization": run.config.quantization.model_dump(mode="json"),
    }
    if local:
        identity["files"] = _files_of(folder)
    if start is not None:
        identity["start"] = {"path": str(start.path), "files": _files_of(start.path)}
    return identity


def file_digest(*paths: Path) -> str:
    """A digest of some files' bytes (a task file, its data)."""
    digest = hashlib.sha256()
    for path in paths:
        digest.update(Path(path).read_bytes())
    return digest.hexdigest()


def cache_key(model: dict[str, Any], task: dict[str, Any], settings: dict[str, Any], lm_eval: str) -> dict[str, Any]:
    """The fields one cached score belongs to."""
    return {"model": model, "task": task, "settings": settings, "lm_eval": lm_eval}


def _path(workspace: Path, key: dict[str, Any]) -> Path:
    text = json.dumps(key, sort_keys=True, default=str)
    slug = "".join(c if c.isalnum() or c in "-_." else "_" for c in str(key["task"].get("name", "task")))[:60]
    return cache_dir(workspace) / f"{slug}-{hashlib.sha256(text.encode()).hexdigest()[:20]}.json"


def read_cached(workspace: Path, key: dict[str, Any]) -> tuple[list[dict[str, Any]], Path] | None:
    """The cached base rows for ``key`` and their file, or None (none yet, or a file that cannot be read)."""
    path = _path(workspace, key)
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    if json.dumps(record.get("key"), sort_keys=True, default=str) != json.dumps(key, sort_keys=True, default=str):
        return None  # a hash collision, or a file edited by hand: score afresh
    return record["rows"], path


def write_cached(workspace: Path, key: dict[str, Any], rows: list[dict[str, Any]]) -> Path:
    """Keep the base rows for ``key`` (atomically); returns the file."""
    path = _path(workspace, key)
    write_text_atomic(path, json.dumps({"key": key, "created_at": time.time(), "rows": rows}, indent=1, default=str))
    return path
