"""Hyperparameter sweeps: a search space over a RunConfig's fields, an optuna study, and the executors that run its
trials as ordinary runs of the workspace.

    config.py, sections.py   the sweep file (SweepConfig: base, space, objective, trials, sampler, pruner, ...)
    space.py                 the space checked against RunConfig's schema; a trial's values applied to the base
    study.py                 WORKSPACE/sweeps/<name>/: sweep.yaml, optuna's SQLite study, sampler and pruner
    objective.py             a trial's objective read from its run's metrics.jsonl by byte offset
    evaluated.py             the exact_match objective: Evaluate's job on a completed trial's run
    local.py                 the local executor: one trial at a time, pruning, picking up after a crash
    ray_executor.py          the Ray executor: trials as tasks on a Ray cluster, several at a time (needs ray)
    executors.py             execute_sweep: the executor the sweep file names
    summary.py               what a sweep has done: trials ranked by the objective, the best one
    control.py               the driver in the background (the studio's Start / Stop / Continue): start, running, stop

``engine.sweeps`` re-exports the API the CLI and the studio use.
"""

from engine.sweeps.config import SweepConfig, load_sweep, parse_sweep
from engine.sweeps.control import (
    SweepLaunch,
    continue_sweep,
    driver_pid,
    driver_running,
    start_sweep,
    stop_sweep,
)
from engine.sweeps.executors import execute_sweep
from engine.sweeps.local import SweepRun, run_sweep
from engine.sweeps.study import SweepError, sweep_dir, sweeps_dir
from engine.sweeps.summary import SweepSummary, TrialSummary, list_sweeps, sweep_status

__all__ = [
    "SweepConfig",
    "SweepError",
    "SweepLaunch",
    "SweepRun",
    "SweepSummary",
    "TrialSummary",
    "continue_sweep",
    "driver_pid",
    "driver_running",
    "execute_sweep",
    "list_sweeps",
    "load_sweep",
    "parse_sweep",
    "run_sweep",
    "start_sweep",
    "stop_sweep",
    "sweep_dir",
    "sweep_status",
    "sweeps_dir",
]
