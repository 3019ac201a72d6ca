"""The Ray executor: a sweep's trials as tasks on an existing Ray cluster, several at a time, each an ordinary run of
the workspace.

The driver runs where the sweep command runs (the head node, or any machine that reaches the cluster): it connects
with ``ray.init(address=...)``, makes each trial's run directory in the workspace, and hands the run to a Ray task
(``ray.remote(num_gpus=..., num_cpus=...)``) that trains it in the foreground on the node Ray picks
(engine.runs.remote.run_here): Ray accounts the trial's GPUs and CPUs to the task, and the task ends when the run
does. The workspace must be on storage that every node mounts at the same absolute path: the driver follows each
trial's metrics.jsonl and status.json there, as the local executor does, reports to optuna, prunes (Stop reaches
the node through a request file, engine.store.hosts) and tells the study.

Everything else is the local executor's (engine.sweeps.local.LocalDriver, subclassed): the study, reporting,
pruning, Ctrl-C, picking up after a crash. Up to ``executor.max_concurrent_trials`` lanes (threads) each run one
trial at a time; Ray queues a lane's task until the cluster has its resources.
"""

from __future__ import annotations

import contextlib
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import optuna
import ray
from optuna.trial import FrozenTrial, Trial, TrialState
from ray.exceptions import RayError, TaskCancelledError

from engine.runs.control import ABORTED_BY_USER
from engine.runs.remote import run_here
from engine.store.hosts import ABORT, HEARTBEAT_S, STOP, WAITING_FOR_NODE, beat, clear_request, read_request
from engine.store.paths import PROJECT_ROOT
from engine.store.rundir import ABORTED, FAILED, STOPPED, RunStatus, next_segment, read_status, update_status
from engine.sweeps.config import SweepConfig
from engine.sweeps.local import POLL_S, Interrupted, LocalDriver, SweepRun, driving
from engine.sweeps.sections import ExecutorSection
from engine.sweeps.study import SweepError
from engine.sweeps.summary import summarize_study

CONNECT_S = 5.0  # a head that is up answers within milliseconds
TASK_END_GRACE_S = 30.0  # a task whose run has ended has only its bookkeeping left (seconds on a busy machine)


def run_ray_sweep(
    config: SweepConfig,
    workspace: Path,
    *,
    sweep_text: str | None = None,
    stop: threading.Event | None = None,
    echo: Callable[[str], None] = print,
    poll_s: float = POLL_S,
) -> SweepRun:
    """Run (or continue) a sweep whose ``executor.kind`` is ray, as engine.sweeps.local.run_sweep does with one
    trial at a time. SweepError when the cluster cannot be reached or cannot hold a trial, the workspace holds a
    different sweep of the same name, or another driver is running this one."""
    workspace = Path(workspace).resolve()  # the nodes find the runs by this path (it must be the same there)
    with driving(config, workspace, sweep_text) as study:
        with connected(config.executor):
            echo(f"executor: Ray cluster at {config.executor.address}, {describe_cluster()}")
            driver = RayDriver(config, workspace, study, stop or threading.Event(), echo, poll_s)
            interrupted = driver.run()
        return SweepRun(summarize_study(study), interrupted)


@contextlib.contextmanager
def connected(executor: ExecutorSection) -> Iterator[None]:
    """Connected to the executor's cluster for the duration, or SweepError saying why not (and what a trial needs
    that no node has)."""
    _check_listening(executor.address)
    handlers = _signal_handlers()
    try:
        ray.init(
            address=executor.address,
            # The tasks import the engine: from this project's folder, which the nodes must have at the same path.
            runtime_env={"env_vars": {"PYTHONPATH": str(PROJECT_ROOT)}},
            logging_level="WARNING",
            log_to_driver=False,  # each trial's output goes to its train.log
        )
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise SweepError(f"executor.address: cannot connect to a Ray cluster at {executor.address}: {exc}") from None
    finally:
        # ray.init makes SIGTERM exit the driver at once; the sweep's own handler stops the trials with a checkpoint.
        _restore(handlers)
    try:
        _check_fits(executor)
        yield
    finally:
        ray.shutdown()


def _signal_handlers() -> dict[int, Any]:
    """The handlers of SIGINT and SIGTERM (none to keep outside the main thread: only it may set them)."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}


def _restore(handlers: dict[int, Any]) -> None:
    for signum, handler in handlers.items():
        if handler is not None:
            signal.signal(signum, handler)


def _check_listening(address: str) -> None:
    """SweepError at once when nothing answers at a HOST:PORT address (ray.init retries such an address for
    minutes). ``auto`` and ``ray://`` addresses are left to ray.init."""
    host, _, port = address.rpartition(":")
    if "://" in address or not host or not port.isdigit():
        return
    try:
        socket.create_connection((host, int(port)), timeout=CONNECT_S).close()
    except OSError as exc:
        raise SweepError(
            f"executor.address: no Ray head answers at {address} ({exc.strerror or exc}); start one with "
            "ray start --head, or give its address"
        ) from None


