"""The CLI's commands on runs that already exist: ``status`` (one run, or the workspace's list), the Monitor's
controls (``stop``, ``pause``, ``continue``, ``save``, ``abort``), ``metrics``, ``wait`` and ``delete``, for a
script that started a run in the background (``train --detach``) or in a studio. A run is named by its id in the
workspace (``WORKSPACE/runs/<id>``) or by its directory; every name that is neither is refused with a message
(run_dir_of), a NUL byte or a control character included. A control that does not apply to the run's state is
refused (exit 2) with that state."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from engine.runs.control import RunError, abort, find_run, stop
from engine.runs.control import delete as delete_run
from engine.runs.queue import QUEUED, cancel_queued
from engine.runs.requests import pause, resume_paused, save_now
from engine.runs.status import status as run_status
from engine.store.rundir import RunStatus, is_run_dir
from engine.store.workspace import runs_dir

FOLLOW_POLL_S = 0.5


@dataclass(frozen=True)
class Control:
    """One of the Monitor's controls as a command: its --help, the engine's call (False: it does not apply to the
    run's state now), what it says when done ({} the run's id) and the state it wants."""

    help: str
    call: Callable[[Path], bool]
    said: str
    wants: str = "running"


def _stop_or_cancel(run_dir: Path) -> bool:
    """Stop a running run; a queued one leaves the line instead (the Monitor's Cancel)."""
    return cancel_queued(run_dir) or stop(run_dir)


CONTROLS = {
    "stop": Control(
        "stop a run after its current step; it saves a checkpoint (a queued run leaves the line)",
        _stop_or_cancel,
        "stopping {}: it saves a checkpoint after its current step (resume continues it)",
    ),
    "pause": Control(
        "pause a run after its current step: it waits, holding its memory, until continue",
        pause,
        "pausing {} after its current step: it waits, holding its memory (continue goes on)",
    ),
    "continue": Control("let a paused run go on from the step where it waits", resume_paused, "{} goes on", "paused"),
    "save": Control(
        "save a checkpoint of a running or paused run at the end of its current step; it goes on",
        save_now,
        "{} saves a checkpoint at the end of its current step",
    ),
    "abort": Control(
        "kill a run and every process it started, without a checkpoint",
        abort,
        "aborted {}: its processes are gone, no checkpoint saved",
    ),
}
RUN_COMMANDS = ("status", *CONTROLS, "metrics", "wait", "delete")


def add_run_commands(commands: Any) -> None:
    """The status, stop, pause, continue, save, abort, metrics, wait and delete sub-commands."""
    where = {"type": Path, "default": Path("workspace"), "help": "the workspace whose run ids RUN names"}
    run_help = "a run id of the workspace, or a run directory"
    status = commands.add_parser("status", help="a run's state and progress, or the workspace's runs")
    status.add_argument("run", nargs="?", metavar="RUN", help=f"{run_help} (default: list the workspace's runs)")
    status.add_argument("--workspace", **where)
    status.add_argument("--json", action="store_true", help="print the status as JSON (status.json, reconciled)")
    for name, known in CONTROLS.items():
        command = commands.add_parser(name, help=known.help)
        command.add_argument("run", metavar="RUN", help=run_help)
        command.add_argument("--workspace", **where)
    metrics = commands.add_parser("metrics", help="a run's metric events (metrics.jsonl), one JSON object a line")
    metrics.add_argument("run", metavar="RUN", help=run_help)
    metrics.add_argument("--workspace", **where)
    metrics.add_argument("--follow", action="store_true", help="keep printing new events until the run has ended")
    wait = commands.add_parser(
        "wait", help="wait until a run has ended (a queued or paused one too); the exit code says how, as train's"
    )
    wait.add_argument("run", metavar="RUN", help=run_help)
    wait.add_argument("--workspace", **where)
    delete = commands.add_parser(
        "delete", help="remove a run's directory with its checkpoints (refused while the run is going)"
    )
    delete.add_argument("run", metavar="RUN", help=run_help)
    delete.add_argument("--workspace", **where)


def run_dir_of(name: str, workspace: Path) -> Path:
    """The run ``name`` names: a run id of ``workspace`` first, else a run directory. RunError otherwise."""
    try:
        return find_run(workspace, name)
    except RunError:
        pass
    try:
        path = Path(name).expanduser()
        if is_run_dir(path):
            return path.resolve()
    except (OSError, ValueError, RuntimeError):  # a NUL byte, a name too long, ~user of an unknown user
        pass
    shown = json.dumps(name, ensure_ascii=False)  # a control character shows as its escape
    raise RunError(f"no run {shown}: neither a run id of {runs_dir(workspace)} nor a run directory") from None


def status(args: argparse.Namespace) -> int:
    """``status [RUN]``: one run's state, step and error, or a line per run of the workspace."""
    from engine.runs.status import list_runs

    if args.run is None:
        found = list_runs(args.workspace)
        if args.json:
            print(json.dumps([asdict(run) for run in found], default=str, indent=1))
        for run in [] if args.json else found:
            loss = f", loss {run.last_loss:.4g}" if run.last_loss is not None else ""
            print(f"{run.run_id}  {run.state}, step {run.step}/{run.max_steps}{loss}")
        if not found and not args.json:
            print(f"no runs in {runs_dir(args.workspace)}")
        return 0
    current = run_status(run_dir_of(args.run, args.workspace))
    if args.json:
        print(json.dumps(asdict(current), default=str, indent=1))
        return 0
    print(
        f"{current.name}: {current.state}, {_step_of(current)}"
        + (f", epoch {current.epoch:.2f}" if current.epoch else "")
    )
    if current.error:
        print(f"error: {current.error}")
    if current.checkpoints:
        print(f"checkpoints: {', '.join(map(str, current.checkpoints))}")
    return 0


def control(args: argparse.Namespace) -> int:
    """``stop``, ``pause``, ``continue``, ``save`` or ``abort`` RUN, as the Monitor's buttons: 0 asked (abort:
    done), 2 when the control does not apply to the run's state (it is named)."""
    from engine.cli.train import error

    run_dir = run_dir_of(args.run, args.workspace)
    chosen, before = CONTROLS[args.command], run_status(run_dir).state
    if not chosen.call(run_dir):
        return error(f"{run_dir.name} is not {chosen.wants} (it is {before}); nothing to {args.command}")
    queued = args.command == "stop" and before == QUEUED
    print(f"took {run_dir.name} out of the line; it never started" if queued else chosen.said.format(run_dir.name))
    return 0


def metrics(args: argparse.Namespace) -> int:
    """``metrics RUN``: the run's metric events so far, one JSON object a line; ``--follow`` until it ends (Ctrl-C
    ends the following, not the run: 130, without a traceback)."""
    from engine.cli.train import EXIT_INTERRUPTED
    from engine.runs.status import ended, read_metrics

    run_dir = run_dir_of(args.run, args.workspace)
    offset = 0
    try:
        while True:
            done = not args.follow or ended(run_dir)  # read after this, so the last events are printed too
            events, offset = read_metrics(run_dir, offset)
            for event in events:
                sys.stdout.write(json.dumps(event) + "\n")
            sys.stdout.flush()
            if done:
                return 0
            time.sleep(FOLLOW_POLL_S)
    except BrokenPipeError:  # ``metrics RUN | head``: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit's flush
        return 0
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


def wait(args: argparse.Namespace) -> int:
    """``wait RUN``: block until the run has ended, then print its state; the exit code says how it ended, as
    train's (engine.cli.train.run_exit_code). Ctrl-C ends the waiting, not the run (130)."""
    from engine.cli.train import EXIT_INTERRUPTED, run_exit_code
    from engine.runs.status import ended
    from engine.runs.status import wait as wait_for_end

    run_dir = run_dir_of(args.run, args.workspace)
    try:
        if not ended(run_dir):
            now = run_status(run_dir)
            where = f"{now.state}, {_step_of(now)}"
            print(f"waiting for {run_dir.name} ({where}) to end; Ctrl-C ends the waiting, not the run", file=sys.stderr)
        current = wait_for_end(run_dir, poll=FOLLOW_POLL_S)
    except KeyboardInterrupt:
        print(f"stopped waiting; {run_dir.name} goes on", file=sys.stderr)
        return EXIT_INTERRUPTED
    print(f"{current.name}: {current.state}, {_step_of(current)}", flush=True)
    if current.error:
        print(f"error: {current.error}", flush=True)
    return run_exit_code(current)


def delete(args: argparse.Namespace) -> int:
    """``delete RUN``: remove the run's directory, checkpoints included, as the Runs tab's Delete; a run that is
    going (queued, running, paused) is refused (RunError: exit 2)."""
    run_dir = run_dir_of(args.run, args.workspace)
    delete_run(run_dir)
    print(f"deleted {run_dir.name}")
    return 0


def _step_of(current: RunStatus) -> str:
    """``step 12/400`` (``?`` for a length not known yet)."""
    return f"step {current.step or 0}/{current.max_steps or '?'}"
