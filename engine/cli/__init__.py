"""The headless command line.

    python -m engine train CONFIG.yaml [--run-dir DIR] [--set KEY=VALUE ...] [--init-from RUN] [--detach]
                                                         train in the foreground (or start it), writing DIR
    python -m engine resume DIR [--checkpoint N] [--set train.KEY=VALUE ...] [--detach]
                                                         continue a stopped, aborted or crashed run
    python -m engine check CONFIG.yaml [--workspace DIR] [--set KEY=VALUE ...] [--init-from RUN]
                                                         validate config and dataset without training
    python -m engine evaluate DIR [--data eval|train|PATH] [--checkpoint N] [--max-rows N]
                                                         score base and fine-tuned model
    python -m engine export DIR --kind adapter|merged|gguf|gguf-lora [--dtype float32|bfloat16|float16] [--out DIR]
                            [--gguf-type f16|bf16|q8_0|q5_1|q5_0|q4_1|q4_0]
                            [--checkpoint N] [--zip] [--push-to REPO_ID [--private]]
                                                         save the adapter, a merged model, or GGUF + Modelfile
    python -m engine benchmark DIR [--task NAME ...] [--task-file PATH ...] [--limit N] [--num-fewshot N]
                                   [--chat-template] [--checkpoint N]
                                                         lm-eval tasks on the base and fine-tuned model
    python -m engine sweep SWEEP.yaml [--workspace DIR] [--set KEY=VALUE ...] [--detach]
                                                         run (or continue) a hyperparameter sweep
    python -m engine sweep-status WORKSPACE [NAME]       the sweeps, or one sweep's trials ranked
    python -m engine sweep-stop WORKSPACE NAME           stop a sweep's driver (engine.cli.sweeps)
    python -m engine status [RUN] [--workspace DIR] [--json]
                                                         a run's state and progress, or the workspace's runs
    python -m engine stop|pause|continue|save|abort RUN [--workspace DIR]
                                                         the Monitor's controls (engine.cli.runs)
    python -m engine metrics RUN [--workspace DIR] [--follow]
                                                         a run's metric events, one JSON object a line
    python -m engine wait RUN [--workspace DIR]          until the run has ended; exit code as train's
    python -m engine delete RUN [--workspace DIR]        remove a run that is not going, checkpoints included

A sweep prints a line per trial; Ctrl-C stops the current trial's run with a checkpoint (exit 130) and the same
command continues the sweep, as it does after the driver was killed (engine.cli.sweeps).

Evaluate, export and benchmark print their progress; with ``--job-dir`` (set by engine.runs.jobs when the studio
starts them) they also keep its progress.json. Ctrl-C or SIGTERM cancels them cleanly. A hub token is read from
HF_TOKEN only.

``--set`` changes one field of the file for this command (engine.cli.overrides). ``train`` and ``resume`` start
the run as the studio does and follow it (engine.cli.train): its log on stdout, with its method's own metrics in
each step's line; Ctrl-C, SIGTERM or a closed terminal stop it with a checkpoint, and ``resume`` continues it. Their
exit code says how the run ended (engine.cli.train.EXIT_CODES_HELP). With ``--detach`` they start the run and return,
and ``wait`` gives the same exit code later.
``supervise`` and ``worker`` are the internal halves of a run (engine.runs.start starts ``supervise`` in the
background; it starts ``worker``). ``chat-worker`` serves one model to engine.chat.client.ChatClient.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from engine.cli import runs as cli_runs
from engine.cli import train as cli_train
from engine.cli.benchmark import add_benchmark_command, benchmark
from engine.cli.overrides import SET_HELP, add_set_option
from engine.cli.sweeps import add_sweep_commands, sweep, sweep_status, sweep_stop
from engine.cli.train import EXIT_CODES_HELP, RESUME_SECTIONS, error, folder_problem
from engine.config import ConfigError
from engine.export.exports import DTYPES, KINDS
from engine.export.gguf.quant_types import DEFAULT_GGUF_TYPE, GGUF_TYPES

# The commands engine.runs, the studio and the fork server start; not for a person, so not in --help.
INTERNAL_COMMANDS = ("supervise", "worker", "standby", "standby-worker", "fork-server", "chat-worker")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m engine", description="Fine-tune language models headless.", epilog=EXIT_CODES_HELP
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    train = commands.add_parser("train", help="train in the foreground from a YAML config", epilog=EXIT_CODES_HELP)
    train.add_argument("config", type=Path, help="the run's YAML config (a preset such as assets/presets/demo.yaml)")
    train.add_argument("--run-dir", type=Path, help="run directory to create (default: workspace/runs/<id>)")
    train.add_argument("--workspace", type=Path, default=Path("workspace"), help="where new runs go by default")
    _add_config_options(train)
    _add_detach_option(train)
    resume = commands.add_parser(
        "resume", help="continue a stopped, aborted or crashed run from a checkpoint", epilog=EXIT_CODES_HELP
    )
    resume.add_argument("run_dir", type=Path, help="the run's directory")
    resume.add_argument("--checkpoint", type=_count, help="checkpoint step (default: the newest)")
    add_set_option(
        resume,
        f"{SET_HELP}; only {' and '.join(f'{name}.*' for name in RESUME_SECTIONS)} (train.max_steps=200 trains "
        "on to step 200), saved in the run's config.yaml",
    )
    _add_detach_option(resume)
    check = commands.add_parser("check", help="validate a config and its dataset without training")
    check.add_argument("config", type=Path, help="the run's YAML config")
    check.add_argument(
        "--workspace",
        type=Path,
        default=Path("workspace"),
        help="where a run id (model.init_from, a teacher) is looked up",
    )
    _add_config_options(check)
    _add_job_commands(commands)
    add_benchmark_command(commands, _count, _positive)
    add_sweep_commands(commands)
    cli_runs.add_run_commands(commands)
    _add_internal_commands(commands)
    return parser


def _add_detach_option(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--detach",
        action="store_true",
        help="start the run and return at once (exit 0), its directory alone on stdout, the rest on stderr; the run "
        "goes on without this command: wait, status, metrics --follow and stop reach it",
    )


def _add_config_options(command: argparse.ArgumentParser) -> None:
    """--set and --init-from, which change the config file's fields for this command."""
    add_set_option(command, SET_HELP)
    command.add_argument(
        "--init-from",
        metavar="RUN",
        help="start from this run's weights (a run id of the workspace or a run directory): sets model.init_from",
    )


