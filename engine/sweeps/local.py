"""The local executor: one trial at a time on this machine, each an ordinary run of the workspace.

For each trial: ask the study for values, create the run (``engine.runs.create_run``), start it, follow its
metrics.jsonl by byte offset and its status, report each new objective value to the trial, stop the run when the
pruner says so (its state becomes ``pruned``), and tell the study how it ended.

The driver may die at any moment (kill -9); its runs live on in their own sessions. Started again with the same
sweep, it first picks up every trial the study still holds as running: it waits on a run that is still going,
resumes one that stopped or failed with a checkpoint, and fails the trial (not counted) when nothing can continue
it. One driver per sweep (a flock on the sweep's folder), so every running trial it finds is an orphan. Optuna's
heartbeats are not used: they fail a stale trial whose run may still be alive, and optuna warns against them
outside ``Study.optimize``.
"""

from __future__ import annotations

import contextlib
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import optuna
from optuna.trial import FrozenTrial, Trial, TrialState

from engine import runs
from engine.config import ConfigError
from engine.runs import queue as run_queue
from engine.runs.control import RunError
from engine.store.locks import file_lock
from engine.store.rundir import (
    COMPLETED,
    FAILED,
    PRUNED,
    QUEUED,
    STOPPED,
    RunStatus,
    is_run_dir,
    iter_metrics,
    read_status,
    update_status,
)
from engine.store.workspace import runs_dir
from engine.sweeps.config import SweepConfig
from engine.sweeps.evaluated import (
    EvaluationFailed,
    EvaluationStopped,
    await_evaluation,
    reusable_job,
    start_trial_evaluation,
)
from engine.sweeps.objective import MetricTail, pruning_feed
from engine.sweeps.sections import EXACT_MATCH
from engine.sweeps.space import apply
from engine.sweeps.study import (
    DRIVER_LOCK_FILE,
    SweepError,
    distributions,
    open_study,
    sweep_dir,
    target_trials,
)
from engine.sweeps.summary import (
    ERROR_ATTR,
    EVAL_JOB_ATTR,
    LOST_ATTR,
    PRUNE_REASONS,
    PRUNED_ATTR,
    RUN_ID_ATTR,
    SweepSummary,
    counts,
    format_value,
    summarize_study,
    trial_line,
)

POLL_S = 0.25  # how often a trial's status and metrics are read: a prune decision waits at most this long
STOP_WAIT_S = 300.0  # a stopped run saves a checkpoint before it ends; past this it is aborted
LOG_LINES = 6  # lines of train.log kept with a failed trial's error


class Interrupted(Exception):
    """Ctrl-C or SIGTERM: the current run was stopped with a checkpoint; the same command continues."""


class _Lost(Exception):
    """An orphaned trial's run ended with nothing to continue it from."""


@dataclass(frozen=True)
class SweepRun:
    """What ``run_sweep`` did: the sweep's summary, and whether it was interrupted before its end."""

    summary: SweepSummary
    interrupted: bool


def run_sweep(
    config: SweepConfig,
    workspace: Path,
    *,
    sweep_text: str | None = None,
    stop: threading.Event | None = None,
    echo: Callable[[str], None] = print,
    poll_s: float = POLL_S,
) -> SweepRun:
    """Run (or continue) a sweep in the foreground until it has its trials, its time budget is spent, or ``stop``
    is set (then the current trial's run is stopped with a checkpoint and the same call continues it later).

    ``sweep_text`` is the sweep file as given, kept as sweep.yaml. SweepError when the workspace holds a
    different sweep of the same name, or another driver is running this one.
    """
    workspace = Path(workspace).resolve()
    with driving(config, workspace, sweep_text) as study:
        driver = LocalDriver(config, workspace, study, stop or threading.Event(), echo, poll_s)
        interrupted = driver.run()
        return SweepRun(summarize_study(study), interrupted)


@contextlib.contextmanager
def driving(config: SweepConfig, workspace: Path, sweep_text: str | None) -> Iterator[optuna.Study]:
    """The sweep's study (made on first use), held by this driver alone for the duration: a flock on the sweep's
    folder. SweepError when another driver is running the sweep, or the workspace holds a different sweep of the
    same name."""
    folder = sweep_dir(workspace, config.name)
    folder.mkdir(parents=True, exist_ok=True)
    with file_lock(folder / DRIVER_LOCK_FILE, wait_s=0) as held:
        if not held:
            raise SweepError(f"another driver is running the sweep {config.name}; wait for it, or stop it first")
        yield open_study(config, workspace, sweep_text)


