"""The CLI's run commands: ``check``, ``train`` and ``resume`` (see engine.cli for the parser and the others).

``train`` and ``resume`` start the run as the studio does and follow it (engine.runs.follow), and exit with a code
that says how the run ended (run_exit_code), so a script can tell a stopped run from a completed one; with
``--detach`` they return once it has started, and ``wait`` (engine.cli.runs) gives that code later.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shlex
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from engine.cli.overrides import apply_overrides, parse_overrides
from engine.config import ConfigError, Problem, RunConfig, parse_config, read_config_data, save_config
from engine.store.paths import find_local_path
from engine.store.rundir import (
    ABORTED,
    COMPLETED,
    CONFIG_FILE,
    PRUNED,
    STOPPED,
    checkpoint_epoch,
)

if TYPE_CHECKING:
    from engine.store.rundir import RunStatus
    from engine.training.check import CheckReport

EXIT_FAILED, EXIT_BAD_INPUT, EXIT_STOPPED, EXIT_ABORTED = 1, 2, 3, 4
# How a followed run ended, as the command's exit code; a failed run exits 1 (2 when it refused its config).
RUN_EXIT_CODES = {COMPLETED: 0, STOPPED: EXIT_STOPPED, PRUNED: EXIT_STOPPED, ABORTED: EXIT_ABORTED}
EXIT_INTERRUPTED = 130  # the shell's code for a command ended by Ctrl-C
EXIT_CODES_HELP = (
    "exit codes of train, resume and wait: 0 the run completed; 1 it failed; 2 refused (a bad config, data or "
    "argument: nothing started); 3 stopped with a checkpoint (Ctrl-C, SIGTERM, a closed terminal or Stop elsewhere; "
    "resume continues it); 4 aborted (killed without a checkpoint); train and resume with --detach: 0 started; wait: "
    "130 when Ctrl-C ends the waiting (the run goes on). check, status, metrics, sweep-status, sweep-stop and the "
    "run controls (stop, pause, continue, save, abort): 0 done, 2 refused (a control that does not apply now). "
    "evaluate, export and sweep: 0 done, 1 crashed, 2 refused, 130 cancelled (Ctrl-C or "
    "SIGTERM); sweep --detach: 0 started."
)
# The fields a resume may change: its checkpoint holds the weights of the run's model and adapter, trained on its
# data by its method; how long and how it trains on may change.
RESUME_SECTIONS = ("train", "launch")
# A config file's line that names the run it is meant to continue: the arguments of ``train`` that make that run
# (``# starts-from: assets/presets/demo.yaml --set train.max_steps=250``). The presets for methods that refine a
# trained model (preference or reward learning after a supervised run) carry one.
STARTS_FROM = re.compile(r"^#\s*starts-from:\s*(\S.*?)\s*$", re.MULTILINE)


def error(message: str) -> int:
    """Print a refusal and return its exit code."""
    print(f"error: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


def load_run_config(path: Path, sets: list[str] | None, init_from: str | None = None) -> RunConfig:
    """The config file with the command line's ``--set`` (and ``--init-from``) applied, validated as a whole."""
    data = read_config_data(path)
    overrides = parse_overrides(sets)
    if init_from is not None:
        overrides += parse_overrides([f"model.init_from={init_from}"])
    return parse_config(apply_overrides(data, overrides, RunConfig))


