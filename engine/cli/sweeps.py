"""The CLI's sweep commands: ``sweep`` (in the foreground, or its driver started in the background with
``--detach``, as the studio's Start sweep does: engine.sweeps.control), ``sweep-status`` and ``sweep-stop``.

    python -m engine sweep SWEEP.yaml [--workspace DIR] [--set KEY=VALUE ...] [--detach]
    python -m engine sweep-status WORKSPACE [NAME]
    python -m engine sweep-stop WORKSPACE NAME

A sweep in the foreground prints a line per trial; Ctrl-C stops the current trial's run with a checkpoint (exit 130)
and the same command continues the sweep, as it does after the driver was killed; so does ``sweep-stop`` for a
driver in the background, and ``sweep --detach`` continues it there.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.cli.overrides import SET_HELP, add_set_option, apply_overrides, parse_overrides
from engine.cli.train import EXIT_INTERRUPTED, error

if TYPE_CHECKING:
    from engine.sweeps.config import SweepConfig


def add_sweep_commands(commands: Any) -> None:
    """The sweep, sweep-status and sweep-stop sub-commands."""
    sweep = commands.add_parser(
        "sweep", help="run (or continue) a hyperparameter sweep in the foreground, or in the background (--detach)"
    )
    sweep.add_argument("sweep", type=Path, help="the sweep's YAML file")
    sweep.add_argument("--workspace", type=Path, default=Path("workspace"), help="where its runs and study go")
    add_set_option(
        sweep,
        f"{SET_HELP}. KEY is a field of the sweep file: trials=2, base.train.max_steps=20 (its base run), "
        'space."train.learning_rate".high=0.01',
    )
    sweep.add_argument(
        "--detach",
        action="store_true",
        help="start the sweep's driver in the background and return at once (exit 0), the sweep's folder alone on "
        "stdout; sweep-status and sweep-stop reach it, and the same command continues a stopped one",
    )
    status = commands.add_parser("sweep-status", help="the sweeps of a workspace, or one sweep's trials ranked")
    status.add_argument("workspace", type=Path, help="the workspace whose sweeps to list")
    status.add_argument("name", nargs="?", help="the sweep whose trials to list (default: list the sweeps)")
    stop = commands.add_parser(
        "sweep-stop", help="stop a sweep's driver: its current trial's run saves a checkpoint; sweep continues it"
    )
    stop.add_argument("workspace", type=Path, help="the workspace of the sweep")
    stop.add_argument("name", help="the sweep's name")


def sweep(args: argparse.Namespace) -> int:
    """``sweep SWEEP.yaml``: run the sweep here (0 done, 130 stopped by Ctrl-C or SIGTERM), or with ``--detach``
    start its driver in the background (0 started)."""
    from engine.sweeps import SweepError

    config, text = _load_sweep(args.sweep, args.set)
    try:
        return _detached(args, config, text) if args.detach else _in_the_foreground(args, config, text)
    except SweepError as exc:
        return error(str(exc))


def _detached(args: argparse.Namespace, config: SweepConfig, text: str) -> int:
    """The driver started as the studio starts it: the sweep's folder alone on stdout, the rest on stderr."""
    from engine.sweeps.control import start_sweep

    launch = start_sweep(args.workspace, text or config, args.sweep.parent)
    print(f"the sweep's driver (pid {launch.pid}) goes on without this command; its log: {launch.log}", file=sys.stderr)
    print(f"python -m engine sweep-status {args.workspace} {launch.name}; sweep-stop stops it", file=sys.stderr)
    print(launch.folder, flush=True)
    return 0


def _in_the_foreground(args: argparse.Namespace, config: SweepConfig, text: str) -> int:
    import shlex
    import signal
    import threading

    import optuna

    from engine.sweeps import execute_sweep

    optuna.logging.set_verbosity(optuna.logging.WARNING)  # the sweep prints its own line per trial
    stop = threading.Event()

    def request_stop(_signum: int, _frame: object) -> None:
        if not stop.is_set():
            print("stopping the current trial's run (it saves a checkpoint) ...", flush=True)
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, request_stop)
    result = execute_sweep(
        config, args.workspace, sweep_text=text, stop=stop, echo=lambda line: print(line, flush=True)
    )
    if result.interrupted:
        sets = [part for item in args.set or () for part in ("--set", item)]
        again = ["python", "-m", "engine", "sweep", str(args.sweep), "--workspace", str(args.workspace), *sets]
        print(f"to continue: {shlex.join(again)}", flush=True)
        return EXIT_INTERRUPTED
    return 0


def _load_sweep(path: Path, sets: list[str] | None) -> tuple[SweepConfig, str]:
    """The sweep file with the command line's ``--set`` applied, and the text to keep as its sweep.yaml (the file
    as it is, or, changed, the sweep written out with its base inline)."""
    import yaml

    from engine.sweeps.config import SweepConfig, load_base, load_sweep, parse_sweep
    from engine.sweeps.control import config_yaml

    overrides = parse_overrides(sets)
    try:
        text = path.read_text(encoding="utf-8")
        data = yaml.safe_load(text)
    except (OSError, UnicodeDecodeError, yaml.YAMLError, RecursionError):
        return load_sweep(path), ""  # it raises ConfigError with its message for a file it cannot read
    if not overrides:
        return parse_sweep(data, path.parent), text
    if not isinstance(data, dict):
        return parse_sweep(data, path.parent), text  # the message for a file that is not a mapping
    if isinstance(data.get("base"), str) and any(override.path[0] == "base" for override in overrides):
        # A base named by its file is changed field by field: read it first, as the sweep would.
        data = {**data, "base": yaml.safe_load(load_base(data["base"], path.parent).to_yaml())}
    config = parse_sweep(apply_overrides(data, overrides, SweepConfig), path.parent)
    return config, config_yaml(config)


def sweep_status(args: argparse.Namespace) -> int:
    """``sweep-status WORKSPACE [NAME]``: a line per sweep, or one sweep's trials ranked."""
    from engine.sweeps import SweepError, list_sweeps, sweep_status
    from engine.sweeps.summary import progress_line, trials_table

    if args.name is None:
        sweeps = list_sweeps(args.workspace)
        print("\n".join(map(progress_line, sweeps)) if sweeps else f"no sweeps in {args.workspace}")
        return 0
    try:
        summary = sweep_status(args.workspace, args.name)
    except SweepError as exc:
        return error(str(exc))
    print(progress_line(summary))
    print("\n".join(trials_table(summary)))
    return 0


def sweep_stop(args: argparse.Namespace) -> int:
    """``sweep-stop WORKSPACE NAME``: ask the sweep's driver to stop (its current trial's run saves a checkpoint);
    2 when no driver runs it."""
    from engine.sweeps.control import stop_sweep

    if not stop_sweep(args.workspace, args.name):
        return error(f"no driver runs the sweep {args.name} in {args.workspace}; nothing to stop")
    print(f"stopping the sweep {args.name}: its current trial's run saves a checkpoint; sweep continues it")
    return 0
