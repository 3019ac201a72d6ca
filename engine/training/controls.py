"""The worker's side of Save now and Pause: what the controls file asks for (engine.store.controls), read between
two steps, with every process of the run agreeing on it.

Rank 0 reads the file (a stat per check, the file itself only when it changed); the other ranks read nothing and
learn rank 0's answer, together with any Stop, through one all-reduce (engine.training.stopping.agree), so they
all save, pause and stop at the same step. The waiting itself (status ``paused``) is done by the run directory's
callback (engine.training.callbacks), which calls ``check`` at the end of each step, after an evaluation and after
a save.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from engine.store.controls import CONTROLS_FILE, Controls, clear_controls, read_controls
from engine.training.stopping import StopRequest, agree

POLL_S = 0.1  # how often a paused run looks for Continue, Stop or Save now: quick to answer, no load at all


@dataclass(frozen=True)
class Wanted:
    """What the run is asked to do now, as every rank agrees."""

    stop: bool = False
    pause: bool = False
    save: bool = False  # a Save now request that no checkpoint has answered yet


class RunControls:
    """The requests of one worker process: reads the controls file, counts the saves that answered them."""

    def __init__(self, run_dir: Path, stop: StopRequest, is_main: bool, poll_s: float = POLL_S):
        self.run_dir = Path(run_dir)
        self.stop = stop
        self.is_main = is_main
        self.poll_s = poll_s
        self.saves_answered = 0  # the file's save count that the newest checkpoint answered
        self._stamp: tuple[int, int, int] | None = None
        self._read = Controls()

    def begin(self) -> None:
        """A new process of the run starts unpaused, with no save pending: earlier requests are spent."""
        if self.is_main:
            clear_controls(self.run_dir)
        self._stamp, self._read = None, Controls()

    def _controls(self) -> Controls:
        """The file's requests; it is parsed again only when its size, time or inode changed."""
        try:
            info = os.stat(self.run_dir / CONTROLS_FILE)
            stamp = (info.st_size, info.st_mtime_ns, info.st_ino)
        except OSError:
            stamp = None
        if stamp != self._stamp:
            self._stamp, self._read = stamp, read_controls(self.run_dir) if stamp else Controls()
        return self._read

    def check(self) -> Wanted:
        """Stop, pause and save as wanted now, agreed by every rank (call it at the same point on every rank)."""
        controls = self._controls() if self.is_main else Controls()
        stop, pause, save = agree([self.stop.requested, controls.pause, controls.save > self.saves_answered])
        if stop and not self.stop.requested:
            self.stop.requested, self.stop.signal_name = True, "stop on another rank"
        return Wanted(stop=stop, pause=pause, save=save)

    def saved(self) -> None:
        """A checkpoint was just written: it answers every Save now asked for until now (one asked during the
        save included: the checkpoint is of this very step)."""
        if self.is_main:
            self.saves_answered = self._controls().save