def starting_run_note(args: argparse.Namespace, config: RunConfig) -> list[str]:
    """Lines saying that the config is meant to continue another run (its ``starts-from`` line) while it starts from
    the bare base model, with the two commands that chain them; [] otherwise."""
    if config.model.init_from:
        return []
    try:
        found = STARTS_FROM.search(Path(args.config).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        return []
    if found is None:
        return []
    first = shlex.split(found.group(1))
    first[0] = _shown_path(first[0])
    start_dir = Path(args.workspace) / "runs" / f"{Path(args.config).stem}-start"
    sets = [part for item in args.set or () for part in ("--set", item)]
    chain = [
        ["python", "-m", "engine", "train", *first, "--run-dir", str(start_dir)],
        ["python", "-m", "engine", "train", str(args.config), "--init-from", str(start_dir), *sets],
    ]
    return [
        f"warning: {Path(args.config).name} is meant to continue a run of {first[0]} (its starts-from line), but "
        f"model.init_from is empty: this run starts from the bare base model {config.model.name_or_path}. "
        "Train that run first, then this one from it (--init-from sets model.init_from):",
        *(f"  {shlex.join(command)}" for command in chain),
    ]


def _shown_path(name: str) -> str:
    """A config path of a starts-from line as this directory reaches it (they are written from the project's)."""
    found = find_local_path(name)
    if found is None:
        return name
    with contextlib.suppress(ValueError):
        return str(found.relative_to(Path.cwd()))
    return str(found)


def preflight(config: RunConfig, workspace: Path) -> CheckReport:
    """The checks a config passes before any run starts (``check`` and ``train`` share them): fields, the run it
    starts from (a run id is looked up in ``workspace``), dataset, hardware, the model's files and LoRA target
    modules. Raises ConfigError or DataError."""
    import warnings

    warnings.filterwarnings("ignore", category=FutureWarning)  # library deprecation notices, not the user's concern
    from engine.data.template_guard import TRAIN_BUDGET_S
    from engine.training.check import check_run

    return check_run(config, TRAIN_BUDGET_S, workspace)  # the training run's budget: check refuses what train would


def check(args: argparse.Namespace) -> int:
    """``check CONFIG``: validate the config and its dataset, print a summary; no training."""
    from engine.data import DataError

    config = load_run_config(args.config, args.set, args.init_from)
    try:
        report = preflight(config, args.workspace)
    except (ConfigError, DataError) as exc:
        return error(str(exc))
    print("\n".join([*report.lines(), *starting_run_note(args, config)]))
    print("ok: the config and dataset are ready to train")
    return 0


def folder_problem(path: Path) -> str | None:
    """Why a folder cannot be made at ``path`` (a file in the way, a folder where this user may not write); None
    when it can, or exists. Its nearest existing folder is tried with a folder made and removed at once: the
    permission bits say nothing to root, nor of a read-only mount."""
    existing = path = Path(path).absolute()
    try:
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
        if not existing.is_dir():
            return f"{existing} is a file, not a folder"
        if existing != path:
            os.rmdir(tempfile.mkdtemp(prefix=".probe-", dir=existing))
    except OSError as exc:
        return f"no folder can be made in {existing} ({exc.strerror or exc})"
    except ValueError as exc:  # a NUL byte
        return f"not a usable path ({exc})"
    return None


def train(args: argparse.Namespace) -> int:
    """``train CONFIG``: check the config, create the run, start it and follow it to its end."""
    from engine.data import DataError
    from engine.runs.control import RunError, create_and_start, new_run_dir_problem
    from engine.store.workspace import workspace_of

    config = load_run_config(args.config, args.set, args.init_from)
    # Refused before the checks, which take seconds.
    if args.run_dir is not None:
        made = folder_problem(args.run_dir)
        problem = f"cannot create the run directory {args.run_dir}: {made}" if made else None
        problem = problem or new_run_dir_problem(args.run_dir)
    else:
        made = folder_problem(args.workspace)
        problem = f"cannot make runs in the workspace {args.workspace}: {made}" if made else None
    if problem:
        return error(problem)
    try:
        # Refused here, with one line, before a run directory exists: not by a traceback from the worker.
        report = preflight(config, args.workspace)
    except (ConfigError, DataError) as exc:
        return error(str(exc))
    _teller(args.detach)("\n".join([*report.lines(), *starting_run_note(args, config)]))
    try:
        run_dir = create_and_start(config, workspace=args.workspace, run_dir=args.run_dir)
    except RunError as exc:
        return error(str(exc))
    except OSError as exc:  # the workspace's lock file cannot be made (a read-only workspace)
        workspace = args.workspace if args.run_dir is None else workspace_of(args.run_dir)
        return error(f"cannot start a run in {workspace}: {exc.strerror or exc}")
    if args.detach:
        return _detached(run_dir)
    print(f"run directory: {run_dir}", flush=True)
    return follow_run(run_dir, 0)


def _teller(detach: bool) -> Callable[[str], None]:
    """Where the lines about a run go: stdout, or stderr for a detached start (its stdout is the run directory)."""
    stream = sys.stderr if detach else sys.stdout
    return lambda text: print(text, file=stream, flush=True)


def _detached(run_dir: Path) -> int:
    """A started run left to itself: its directory alone on stdout (``run=$(python -m engine train ... --detach)``)."""
    print("the run goes on without this command: python -m engine wait RUN, status RUN or stop RUN", file=sys.stderr)
    print(run_dir, flush=True)
    return 0


def resume(args: argparse.Namespace) -> int:
    """``resume RUN_DIR``: continue a stopped, failed or aborted run from a checkpoint, with ``--set`` changes to
    how it trains, and follow it."""
    from engine.runs.control import RunError, resume_point, start
    from engine.runs.follow import log_offset

    run_dir = args.run_dir.resolve()
    try:
        checkpoint = resume_point(run_dir, args.checkpoint)
    except RunError as exc:
        return error(str(exc))
    _resumed_config(run_dir, args.set, checkpoint)  # checks and saves the --set changes
    _teller(args.detach)(f"resuming {run_dir} from checkpoint {checkpoint}")
    offset = log_offset(run_dir)
    try:
        start(run_dir, checkpoint)
    except RunError as exc:
        return error(str(exc))
    return _detached(run_dir) if args.detach else follow_run(run_dir, offset)


def _resumed_config(run_dir: Path, sets: list[str] | None, checkpoint: int) -> RunConfig:
    """The run's config with the ``--set`` changes, saved as its config.yaml when there are any; ConfigError for
    a field outside RESUME_SECTIONS, or a length that ends at or before ``checkpoint`` (checked before anything is
    saved)."""
    path = run_dir / CONFIG_FILE
    overrides = parse_overrides(sets)
    fixed = [override.key for override in overrides if override.path[0] not in RESUME_SECTIONS]
    if fixed:
        allowed = " and ".join(f"{section}.*" for section in RESUME_SECTIONS)
        message = (
            f"cannot change on resume: the checkpoint holds what the run's model, adapter, data and method made; "
            f"only {allowed} may change (start a new run from this one with train --init-from {run_dir})"
        )
        raise ConfigError([Problem(key, message) for key in fixed])
    config = parse_config(apply_overrides(read_config_data(path), overrides, RunConfig))
    problems = _ends_by_checkpoint(config, run_dir, checkpoint)
    if problems:
        raise ConfigError(problems)
    if overrides:
        save_config(config, path)
    return config


def _ends_by_checkpoint(config: RunConfig, run_dir: Path, checkpoint: int) -> list[Problem]:
    """A length the checkpoint has already trained: the run would complete at once, without training, and a
    completed run cannot be resumed again (``train.max_steps=60`` typed as "60 more" after step 103)."""
    resumable = "the run would complete at once and could never be resumed again"
    if config.train.max_steps > 0:
        if config.train.max_steps > checkpoint:
            return []
        message = f"{config.train.max_steps} steps end by the checkpoint's step {checkpoint}: {resumable}; give more"
        return [Problem("train.max_steps", message)]
    epoch = checkpoint_epoch(run_dir, checkpoint)
    if epoch is None or config.train.num_epochs > epoch + 1e-9:  # unreadable: the trainer says what is wrong
        return []
    message = f"{config.train.num_epochs:g} epochs end by the checkpoint's epoch {epoch:.2f}: {resumable}; give more"
    return [Problem("train.num_epochs", message)]


def follow_run(run_dir: Path, offset: int) -> int:
    """Follow the started run to its end (train.log's lines carry its method's metrics); the exit code for how
    it ended (run_exit_code)."""
    from engine.runs.follow import follow
    from engine.runs.status import status

    follow(run_dir, offset)
    return run_exit_code(status(run_dir))


def run_exit_code(ended: RunStatus) -> int:
    """How an ended run ended, as train's exit code: RUN_EXIT_CODES, else a failure (2 when its worker refused the
    config or the data, 1 otherwise)."""
    if ended.state in RUN_EXIT_CODES:
        return RUN_EXIT_CODES[ended.state]
    return EXIT_BAD_INPUT if ended.exit_code == EXIT_BAD_INPUT else EXIT_FAILED