def describe_cluster() -> str:
    """'2 nodes, 16 CPUs, 4 GPUs' of the connected cluster."""
    total = ray.cluster_resources()
    nodes = sum(1 for node in ray.nodes() if node.get("Alive"))
    return f"{nodes} node{'s' * (nodes != 1)}, {total.get('CPU', 0):g} CPUs, {total.get('GPU', 0):g} GPUs"


def _check_fits(executor: ExecutorSection) -> None:
    """SweepError when no live node has the GPUs and CPUs of one trial (its tasks would wait for ever)."""
    for node in ray.nodes():
        held = node.get("Resources", {}) if node.get("Alive") else {}
        if held.get("GPU", 0) >= executor.gpus_per_trial and held.get("CPU", 0) >= executor.cpus_per_trial:
            return
    raise SweepError(
        f"executor: no node of the cluster has {executor.gpus_per_trial:g} GPUs and {executor.cpus_per_trial:g} CPUs "
        f"for one trial ({describe_cluster()}); lower gpus_per_trial / cpus_per_trial or add a node"
    )


class RayDriver(LocalDriver):
    """Drives one sweep's trials as Ray tasks, up to ``executor.max_concurrent_trials`` at a time."""

    def __init__(
        self,
        config: SweepConfig,
        workspace: Path,
        study: optuna.Study,
        stop: threading.Event,
        echo: Callable[[str], None],
        poll_s: float,
    ):
        super().__init__(config, workspace, study, stop, echo, poll_s)
        executor = config.executor
        self.lanes = executor.max_concurrent_trials
        self.task = ray.remote(run_here).options(
            num_gpus=executor.gpus_per_trial,
            num_cpus=executor.cpus_per_trial,
            max_retries=0,  # a trial that died is the study's failure, or a resume from its checkpoint: not a rerun
        )
        self.lock = threading.Lock()  # guards the claims below: which lane takes which trial
        self.ask_lock = threading.Lock()
        self.orphans: list[FrozenTrial] = []
        self.in_flight = 0  # trials lanes have claimed (new or orphaned) and not yet told the study about
        self.budget_said = False
        self.tasks: dict[Path, ray.ObjectRef] = {}
        self.settlers: list[threading.Thread] = []
        self.closing = threading.Event()

    def run(self) -> bool:
        """Pick up the orphaned trials, then run new ones, ``lanes`` at a time; True if interrupted."""
        started = time.monotonic()
        self._say_start()
        self.orphans = list(self.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)))
        with ThreadPoolExecutor(max_workers=self.lanes, thread_name_prefix="trial-lane") as pool:
            lanes = [pool.submit(self._lane, started) for _ in range(self.lanes)]
            try:
                interrupted = any([lane.result() for lane in lanes])
            finally:
                self._cancel_waiting()
                self._close_settlers()
        if interrupted:
            self.echo("interrupted: run the same command again to continue the sweep")
            return True
        self._say_end()
        return False

    def _lane(self, started: float) -> bool:
        """One trial after another until none is left to claim; True if interrupted."""
        try:
            while True:
                orphan = self._claim_orphan()
                if orphan is None and not self._claim_new(started):
                    return False
                try:
                    self._adopt(orphan) if orphan is not None else self._new_trial()
                finally:
                    with self.lock:
                        self.in_flight -= 1
        except Interrupted:
            return True
        except BaseException:
            self.stop.set()  # the other lanes stop their runs with a checkpoint, and the error is raised
            raise

    def _claim_orphan(self) -> FrozenTrial | None:
        """A trial a dead driver left running, for this lane to pick up (in flight until it ends, as a new one)."""
        with self.lock:
            if not self.orphans:
                return None
            self.in_flight += 1
            return self.orphans.pop(0)

    def _claim_new(self, started: float) -> bool:
        """Whether this lane starts a new trial: the sweep needs one more (counting those other lanes are running)
        and its time budget is not spent."""
        self._check_stop()
        with self.lock:
            budget = self.config.time_budget_s
            if budget is not None and time.monotonic() - started >= budget:
                if not self.budget_said:
                    self.echo(f"the time budget ({budget:g} s) is spent: no new trial starts")
                    self.budget_said = True
                return False
            if self._counted() + self.in_flight >= self.target:
                return False
            self.in_flight += 1
            return True

    def _ask(self) -> Trial:
        """As the local executor's, one lane at a time: two lanes asking at once could both be handed the same
        enqueued trial (optuna marks a waiting trial running without a lock across threads), run it twice, and
        fail the second tell with UpdateFinishedTrialError."""
        with self.ask_lock:
            return super()._ask()

    # --- starting a trial's run on the cluster ---------------------------------------------------------------

    def _start_in_line(self, run_dir: Path, checkpoint: int | None = None) -> None:
        """Hand the run (a resume from ``checkpoint``) to a Ray task, which trains it on the node Ray picks once one
        has the trial's resources; the local executor's queue for this machine's devices is not used.

        Until a node takes it, the run reads ``starting`` on no host yet (hosts.WAITING_FOR_NODE) with a heartbeat
        this driver keeps: not ``queued``, which a studio's scheduler on this machine would start here."""
        current = read_status(run_dir)
        clear_request(run_dir)  # one left from an earlier segment
        beat(run_dir)
        update_status(
            run_dir,
            state="starting",
            host=WAITING_FOR_NODE,
            devices=[],
            pid=None,
            supervisor_pid=None,
            error=None,
            exit_code=None,
            bad_loss_step=None,
            **next_segment(current),
        )
        task = self.task.remote(str(run_dir), checkpoint)
        settler = threading.Thread(target=self._settle, args=(run_dir, task), daemon=True)
        with self.lock:
            self.tasks[run_dir] = task
            self.settlers.append(settler)
        settler.start()

    def _restart(self, run_dir: Path, current: RunStatus) -> None:
        """As the local executor's; a run its dead driver had handed to a task that never reached a node (Ray drops
        a driver's tasks with it) is handed over again, from its newest checkpoint."""
        if current.is_active and current.host == WAITING_FOR_NODE:
            return self._start_in_line(run_dir, current.checkpoints[-1] if current.checkpoints else None)
        super()._restart(run_dir, current)

    def _settle(self, run_dir: Path, task: ray.ObjectRef) -> None:
        """Keep a waiting run's heartbeat, and take its task back when a Stop or Abort comes before a node took it;
        once the task is over, a run it left open failed (the task raised before the run began, e.g. the node cannot
        see the workspace; or the task or its node died). The run's own end is recorded by the run."""
        next_beat = time.monotonic() + HEARTBEAT_S
        try:
            while not ray.wait([task], timeout=self.poll_s)[0]:
                if self.closing.is_set():
                    return  # the driver is disconnecting: what the task does from now is its run's to record
                if read_status(run_dir).host != WAITING_FOR_NODE:
                    continue  # a node has it: the task there keeps the heartbeat and answers requests
                if read_request(run_dir) is not None:
                    ray.cancel(task)
                elif time.monotonic() >= next_beat:
                    beat(run_dir)
                    next_beat = time.monotonic() + HEARTBEAT_S
            ray.get(task)
            error = "the Ray task running it ended without recording the end of the run"
        except TaskCancelledError:
            return self._taken_back(run_dir)
        except RayError as exc:
            cause = getattr(exc, "cause", None)  # a task's own exception (RayTaskError), else a node or worker lost
            error = f"the Ray task running it failed: {cause if cause is not None else _first_lines(str(exc))}"
        finally:
            with self.lock:
                self.tasks.pop(run_dir, None)
        update_status(run_dir, when=lambda stored: stored.is_open, state=FAILED, ended_at=time.time(), error=error)

    @staticmethod
    def _taken_back(run_dir: Path) -> None:
        """A run whose task was cancelled before a node took it: stopped (it keeps its checkpoints, and starts or
        resumes again later), or aborted when that was asked."""
        action, reason = read_request(run_dir) or (STOP, None)
        end = {"state": ABORTED, "error": reason or ABORTED_BY_USER} if action == ABORT else {"state": STOPPED}
        update_status(
            run_dir,
            when=lambda stored: stored.is_active and stored.host == WAITING_FOR_NODE,
            ended_at=time.time(),
            **end,
        )
        clear_request(run_dir)

    def _close_settlers(self) -> None:
        """End the threads that wait for tasks before the driver disconnects (Ray ends a process that calls it after
        ray.shutdown).

        First give each task up to TASK_END_GRACE_S to return by itself: the driver learns that a trial's run ended
        from its status, which the run's supervisor writes before its task has recorded the end and cleared the
        run's request file (engine.runs.remote.run_here); disconnecting at once would kill the task in between and
        leave a stop request behind."""
        with self.lock:
            settlers = list(self.settlers)
        deadline = time.monotonic() + TASK_END_GRACE_S
        for settler in settlers:
            settler.join(timeout=max(0.0, deadline - time.monotonic()))
        self.closing.set()
        for settler in settlers:
            settler.join()

    def _cancel_waiting(self) -> None:
        """Take back the tasks still waiting for a node when the driver ends; the lanes have stopped the runs that
        began. A task that began meanwhile is left to end its run."""
        with self.lock:
            waiting = list(self.tasks.items())
        for run_dir, task in waiting:
            if read_status(run_dir).host == WAITING_FOR_NODE:
                ray.cancel(task)
                self._taken_back(run_dir)


def _first_lines(text: str, count: int = 8) -> str:
    return "\n".join(text.strip().splitlines()[:count])
