"""The worker's side of Save now and Pause: what the controls file asks for (engine.store.controls), read between
two steps, and the callback that acts on it.

Rank 0 reads the file (a stat per check, the file itself only when it changed); the other ranks read nothing and
learn rank 0's answer, together with any Stop, through one all-reduce (engine.training.stopping.agree), so they
all save, pause and stop at the same step.

A run pauses once its step is whole: after the step's train log, evaluation and checkpoint, whichever of them the
step has (Trainer runs them after ``on_step_end``), so the Monitor shows the step it waits at, and a Save now
while paused writes the checkpoint of that step. It waits in the process, holding its memory, status ``paused``
with ``paused_at``; Continue, Stop (a checkpoint of that step, then ``stopped``) or Save now ends the wait, and
Abort kills it as any run.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from engine.store.controls import CONTROLS_FILE, Controls, clear_controls, read_controls
from engine.store.rundir import PAUSED, append_metrics
from engine.training.callbacks import RunDirCallback
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


# Where a step ends, in the order Trainer runs them after ``on_step_end``: the last one the step has is where a
# pause waits.
LOG, EVALUATE, SAVE = "log", "evaluate", "save"


class RequestsCallback(TrainerCallback):
    """Save now and Pause, between steps. Listed after the run directory's callback (``run``), which writes the
    step's train log and status first, and stops the run on an ordinary Stop; this one writes the pause (status,
    a ``pause`` event in metrics.jsonl) and stops a run that a Stop found paused."""

    def __init__(self, run: RunDirCallback, poll_s: float = POLL_S):
        self.run = run
        self.controls = RunControls(run.run_dir, run.stop, run.is_main, poll_s)
        self.controls.begin()  # built while the run reads "starting", when no request is taken
        self.wait_at: str | None = None  # LOG, EVALUATE or SAVE: this step pauses there, not at its end
        self.paused_since: float | None = None  # while the run waits (across a save made meanwhile)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._save_if_asked(state, control, self.controls.check())
        if control.should_training_stop:  # stopping (a Stop, the last step): it does not wait any more
            return
        self.wait_at = _last_part(control)
        if self.wait_at is None:  # nothing more to this step: wait here
            self._hold(state, control, saved=False)

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        is_train_log = "loss" in (logs or {}) and "train_loss" not in (logs or {})
        if self.wait_at == LOG and is_train_log and not self.run.bad_loss:
            self.wait_at = None
            self._hold(state, control, saved=False)

    def on_evaluate(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if state.global_step == 0:  # eval_on_start: no step to save or pause at yet
            return
        if self.wait_at == EVALUATE:
            self.wait_at = None
            self._hold(state, control, saved=False)
        elif not control.should_save:  # a Save now asked during the evaluation: this step's checkpoint
            self._save_if_asked(state, control, self.controls.check())

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.controls.saved()
        self.wait_at = None
        self._hold(state, control, saved=True)  # the last thing of a step: a pause waits here

    def _save_if_asked(self, state: Any, control: Any, wanted: Wanted) -> bool:
        """Ask Trainer for this step's checkpoint when Save now was asked for; whether it was."""
        if not wanted.save or control.should_save:
            return wanted.save
        control.should_save = True  # Trainer saves after the step's log and evaluation; on_save follows
        self.run.saving = f"checkpoint {state.global_step}"
        print(f"saving a checkpoint at step {state.global_step} on request", flush=True)
        return True

    def _hold(self, state: Any, control: Any, saved: bool) -> None:
        """Wait here while a pause is wanted. Save now ends the wait with a checkpoint of this step (the wait goes
        on after it, in ``on_save``), Continue and Stop end it; a Stop then stops at this very step."""
        wanted = self.controls.check()
        while not wanted.stop:
            if wanted.save and saved:
                self.controls.saved()  # the checkpoint of this step was just written: it answers the request
            elif self._save_if_asked(state, control, wanted):
                return  # still paused: on_save waits on
            if not wanted.pause:
                break
            self._wait(state)
            wanted = self.controls.check()
        if self.paused_since is not None:
            self._end_pause(state, control, wanted.stop, saved)

    def _wait(self, state: Any) -> None:
        """One look at the requests' worth of waiting; the first says so in the status and the log."""
        if self.paused_since is None:
            self.paused_since = time.time()
            self.run.write_status(state, force=True, state=PAUSED, paused_at=self.paused_since)
            print(f"paused at step {state.global_step}; the process waits, holding its memory", flush=True)
        time.sleep(self.controls.poll_s)

    def _end_pause(self, state: Any, control: Any, stop: bool, saved: bool) -> None:
        """A ``pause`` event in metrics.jsonl (its start and length: readers of the speed leave it out), then
        ``running`` again on Continue, or on Stop the end of training at this step, with its checkpoint."""
        since, self.paused_since = self.paused_since, None
        seconds = time.time() - since
        if self.run.is_main:
            event = {"event": "pause", "step": state.global_step, "time": since, "seconds": seconds}
            append_metrics(self.run.run_dir, [event])
        self.run.restart_throughput_clock(state)
        if not stop:
            print(f"continuing after a pause of {seconds:.1f} s", flush=True)
            self.run.write_status(state, force=True, state="running", paused_at=None)
            return
        control.should_save = control.should_save or not saved
        control.should_training_stop = True
        print(f"{self.run.stop.signal_name} while paused: stopping at step {state.global_step}", flush=True)
        self.run.write_status(state, force=True, state="stopping", paused_at=None)


def _last_part(control: Any) -> str | None:
    """What Trainer still does for this step after ``on_step_end``, the last of it: save, evaluate or log."""
    if control.should_save:
        return SAVE
    if control.should_evaluate:
        return EVALUATE
    return LOG if control.should_log else None
