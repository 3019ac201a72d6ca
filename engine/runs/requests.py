"""Save now, Pause and Continue: requests to a running run's worker, which acts on them between two steps.

They travel through the run's controls file (engine.store.controls), which the worker reads at the end of every
step, so they work from any process (the studio, a script, a studio restarted while its run was paused) and for a
run on another machine that shares the workspace. Stop and Abort stay as they are (engine.runs.control) and act on
a paused run too. Standard library only.
"""

from __future__ import annotations

from pathlib import Path

from engine.runs.status import status
from engine.store.controls import read_controls, request_pause, request_save
from engine.store.rundir import PAUSED


def _can_take_requests(run_dir: Path) -> bool:
    """Whether the run's worker is training or paused: it reads the controls file at every step's end."""
    return status(Path(run_dir)).state in ("running", PAUSED)


def save_now(run_dir: Path) -> bool:
    """Ask for a checkpoint at the end of the current step (during an evaluation: at its end) while the run goes
    on; a paused run saves at once and stays paused. False if the run is not running or paused.

    The checkpoint is an ordinary ``checkpoints/checkpoint-N`` (resumable, listed by Chat, Evaluate and Export as
    soon as it is whole); ``train.save_total_limit`` rotates it out like any other.
    """
    if not _can_take_requests(run_dir):
        return False
    request_save(Path(run_dir))
    return True


def pause(run_dir: Path) -> bool:
    """Ask the run to wait after its current step, keeping its process and memory; its status then reads
    ``paused`` with ``paused_at``. False if the run is neither running nor paused.

    A paused run still holds its devices, and its demo time limit keeps counting; Stop (a checkpoint, then
    ``stopped``) and Abort work on it as on a running run.
    """
    if not _can_take_requests(run_dir):
        return False
    request_pause(Path(run_dir), True)
    return True


def resume_paused(run_dir: Path) -> bool:
    """Let a paused run (or one asked to pause) go on from the step where it waits, in the same process. False
    if it is neither paused nor asked to pause.

    Unlike ``engine.runs.resume``, which starts a new process from a checkpoint of an ended run, nothing is
    reloaded: the run continues as if it had never waited.
    """
    run_dir = Path(run_dir)
    if not _can_take_requests(run_dir) or not read_controls(run_dir).pause:
        return False
    request_pause(run_dir, False)
    return True


def pause_requested(run_dir: Path) -> bool:
    """Whether a Pause is pending or in effect (the Monitor offers Continue then)."""
    return read_controls(Path(run_dir)).pause
