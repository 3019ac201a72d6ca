"""The headless command line.

    python -m engine train CONFIG.yaml [--run-dir DIR]   train in the foreground, writing DIR
    python -m engine resume DIR [--checkpoint N]         continue a stopped, aborted or crashed run
    python -m engine check CONFIG.yaml [--workspace DIR] validate config and dataset without training
    python -m engine evaluate DIR [--data eval|train|PATH] [--checkpoint N] [--max-rows N]
                                                         score base and fine-tuned model
    python -m engine export DIR --kind adapter|merged [--dtype float32|bfloat16|float16] [--out DIR]
                            [--checkpoint N] [--zip] [--push-to REPO_ID [--private]]
                                                         save the adapter or a merged model
    python -m engine sweep SWEEP.yaml [--workspace DIR]  run (or continue) a hyperparameter sweep
    python -m engine sweep-status WORKSPACE [NAME]       the sweeps, or one sweep's trials ranked

A sweep prints a line per trial; Ctrl-C stops the current trial's run with a checkpoint (exit 130) and the same
command continues the sweep, as it does after the driver was killed.

Evaluate and export print their progress; with ``--job-dir`` (set by engine.jobs when the studio starts them)
they also keep its progress.json. Ctrl-C or SIGTERM cancels them cleanly. A hub token is read from HF_TOKEN only.

``train`` and ``resume`` start the run as the studio does and follow it (engine.runs.follow): its log on stdout;
Ctrl-C, SIGTERM or a closed terminal stop it with a checkpoint, and ``resume`` continues it.
``supervise`` and ``worker`` are the internal halves of a run (engine.runs.start starts ``supervise`` in the
background; it starts ``worker``). ``chat-worker`` serves one model to engine.chat.client.ChatClient.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.config import ConfigError, RunConfig, load_config
from engine.export.exports import DTYPES, KINDS

if TYPE_CHECKING:
    from engine.training.check import CheckReport

EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130  # the shell's code for a command ended by Ctrl-C


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m engine", description="Fine-tune language models headless.")
    commands = parser.add_subparsers(dest="command", required=True)
    train = commands.add_parser("train", help="train in the foreground from a YAML config")
    train.add_argument("config", type=Path, help="the run's YAML config")
    train.add_argument("--run-dir", type=Path, help="run directory to create (default: workspace/runs/<id>)")
    train.add_argument("--workspace", type=Path, default=Path("workspace"), help="where new runs go by default")
    resume = commands.add_parser("resume", help="continue a stopped, aborted or crashed run from a checkpoint")
    resume.add_argument("run_dir", type=Path)
    resume.add_argument("--checkpoint", type=int, help="checkpoint step (default: the newest)")
    check = commands.add_parser("check", help="validate a config and its dataset without training")
    check.add_argument("config", type=Path)
    check.add_argument(
        "--workspace", type=Path, default=Path("workspace"), help="where a run id in model.init_from is looked up"
    )
    _add_job_commands(commands)
    _add_sweep_commands(commands)
    for internal in ("supervise", "worker"):
        command = commands.add_parser(internal, help=argparse.SUPPRESS)
        command.add_argument("run_dir", type=Path)
        command.add_argument("--checkpoint", type=int)
    standby = commands.add_parser("standby", help=argparse.SUPPRESS)
    standby.add_argument("workspace", type=Path)
    standby.add_argument("--owner", type=int, required=True, help="pid of the studio; unclaimed, exit when it is gone")
    commands.add_parser("standby-worker", help=argparse.SUPPRESS)
    fork_server = commands.add_parser("fork-server", help=argparse.SUPPRESS)
    fork_server.add_argument("socket", type=Path, help="where to listen (engine.store.fork_server)")
    fork_server.add_argument("--idle", type=float, default=None, help="exit after this many seconds without a request")
    chat = commands.add_parser("chat-worker", help=argparse.SUPPRESS)
    chat.add_argument("--base", help="base model (hub id or local directory) when no run is given")
    chat.add_argument("--run-dir", type=Path, help="run whose final adapter / model (or checkpoint) to load")
    chat.add_argument("--checkpoint", type=int, help="checkpoint step of the run")
    chat.add_argument("--workspace", type=Path, help="workspace whose active runs the worker makes room for")
    return parser


def _add_job_commands(commands: Any) -> None:
    """The evaluate and export sub-commands (background jobs when the studio starts them with --job-dir)."""
    evaluate = commands.add_parser("evaluate", help="score the base and the fine-tuned model of a run on a dataset")
    evaluate.add_argument("run_dir", type=Path)
    evaluate.add_argument(
        "--data", default="eval", help="eval (the run's eval set), train (its training rows) or a data file"
    )
    evaluate.add_argument("--checkpoint", type=int, help="evaluate this checkpoint (default: the final adapter/model)")
    evaluate.add_argument("--max-rows", type=int, help="score only the first N rows")
    evaluate.add_argument(
        "--max-new-tokens",
        type=int,
        help="longest generated answer (default: from the references; grpo runs: grpo.max_completion_length)",
    )
    evaluate.add_argument("--job-dir", type=Path, help=argparse.SUPPRESS)
    export = commands.add_parser("export", help="save a run's adapter, or merge it into its base, as a model folder")
    export.add_argument("run_dir", type=Path)
    export.add_argument("--kind", choices=KINDS, default="adapter", help="adapter files, or a merged full model")
    export.add_argument("--dtype", choices=DTYPES, default="float32", help="dtype of merged weights")
    export.add_argument("--out", help="export name or directory inside WORKSPACE/exports (default: from the run id)")
    export.add_argument("--workspace", type=Path, help="workspace whose exports/ receives it (default: the run's)")
    export.add_argument("--checkpoint", type=int, help="export this checkpoint instead of the final result")
    export.add_argument("--zip", action="store_true", help="also write DIR.zip beside the export")
    export.add_argument("--push-to", metavar="REPO_ID", help="upload to this hub model repo (token from HF_TOKEN)")
    export.add_argument("--private", action="store_true", help="create the hub repo as private")
    export.add_argument("--job-dir", type=Path, help=argparse.SUPPRESS)


def _add_sweep_commands(commands: Any) -> None:
    """The sweep and sweep-status sub-commands."""
    sweep = commands.add_parser("sweep", help="run (or continue) a hyperparameter sweep in the foreground")
    sweep.add_argument("sweep", type=Path, help="the sweep's YAML file")
    sweep.add_argument("--workspace", type=Path, default=Path("workspace"), help="where its runs and study go")
    status = commands.add_parser("sweep-status", help="the sweeps of a workspace, or one sweep's trials ranked")
    status.add_argument("workspace", type=Path)
    status.add_argument("name", nargs="?", help="the sweep whose trials to list (default: list the sweeps)")


def _quiet() -> None:
    import warnings

    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=UserWarning)


def _evaluate(args: argparse.Namespace) -> int:
    from engine.config import ConfigError
    from engine.data import DataError
    from engine.jobs import Progress, run_job
    from engine.runs.artifacts import ArtifactError

    def work(progress: Progress) -> dict[str, Any]:
        _quiet()
        from engine.evaluate.evaluations import summary_text
        from engine.evaluate.worker import evaluate

        result = evaluate(args.run_dir, args.data, args.checkpoint, args.max_rows, args.max_new_tokens, progress)
        print(f"{summary_text(result)}  ({result['data']['rows']} rows; saved to {result['path']})", flush=True)
        return {"path": result["path"], "summary": summary_text(result), "id": result["id"]}

    return run_job(args.job_dir, work, (ArtifactError, ConfigError, DataError))


def _export(args: argparse.Namespace) -> int:
    from engine.config import ConfigError
    from engine.export.exports import plan_export
    from engine.jobs import Progress, run_job
    from engine.runs.artifacts import ArtifactError

    def work(progress: Progress) -> dict[str, Any]:
        plan = plan_export(args.run_dir, args.kind, args.dtype, args.out, args.checkpoint, args.workspace)
        progress.update(f"exporting {plan.run.name} to {plan.target}")
        _quiet()
        from engine.export.worker import export

        result = export(plan, progress, args.push_to, args.private, args.zip)
        print(json.dumps(result, indent=1), flush=True)
        return result

    return run_job(args.job_dir, work, (ArtifactError, ConfigError))


def exit_at_once(code: int) -> int:
    """End a training worker (or a CLI command that has loaded the data and model libraries) without the
    interpreter's teardown, which takes over a second once torch, transformers and TRL are loaded, and in which
    native thread pools can abort the process: a Stop is done when the worker is gone, and by now every file of
    the run is written and closed (status atomically, metrics line by line, checkpoints by their savers).

    W&B, TensorBoard and trackio writers finish in exit hooks, so a worker that reported to one leaves the usual way.
    """
    from engine.training.trackers import writers_open

    if writers_open():
        return code
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _error(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


def _preflight(config: RunConfig, workspace: Path) -> CheckReport:
    """The checks a config passes before any run starts (``check`` and ``train`` share them): fields, the run it
    starts from (a run id is looked up in ``workspace``), dataset, hardware, the model's files and LoRA target
    modules. Raises ConfigError or DataError."""
    import warnings

    warnings.filterwarnings("ignore", category=FutureWarning)  # library deprecation notices, not the user's concern
    from engine.data.template_guard import TRAIN_BUDGET_S
    from engine.training.check import check_run

    return check_run(config, TRAIN_BUDGET_S, workspace)  # the training run's budget: check refuses what train would


def _train(args: argparse.Namespace) -> int:
    from engine.data import DataError
    from engine.runs.control import RunError, create_run, start, start_lock
    from engine.runs.follow import follow
    from engine.store.workspace import workspace_of

    config = load_config(args.config)
    try:
        # Refused here, with one line, before a run directory exists: not by a traceback from the worker.
        print("\n".join(_preflight(config, args.workspace).lines()), flush=True)
    except (ConfigError, DataError) as exc:
        return _error(str(exc))
    workspace = args.workspace if args.run_dir is None else workspace_of(args.run_dir)
    try:
        # Under the start lock, and never queued: a studio's queue would otherwise start this run a second time.
        with start_lock(workspace) if workspace is not None else contextlib.nullcontext():
            run_dir = create_run(config, workspace=args.workspace, run_dir=args.run_dir)
            start(run_dir)
    except RunError as exc:
        return _error(str(exc))
    print(f"run directory: {run_dir}", flush=True)
    return follow(run_dir, 0)


def _resume(args: argparse.Namespace) -> int:
    from engine.runs.control import RunError, resume_point, start
    from engine.runs.follow import follow, log_offset

    run_dir = args.run_dir.resolve()
    try:
        checkpoint = resume_point(run_dir, args.checkpoint)
    except RunError as exc:
        return _error(str(exc))
    print(f"resuming {run_dir} from checkpoint {checkpoint}", flush=True)
    offset = log_offset(run_dir)
    try:
        start(run_dir, checkpoint)
    except RunError as exc:
        return _error(str(exc))
    return follow(run_dir, offset)


def _check(args: argparse.Namespace) -> int:
    from engine.data import DataError

    config = load_config(args.config)
    try:
        report = _preflight(config, args.workspace)
    except (ConfigError, DataError) as exc:
        return _error(str(exc))
    print("\n".join(report.lines()))
    print("ok: the config and dataset are ready to train")
    return 0


def _sweep(args: argparse.Namespace) -> int:
    import shlex
    import signal
    import threading

    import optuna

    from engine.sweeps import SweepError, execute_sweep, load_sweep

    optuna.logging.set_verbosity(optuna.logging.WARNING)  # the sweep prints its own line per trial
    config = load_sweep(args.sweep)
    stop = threading.Event()

    def request_stop(_signum: int, _frame: object) -> None:
        if not stop.is_set():
            print("stopping the current trial's run (it saves a checkpoint) ...", flush=True)
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, request_stop)
    try:
        result = execute_sweep(
            config,
            args.workspace,
            sweep_text=args.sweep.read_text(encoding="utf-8"),
            stop=stop,
            echo=lambda line: print(line, flush=True),
        )
    except SweepError as exc:
        return _error(str(exc))
    if result.interrupted:
        again = shlex.join(["python", "-m", "engine", "sweep", str(args.sweep), "--workspace", str(args.workspace)])
        print(f"to continue: {again}", flush=True)
        return EXIT_INTERRUPTED
    return 0


def _sweep_status(args: argparse.Namespace) -> int:
    from engine.sweeps import SweepError, list_sweeps, sweep_status
    from engine.sweeps.summary import progress_line, trials_table

    if args.name is None:
        sweeps = list_sweeps(args.workspace)
        print("\n".join(map(progress_line, sweeps)) if sweeps else f"no sweeps in {args.workspace}")
        return 0
    try:
        summary = sweep_status(args.workspace, args.name)
    except SweepError as exc:
        return _error(str(exc))
    print(progress_line(summary))
    print("\n".join(trials_table(summary)))
    return 0


def _run_forked(command: str, argv: list[str]) -> int | None:
    """On a machine without GPUs, hand a command that would import the training libraries to the warm fork server
    (engine.store.forks), which has them imported, and wait for it: its exit code, or None to run it here."""
    from engine.store import fork_server, forks

    if command not in forks.WAITED_COMMANDS or fork_server.forked():
        return None
    from engine.runs.devices import has_gpus

    return None if has_gpus() else forks.run_forked(argv)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m engine``; returns the exit code."""
    args = _parser().parse_args(argv)
    warm = _run_forked(args.command, sys.argv[1:] if argv is None else argv)
    if warm is not None:
        return warm
    try:
        if args.command == "train":
            return exit_at_once(_train(args))
        if args.command == "resume":
            return _resume(args)
        if args.command == "check":
            # Its pre-flight loads tokenizers and data readers whose native thread pools can abort the
            # interpreter's teardown ("terminate called without an active exception", exit -6): it skips it.
            return exit_at_once(_check(args))
        if args.command == "evaluate":
            return _evaluate(args)
        if args.command == "export":
            return _export(args)
        if args.command == "sweep":
            return _sweep(args)
        if args.command == "sweep-status":
            return _sweep_status(args)
        if args.command == "chat-worker":
            from engine.chat.client import ModelSpec
            from engine.chat.worker import serve

            return serve(ModelSpec(args.base, args.run_dir, args.checkpoint), args.workspace)
        if args.command == "standby":
            from engine.runs.standby import serve_standby

            return serve_standby(args.workspace, args.owner)
        if args.command == "standby-worker":
            from engine.training.warm_worker import serve_standby_worker

            return exit_at_once(serve_standby_worker())
        if args.command == "fork-server":
            from engine.store.fork_server import serve
            from engine.training.warm_worker import training_imports

            return exit_at_once(serve(args.socket, training_imports, main, args.idle))
        if args.command == "supervise":
            from engine.runs.supervisor import supervise

            return supervise(args.run_dir.resolve(), args.checkpoint)
        from engine.training.stopping import StopRequest

        stop = StopRequest()
        stop.install()  # before the slow imports, so a Stop while starting is a clean stop
        from engine.training.recipe import run

        return exit_at_once(run(args.run_dir.resolve(), args.checkpoint, stop))
    except ConfigError as exc:
        return _error(str(exc))
