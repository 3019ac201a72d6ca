"""Where a run's weights live: its checkpoints (checkpoints/checkpoint-N, listed only once whole) and its final
result (adapter/ or model/)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from engine.store.rundir.files import ADAPTER_DIR, CHECKPOINTS_DIR, MODEL_DIR

WEIGHT_FILES = ("*.safetensors", "*.bin")
TRAINER_STATE_FILE = "trainer_state.json"


def result_dir(run_dir: Path, is_adapter: bool) -> Path:
    """Where a run's final result lives: ``adapter/`` for a LoRA run, ``model/`` for a full or freeze run."""
    return run_dir / (ADAPTER_DIR if is_adapter else MODEL_DIR)


def has_weights(directory: Path) -> bool:
    """Whether ``directory`` holds saved weights (safetensors, or the older ``*.bin``)."""
    return directory.is_dir() and any(any(directory.glob(pattern)) for pattern in WEIGHT_FILES)


def final_weights(run_dir: Path, is_adapter: bool) -> Path | None:
    """The run's final result directory once it holds weights; None before the run has completed."""
    target = result_dir(run_dir, is_adapter)
    return target if has_weights(target) else None


def _checkpoint_dirs(run_dir: Path) -> dict[int, Path]:
    """step -> directory of every checkpoint-N directory, complete or not."""
    root = run_dir / CHECKPOINTS_DIR
    found = {}
    for child in root.glob("checkpoint-*") if root.is_dir() else []:
        suffix = child.name.removeprefix("checkpoint-")
        if suffix.isdigit() and child.is_dir():
            found[int(suffix)] = child
    return found


# (path, mtime_ns, size) -> whether that trainer_state.json is whole: status polls stat it, not parse it again.
_complete_cache: dict[tuple[str, int, int], bool] = {}


def _is_complete(checkpoint: Path, step: int) -> bool:
    """Whether Trainer finished writing ``checkpoint``.

    Trainer writes a checkpoint in place and trainer_state.json last, each file raising on failure; so a
    checkpoint is whole once that file is whole: valid JSON for this very step. A crash or a full disk while
    writing it leaves a truncated file, which does not parse.
    """
    path = checkpoint / TRAINER_STATE_FILE
    try:
        info = path.stat()
    except OSError:
        return False
    key = (str(path), info.st_mtime_ns, info.st_size)
    if key not in _complete_cache:
        if len(_complete_cache) > 4096:  # a long-lived studio sees many checkpoints come and go
            _complete_cache.clear()
        try:
            state = json.loads(path.read_bytes())
            _complete_cache[key] = isinstance(state, dict) and state.get("global_step") == step
        except (OSError, ValueError):
            return False  # unreadable now; asked again next time
    return _complete_cache[key]


def checkpoint_epoch(run_dir: Path, step: int) -> float | None:
    """The epoch the checkpoint saved at ``step`` reached (its trainer_state.json); None when it cannot be read."""
    try:
        return float(json.loads((checkpoint_path(run_dir, step) / TRAINER_STATE_FILE).read_bytes())["epoch"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def checkpoint_steps(run_dir: Path) -> list[int]:
    """Steps of the complete checkpoints of a run, ascending; a half-written one is never listed (resumed from)."""
    return sorted(step for step, path in _checkpoint_dirs(run_dir).items() if _is_complete(path, step))


def incomplete_checkpoints(run_dir: Path) -> list[Path]:
    """Checkpoint directories whose writing was cut short (crash, kill, full disk)."""
    return [path for step, path in sorted(_checkpoint_dirs(run_dir).items()) if not _is_complete(path, step)]


def remove_checkpoint(path: Path) -> None:
    """Delete a checkpoint directory; it is renamed out of the checkpoint-N pattern first, so a reader that
    lists checkpoints meanwhile never sees half a deletion."""
    doomed = path.with_name(f".removing-{path.name}-{os.getpid()}")
    try:
        path.rename(doomed)
    except FileNotFoundError:
        return
    shutil.rmtree(doomed, ignore_errors=True)


def checkpoint_path(run_dir: Path, step: int) -> Path:
    """The directory of the checkpoint saved at ``step``."""
    return run_dir / CHECKPOINTS_DIR / f"checkpoint-{step}"