class LocalDriver:
    """Drives one sweep's trials on this machine, one run at a time (see the module's docstring)."""

    def __init__(
        self,
        config: SweepConfig,
        workspace: Path,
        study: optuna.Study,
        stop: threading.Event,
        echo: Callable[[str], None],
        poll_s: float,
    ):
        self.config, self.workspace, self.study = config, workspace, study
        self.stop, self.echo, self.poll_s = stop, echo, poll_s
        self.metric = config.objective.metric
        # What the pruner is told while a trial trains.
        self.fed_metric, self.fed_sign = pruning_feed(config.objective, config.base)
        self.distributions = distributions(config)
        self.target = target_trials(config)

    def run(self) -> bool:
        """Pick up the orphaned trials, then run new ones until the sweep has its trials; True if interrupted."""
        started = time.monotonic()
        self._say_start()
        try:
            for orphan in self.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
                self._adopt(orphan)
            while self._counted() < self.target:
                budget = self.config.time_budget_s
                if budget is not None and time.monotonic() - started >= budget:
                    self.echo(f"the time budget ({budget:g} s) is spent: no new trial starts")
                    break
                self._check_stop()
                self._new_trial()
        except Interrupted:
            self.echo("interrupted: run the same command again to continue the sweep")
            return True
        self._say_end()
        return False

    def _counted(self) -> int:
        return sum(counts(trial) for trial in self.study.get_trials(deepcopy=False))

    # --- a new trial ---------------------------------------------------------------------------------------

    def _ask(self) -> Trial:
        """The next trial from the study: an enqueued first trial, else the sampler's values."""
        return self.study.ask(self.distributions)

    def _new_trial(self) -> None:
        trial = self._ask()
        name = f"{self.config.name}-trial-{trial.number}"
        try:
            config = apply(self.config.base, trial.params, self.config.space, name)
        except ConfigError as exc:
            return self._fail(trial, f"these values do not make a valid run: {exc}")
        run_dir = runs_dir(self.workspace) / runs.new_run_id(name)
        trial.set_user_attr(RUN_ID_ATTR, run_dir.name)  # before the run exists: a restart finds it by this
        try:
            runs.create_run(config, workspace=self.workspace, run_dir=run_dir)  # queued: it waits for its devices
            update_status(run_dir, sweep={"name": self.config.name, "trial": trial.number})
            self._start_in_line(run_dir)
        except (RunError, OSError) as exc:
            return self._fail(trial, f"the run could not start: {exc}")
        self._follow(trial, run_dir, set())

    def _start_in_line(self, run_dir: Path, checkpoint: int | None = None) -> None:
        """Put the run in the workspace's queue (a resume from ``checkpoint``) and start it once its devices are
        free (engine.runs.queue): on a CPU machine once no other run is active, on a GPU machine on the devices the
        base config names or any free one. A studio's scheduler may start it first; that is the same start. A run
        that cannot start at all is marked failed, which the watch reports as the trial's failure. Interrupted
        while it waits, the run leaves the queue (so nothing starts it after the sweep stopped)."""
        if read_status(run_dir).state != QUEUED:
            run_queue.enqueue(run_dir, resume_checkpoint=checkpoint)
        said = False
        while not run_queue.try_start(run_dir):
            if read_status(run_dir).state != QUEUED:
                return
            if not said:
                self.echo(f"trial run {run_dir.name} waits in the queue for its devices")
                said = True
            try:
                self._check_stop(self.poll_s * 4)
            except Interrupted:
                run_queue.cancel_queued(run_dir)
                raise

    # --- following a trial's run ---------------------------------------------------------------------------

    def _follow(self, trial: Trial, run_dir: Path, reported: set[int]) -> None:
        """Watch the run to its end, then tell the study."""
        tail = MetricTail(run_dir, self.fed_metric)
        final, reason = self._watch(trial, run_dir, tail, reported)
        self._conclude(trial, run_dir, final, tail, reason)

    def _watch(self, trial: Trial, run_dir: Path, tail: MetricTail, reported: set[int]) -> tuple[RunStatus, str | None]:
        """Report each new objective value; returns the run's final status, and why it was pruned (if it was)."""
        while True:
            # The status first: every metrics line written before a final status is read in the same round.
            current = runs.status(run_dir)
            if not is_run_dir(run_dir):  # removed by hand while it ran
                return RunStatus(state=FAILED, error=f"the run directory {run_dir} was removed"), None
            for step, value in tail.read():
                if step in reported:  # reported before a restart of the driver
                    continue
                trial.report(self.fed_sign * value, step)
                reported.add(step)
                if not current.is_final and trial.should_prune():
                    return self._prune(trial, run_dir, step, value)
            if current.is_final:
                return current, None
            if self.stop.wait(self.poll_s):
                self._interrupt(trial.number, run_dir)

    def _prune(self, trial: Trial, run_dir: Path, step: int, value: float) -> tuple[RunStatus, str]:
        """Stop the run (it saves a checkpoint); the reason is recorded first, so a driver killed meanwhile
        finishes the pruning when it is started again."""
        reason = self._prune_reason(step, value)
        trial.set_user_attr(PRUNED_ATTR, reason)
        runs.stop(run_dir)
        return self._await_end(run_dir), reason

    def _prune_reason(self, step: int, value: float) -> str:
        said = {"step": step, "metric": self.fed_metric, "value": format_value(value)}
        pruner = self.config.pruner
        if pruner.kind == "successive_halving":
            return PRUNE_REASONS["halving"].format(**said, factor=pruner.reduction_factor)
        earlier = [
            t.intermediate_values[step]
            for t in self.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
            if step in t.intermediate_values
        ]
        if not earlier:
            return PRUNE_REASONS["median_unknown"].format(**said)
        return PRUNE_REASONS["median"].format(**said, median=format_value(self.fed_sign * statistics.median(earlier)))

    def _await_end(self, run_dir: Path) -> RunStatus:
        final = runs.wait(run_dir, timeout=STOP_WAIT_S, poll=self.poll_s)
        if not final.is_final:
            runs.abort(run_dir, reason=f"did not stop within {STOP_WAIT_S:g} s of the sweep's request")
            final = runs.status(run_dir)
        return final

    def _interrupt(self, number: int, run_dir: Path) -> None:
        """Ctrl-C: stop the trial's run with a checkpoint and leave the trial running for the next start."""
        if runs.stop(run_dir):
            final = self._await_end(run_dir)
            saved = f"checkpoint at step {final.checkpoints[-1]}" if final.checkpoints else "no checkpoint yet"
            self.echo(f"trial {number}: its run {run_dir.name} is {final.state} ({saved})")
        raise Interrupted

    def _check_stop(self, wait_s: float = 0.0) -> None:
        if self.stop.wait(wait_s):
            raise Interrupted

    # --- ending a trial ------------------------------------------------------------------------------------

    def _conclude(self, trial: Trial, run_dir: Path, final: RunStatus, tail: MetricTail, reason: str | None) -> None:
        if final.state == COMPLETED and self.metric == EXACT_MATCH:
            return self._evaluated(trial, run_dir)
        if final.state == COMPLETED:
            tail.read()
            if tail.last is None:
                return self._fail(trial, f"the run completed without logging {self.metric}")
            self.study.tell(trial, tail.last[1])
            return self._say(trial.number)
        if reason is not None or final.state == PRUNED:
            return self._end_pruned(trial, run_dir, reason or final.error or "pruned")
        self._fail(trial, _run_failure(final))

    def _evaluated(self, trial: Trial, run_dir: Path) -> None:
        """exact_match: score the completed run with Evaluate (engine.sweeps.evaluated), or wait for the evaluation
        a killed driver had started, and tell the study its exact match."""
        job = reusable_job(trial.user_attrs.get(EVAL_JOB_ATTR))
        try:
            if job is None:
                self.echo(f"trial {trial.number}: scoring its run {run_dir.name} with Evaluate on the eval set")
                job = start_trial_evaluation(run_dir, self.workspace, self.config.objective.eval_rows)
                trial.set_user_attr(EVAL_JOB_ATTR, str(job))
            score = await_evaluation(job, self.stop, self.poll_s)
        except EvaluationStopped:
            self.echo(f"trial {trial.number}: its evaluation was cancelled; the run is complete and is scored again")
            raise Interrupted from None
        except EvaluationFailed as exc:
            return self._fail(trial, str(exc))
        self.study.tell(trial, score)
        self._say(trial.number)

    def _end_pruned(self, trial: Trial, run_dir: Path, reason: str) -> None:
        update_status(run_dir, when=lambda stored: stored.is_final, state=PRUNED, error=reason)
        self.study.tell(trial, state=TrialState.PRUNED)
        self._say(trial.number)

    def _fail(self, trial: Trial, error: str, lost: bool = False) -> None:
        trial.set_user_attr(ERROR_ATTR, error[-4000:])
        if lost:
            trial.set_user_attr(LOST_ATTR, True)
        self.study.tell(trial, state=TrialState.FAIL)
        self._say(trial.number)

    # --- trials whose driver died --------------------------------------------------------------------------

    def _adopt(self, orphan: FrozenTrial) -> None:
        """Continue a trial that a driver left running (see the module's docstring)."""
        # The trial exists: attach to it as study.ask() does to a new one (optuna has no public call for this).
        trial = Trial(self.study, orphan._trial_id)
        run_id = orphan.user_attrs.get(RUN_ID_ATTR)
        run_dir = runs_dir(self.workspace) / run_id if run_id else None
        if run_dir is None or not is_run_dir(run_dir):
            return self._replace(orphan, trial, "the sweep stopped before this trial's run was made")
        current = runs.status(run_dir)
        self.echo(f"trial {orphan.number}: picking up its run {run_id} ({current.state})")
        reason = orphan.user_attrs.get(PRUNED_ATTR)
        if reason is not None:  # the pruner had judged it: finish the pruning
            if current.is_active:
                runs.stop(run_dir)
                current = self._await_end(run_dir)
            return self._conclude(trial, run_dir, current, MetricTail(run_dir, self.fed_metric), reason)
        try:
            self._restart(run_dir, current)
        except RunError as exc:  # a resume refused (its loss went bad): the trial's own failure
            return self._fail(trial, str(exc))
        except _Lost as exc:  # ended with the driver, nothing to continue from: a new trial takes its place
            return self._replace(orphan, trial, str(exc))
        self._follow(trial, run_dir, set(orphan.intermediate_values))

    def _replace(self, orphan: FrozenTrial, trial: Trial, error: str) -> None:
        """Fail a trial the driver lost (it does not count) and let a new one take its place: one with the same
        values when the sampler would not draw them again (a first trial, a grid point)."""
        self._fail(trial, error, lost=True)
        fixed = orphan.system_attrs.get("fixed_params", {})  # optuna's record of an enqueued trial's values
        values = {**fixed, **orphan.params}
        if values and (fixed or self.config.sampler.kind == "grid"):
            self.study.enqueue_trial(values)

    def _restart(self, run_dir: Path, current: RunStatus) -> None:
        """Get an orphan's run going again if it needs to: start it if it never started (or stopped before its
        first step), resume it from its checkpoint; RunError when a resume is refused, _Lost when nothing can
        continue it."""
        if current.is_active or current.state in (COMPLETED, PRUNED):
            return
        if current.is_resumable and current.checkpoints:
            self._start_in_line(run_dir, runs.resume_point(run_dir))
        elif current.state == QUEUED or (current.is_resumable and next(iter_metrics(run_dir), None) is None):
            self._start_in_line(run_dir)
        else:
            raise _Lost(f"{_run_failure(current)}\n(it has no checkpoint to continue from)")

    # --- what it prints ------------------------------------------------------------------------------------

    def _say(self, number: int) -> None:
        summary = summarize_study(self.study)
        self.echo(trial_line(next(t for t in summary.trials if t.number == number), summary))

    def _say_start(self) -> None:
        done = self._counted()
        self.echo(
            f"sweep {self.config.name}: {self.target} trials, {self.config.objective.direction} {self.metric}"
            + (f"; {done} done before" if done else "")
            + (f" (the grid has {self.target} points)" if self.target < self.config.trials else "")
        )

    def _say_end(self) -> None:
        summary = summarize_study(self.study)
        best = summary.best
        found = f"best {self.metric} {format_value(best.value)}: trial {best.number}, run {best.run_id}" if best else ""
        self.echo(f"sweep {self.config.name} done: {summary.done} trials" + (f"; {found}" if found else ""))


def _run_failure(final: RunStatus) -> str:
    """Why a run ended without completing (a failed run's error with the end of its log)."""
    stopped = "the run was stopped before it completed" if final.state == STOPPED else None
    error = final.error or stopped or f"the run ended {final.state}"
    tail = "\n".join((final.log_tail or "").rstrip().splitlines()[-LOG_LINES:])
    return f"{error}\n{tail}" if tail.strip() else error