def _add_internal_commands(commands: Any) -> None:
    """The halves of a run, the standby and fork servers, and the chat worker: added without help, so --help leaves
    them out (INTERNAL_COMMANDS)."""
    for internal in ("supervise", "worker"):
        command = commands.add_parser(internal)
        command.add_argument("run_dir", type=Path, help="the run's directory")
        command.add_argument("--checkpoint", type=int)
    standby = commands.add_parser("standby")
    standby.add_argument("workspace", type=Path, help="the studio's workspace")
    standby.add_argument("--owner", type=int, required=True, help="pid of the studio; unclaimed, exit when it is gone")
    commands.add_parser("standby-worker")
    fork_server = commands.add_parser("fork-server")
    fork_server.add_argument("socket", type=Path, help="where to listen (engine.store.fork_server)")
    fork_server.add_argument("--idle", type=float, default=None, help="exit after this many seconds without a request")
    chat = commands.add_parser("chat-worker")
    chat.add_argument("--base", help="base model (hub id or local directory) when no run is given")
    chat.add_argument("--run-dir", type=Path, help="run whose final adapter / model (or checkpoint) to load")
    chat.add_argument("--checkpoint", type=int, help="checkpoint step of the run")
    chat.add_argument("--workspace", type=Path, help="workspace whose active runs the worker makes room for")
    # The list of commands in --help names only those with help; its usage line names the rest unless told not to.
    commands.metavar = "{" + ",".join(name for name in commands.choices if name not in INTERNAL_COMMANDS) + "}"


def _count(text: str) -> int:
    """A whole number >= 0 (a checkpoint step)."""
    return _whole(text, 0)


def _positive(text: str) -> int:
    """A whole number >= 1 (rows, tokens)."""
    return _whole(text, 1)


