"""The controls file: what a run's worker is asked to do between two steps besides stopping (Save now, Pause,
Continue). Standard library only.

``RUN_DIR/.controls.json`` holds ``{"pause": bool, "save": n}``. It says what is wanted, not what happened: Pause
sets ``pause``, Continue clears it, Save now adds one to ``save``; the worker (rank 0) reads the file at the end of
every step and acts on what changed (engine.training.controls). Why a file and not a signal, as Stop is:

- a pause is a state that must outlive whoever asked for it: a studio killed while its run is paused, started
  again, must be able to Continue it, and any program may ask (the studio, a script, another machine that shares
  the workspace, for a run on a cluster node);
- a signal arrives once, at any moment (during the slow imports, in the middle of a save); a file is read when the
  worker is ready for it, and a request is never lost or taken twice;
- the worker holds its own count of the saves it made, so ``save`` only grows and two Save now clicks that arrive
  within one step make one checkpoint.

The worker empties the file when it begins (a new process of the run starts unpaused, and earlier requests are
spent). Every write is atomic, under the run's status lock (read, change, write).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from engine.store.rundir import status_lock, write_text_atomic

CONTROLS_FILE = ".controls.json"


@dataclass(frozen=True)
class Controls:
    """What the run's worker is asked to do between steps."""

    pause: bool = False  # wait after the current step until this turns false again (or a Stop arrives)
    save: int = 0  # Save now requests so far in this process of the run: a checkpoint whenever it grows


def read_controls(run_dir: Path) -> Controls:
    """The requests in the run's controls file (none when it has no file, or one that is not readable)."""
    try:
        stored = json.loads((Path(run_dir) / CONTROLS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return Controls()
    if not isinstance(stored, dict):
        return Controls()
    save = stored.get("save")
    return Controls(pause=stored.get("pause") is True, save=save if isinstance(save, int) and save > 0 else 0)


def _write(run_dir: Path, controls: Controls) -> None:
    write_text_atomic(Path(run_dir) / CONTROLS_FILE, json.dumps(asdict(controls)))


def request_pause(run_dir: Path, pause: bool) -> Controls:
    """Ask the worker to wait after its current step (``pause`` true) or to go on (false); returns the requests."""
    with status_lock(run_dir):
        current = read_controls(run_dir)
        changed = Controls(pause=pause, save=current.save)
        _write(run_dir, changed)
    return changed


def request_save(run_dir: Path) -> Controls:
    """Ask the worker for one more checkpoint at the end of its current step; returns the requests."""
    with status_lock(run_dir):
        current = read_controls(run_dir)
        changed = Controls(pause=current.pause, save=current.save + 1)
        _write(run_dir, changed)
    return changed


def clear_controls(run_dir: Path) -> None:
    """Forget every request (a new process of the run begins unpaused, with no save pending)."""
    with status_lock(run_dir):
        (Path(run_dir) / CONTROLS_FILE).unlink(missing_ok=True)
