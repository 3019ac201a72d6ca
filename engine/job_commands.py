"""The ``evaluate`` and ``export`` commands of ``python -m engine``.

    python -m engine evaluate RUN_DIR [--data eval|train|PATH] [--checkpoint N] [--max-rows N]
    python -m engine export RUN_DIR --kind adapter|merged [--dtype float32|bfloat16|float16] [--out DIR]
                            [--checkpoint N] [--zip] [--push-to REPO_ID [--private]]

Both print their progress; with ``--job-dir`` (set by engine.jobs when the studio starts them) they also
keep its progress.json. Ctrl-C or SIGTERM cancels cleanly. A hub token is read from HF_TOKEN only.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from engine.export import DTYPES, KINDS


def add_commands(commands: Any) -> None:
    """Add the evaluate and export sub-commands to the CLI's sub-parsers."""
    evaluate = commands.add_parser("evaluate", help="score the base and the fine-tuned model of a run on a dataset")
    evaluate.add_argument("run_dir", type=Path)
    evaluate.add_argument(
        "--data", default="eval", help="eval (the run's eval set), train (its training rows) or a data file"
    )
    evaluate.add_argument("--checkpoint", type=int, help="evaluate this checkpoint (default: the final adapter/model)")
    evaluate.add_argument("--max-rows", type=int, help="score only the first N rows")
    evaluate.add_argument("--max-new-tokens", type=int, help="longest generated answer (default: from the references)")
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


def _quiet() -> None:
    import warnings

    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=UserWarning)


def _evaluate(args: argparse.Namespace) -> int:
    from engine.artifacts import ArtifactError
    from engine.config import ConfigError
    from engine.data import DataError
    from engine.jobs import Progress, run_job

    def work(progress: Progress) -> dict[str, Any]:
        _quiet()
        from engine.evaluate_run import evaluate
        from engine.evaluations import summary_text

        result = evaluate(args.run_dir, args.data, args.checkpoint, args.max_rows, args.max_new_tokens, progress)
        print(f"{summary_text(result)}  ({result['data']['rows']} rows; saved to {result['path']})", flush=True)
        return {"path": result["path"], "summary": summary_text(result), "id": result["id"]}

    return run_job(args.job_dir, work, (ArtifactError, ConfigError, DataError))


def _export(args: argparse.Namespace) -> int:
    from engine.artifacts import ArtifactError
    from engine.config import ConfigError
    from engine.export import plan_export
    from engine.jobs import Progress, run_job

    def work(progress: Progress) -> dict[str, Any]:
        plan = plan_export(args.run_dir, args.kind, args.dtype, args.out, args.checkpoint, args.workspace)
        progress.update(f"exporting {plan.run.name} to {plan.target}")
        _quiet()
        from engine.export_run import export

        result = export(plan, progress, args.push_to, args.private, args.zip)
        print(json.dumps(result, indent=1), flush=True)
        return result

    return run_job(args.job_dir, work, (ArtifactError, ConfigError))


def run_command(args: argparse.Namespace) -> int | None:
    """Run ``args.command`` if it is one of these; None otherwise."""
    if args.command == "evaluate":
        return _evaluate(args)
    if args.command == "export":
        return _export(args)
    return None