def _whole(text: str, least: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < least:
        raise argparse.ArgumentTypeError(f"must be {least} or more, not {value}")
    return value


def _add_job_commands(commands: Any) -> None:
    """The evaluate and export sub-commands (background jobs when the studio starts them with --job-dir)."""
    evaluate = commands.add_parser("evaluate", help="score the base and the fine-tuned model of a run on a dataset")
    evaluate.add_argument("run_dir", type=Path, help="the run's directory")
    evaluate.add_argument(
        "--data", default="eval", help="eval (the run's eval set), train (its training rows) or a data file"
    )
    evaluate.add_argument(
        "--checkpoint", type=_count, help="evaluate this checkpoint (default: the final adapter/model)"
    )
    evaluate.add_argument("--max-rows", type=_positive, metavar="N", help="score only the first N rows")
    evaluate.add_argument(
        "--max-new-tokens",
        type=_positive,
        metavar="N",
        help="longest generated answer (default: from the references; grpo runs: grpo.max_completion_length)",
    )
    evaluate.add_argument("--job-dir", type=Path, help=argparse.SUPPRESS)
    export = commands.add_parser("export", help="save a run's adapter, or merge it into its base, as a model folder")
    export.add_argument("run_dir", type=Path, help="the run's directory")
    export.add_argument(
        "--kind",
        choices=KINDS,
        default="adapter",
        help="adapter files, a merged full model, gguf (merged, one GGUF file + Ollama Modelfile) or gguf-lora",
    )
    export.add_argument("--dtype", choices=DTYPES, default="float32", help="dtype of merged weights")
    export.add_argument(
        "--gguf-type",
        choices=tuple(GGUF_TYPES),
        default=DEFAULT_GGUF_TYPE,
        help="tensor type of a gguf export (K-quants need llama.cpp's llama-quantize)",
    )
    export.add_argument("--out", help="export name or directory inside WORKSPACE/exports (default: from the run id)")
    export.add_argument("--workspace", type=Path, help="workspace whose exports/ receives it (default: the run's)")
    export.add_argument("--checkpoint", type=_count, help="export this checkpoint instead of the final result")
    export.add_argument("--zip", action="store_true", help="also write DIR.zip beside the export")
    export.add_argument("--push-to", metavar="REPO_ID", help="upload to this hub model repo (token from HF_TOKEN)")
    export.add_argument("--private", action="store_true", help="create the hub repo as private")
    export.add_argument("--job-dir", type=Path, help=argparse.SUPPRESS)


def _quiet() -> None:
    import warnings

    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=UserWarning)


def _evaluate(args: argparse.Namespace) -> int:
    from engine.config import ConfigError
    from engine.data import DataError
    from engine.runs.artifacts import ArtifactError
    from engine.runs.jobs import Progress, run_job

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
    from engine.export.exports import ExportError, plan_export
    from engine.runs.artifacts import ArtifactError
    from engine.runs.jobs import Progress, run_job

    def work(progress: Progress) -> dict[str, Any]:
        plan = plan_export(
            args.run_dir, args.kind, args.dtype, args.out, args.checkpoint, args.workspace, args.gguf_type
        )
        problem = folder_problem(plan.target.parent)
        if problem:  # before the weights are loaded, and not as a traceback from the writer
            raise ExportError(f"cannot write the export into {plan.target.parent}: {problem}")
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


def _on_run(args: argparse.Namespace) -> int:
    """status, the run controls, metrics, wait and delete; a RUN that names no run is refused with a message."""
    from engine.runs.control import RunError

    named = {"status": cli_runs.status, "metrics": cli_runs.metrics, "wait": cli_runs.wait, "delete": cli_runs.delete}
    command = named.get(args.command, cli_runs.control)
    try:
        return command(args)
    except RunError as exc:
        return error(str(exc))


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
            return exit_at_once(cli_train.train(args))
        if args.command == "resume":
            return cli_train.resume(args)
        if args.command == "check":
            # Its pre-flight loads tokenizers and data readers whose native thread pools can abort the
            # interpreter's teardown ("terminate called without an active exception", exit -6): it skips it.
            return exit_at_once(cli_train.check(args))
        if args.command == "evaluate":
            return _evaluate(args)
        if args.command == "export":
            return _export(args)
        if args.command == "benchmark":
            return benchmark(args)
        if args.command == "sweep":
            return sweep(args)
        if args.command == "sweep-stop":
            return sweep_stop(args)
        if args.command in cli_runs.RUN_COMMANDS:
            return _on_run(args)
        if args.command == "sweep-status":
            return sweep_status(args)
        if args.command == "chat-worker":
            from engine.chat.spec import ModelSpec
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
        return error(str(exc))
