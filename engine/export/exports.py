"""Export a run: what may be exported where, checked before anything starts, and the background job.

``plan_export`` refuses, with a message that says what to do, a missing run, a running run, a run without
the weights asked for, and a bad target: one outside ``WORKSPACE/exports``, an existing file or non-empty
directory. ``start_export`` runs ``python -m engine export`` as a job (engine.runs.jobs); a hub token goes to the
job through its environment only. The work itself is engine.export.worker. No ML library is imported here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from engine.config.names import name_problem
from engine.export.gguf.architectures import GgufError, check_gguf_source
from engine.export.gguf.quant_types import DEFAULT_GGUF_TYPE, GGUF_TYPES
from engine.runs import jobs
from engine.runs.artifacts import ArtifactError, FinishedRun, TrainedWeights, open_run, trained_weights
from engine.store.paths import is_hub_id
from engine.store.workspace import exports_dir, workspace_of

# gguf: merged, as one llama.cpp file + Ollama Modelfile; gguf-lora: the adapter alone, in llama.cpp's format
KINDS = ("adapter", "merged", "gguf", "gguf-lora")
DTYPES = ("float32", "bfloat16", "float16")
JOB_KIND = "export"


class ExportError(ArtifactError):
    """An export that cannot be done; ``result`` holds what was done anyway (a push that failed after saving)."""

    def __init__(self, message: str, result: dict | None = None):
        super().__init__(message)
        self.result = result


@dataclass(frozen=True)
class ExportPlan:
    """A checked export request."""

    run: FinishedRun
    weights: TrainedWeights
    kind: str  # adapter | merged | gguf | gguf-lora
    dtype: str  # of the merged weights
    target: Path  # the directory to create, inside exports_dir(workspace)
    workspace: Path
    gguf_type: str = DEFAULT_GGUF_TYPE  # the GGUF file's tensor type (gguf kinds only)

    @property
    def zip_path(self) -> Path:
        """The zip archive written beside the target directory."""
        return self.target.with_name(f"{self.target.name}.zip")


def default_name(run_dir: Path, kind: str, dtype: str = "float32", workspace: Path | None = None) -> str:
    """``<run id>-adapter``, ``<run id>-merged-<dtype>`` or ``<run id>-gguf[-lora]-<type>`` (``dtype`` holds the
    GGUF type then); with ``workspace``, the first of that name, then ``...-2``, ``...-3``, ... that no earlier
    export took (``name_taken``), so a second export with the default name does not collide with the first."""
    name = f"{Path(run_dir).name}-{kind}" + (f"-{dtype}" if kind != "adapter" else "")
    if workspace is None:
        return name
    root, number, candidate = exports_dir(Path(workspace)).resolve(), 1, name
    while name_taken(root, candidate, workspace):
        number += 1
        candidate = f"{name}-{number}"
    return candidate


def name_taken(root: Path, name: str, workspace: Path) -> bool:
    """Whether export ``name`` under ``root`` is taken: its directory holds files, it is a file, its zip is there,
    or an export to it is running (its files are still hidden partial ones)."""
    target = root / name
    if target.is_file() or target.with_name(f"{name}.zip").exists() or (target.is_dir() and any(target.iterdir())):
        return True
    return jobs.active_job(workspace, JOB_KIND, target=str(target)) is not None


def resolve_target(root: Path, out: str | Path) -> Path:
    """The export directory for ``out``: a bare name goes inside ``root``; a path must lie inside it.

    Refuses a target outside ``root``, ``root`` itself, a hidden name, an existing file and an existing
    directory that is not empty.
    """
    root = Path(root).resolve()
    # Before the path is touched: a NUL byte or an over-long name would stop the file system calls below with
    # a ValueError or OSError ("File name too long") instead of a refusal.
    problem = name_problem(Path(str(out)).name or str(out))
    if problem:
        raise ExportError(f"the export name is not usable: {problem}")
    out = Path(out).expanduser()
    target = (root / out if len(out.parts) == 1 and not out.is_absolute() else out).resolve()
    if target == root or root not in target.parents:
        raise ExportError(f"the export target {out} is outside the workspace's exports directory {root}")
    if target.name.startswith(".") or jobs.PARTIAL_MARK in target.name:
        raise ExportError(f"the export name {target.name!r} is not allowed: give a name that does not start with '.'")
    if target.is_file():
        raise ExportError(f"the export target {target} exists and is a file; choose another name")
    if target.is_dir() and any(target.iterdir()):
        raise ExportError(f"the export target {target} already exists and is not empty; choose another name")
    return target


def plan_export(
    run_dir: Path,
    kind: str = "adapter",
    dtype: str = "float32",
    out: str | Path | None = None,
    checkpoint: int | None = None,
    workspace: Path | None = None,
    gguf_type: str = DEFAULT_GGUF_TYPE,
) -> ExportPlan:
    """Check an export request and say where it goes; raises ArtifactError / ExportError with the reason.

    A GGUF export is also refused here, before any weights load, for an architecture, rope variant or tokenizer
    that engine.export.gguf does not write (the message names it)."""
    if kind not in KINDS:
        raise ExportError(f"unknown export kind {kind!r}; use {' or '.join(KINDS)}")
    if dtype not in DTYPES:
        raise ExportError(f"unknown dtype {dtype!r}; use {', '.join(DTYPES)}")
    if gguf_type not in GGUF_TYPES:
        raise ExportError(f"unknown GGUF type {gguf_type!r}; use {', '.join(GGUF_TYPES)}")
    run = open_run(run_dir, checkpoint)
    weights = trained_weights(run, checkpoint)
    if kind == "adapter" and not weights.is_adapter:
        raise ExportError(
            f"{run.name} trained the whole model ({run.config.adapter.method}), so it has no adapter; "
            "export the merged kind instead"
        )
    if kind in ("gguf", "gguf-lora"):
        model = run.config.model
        try:
            check_gguf_source(weights.path, weights.is_adapter, model.name_or_path, model.revision, kind == "gguf-lora")
        except GgufError as exc:
            raise ExportError(str(exc)) from None
    workspace = Path(workspace or workspace_of(run.run_dir) or Path.cwd() / "workspace").resolve()
    suffix = gguf_type if kind.startswith("gguf") else dtype
    target = resolve_target(exports_dir(workspace), out or default_name(run.run_dir, kind, suffix, workspace))
    return ExportPlan(run, weights, kind, dtype, target, workspace, gguf_type)


def check_repo_id(repo_id: str) -> str:
    """A hub repo id (``name`` or ``owner/name``), stripped; refuses anything else."""
    repo_id = repo_id.strip()
    if not is_hub_id(repo_id):
        raise ExportError(f"{repo_id!r} is not a hub repo id; write it as owner/name")
    return repo_id


def export_args(
    plan: ExportPlan, push_to: str | None = None, private: bool = False, make_zip: bool = False
) -> list[str]:
    """The arguments of ``python -m engine`` for an export (never a token: that travels in the environment)."""
    args = ["export", str(plan.run.run_dir), "--kind", plan.kind, "--dtype", plan.dtype, "--out", str(plan.target)]
    if plan.kind.startswith("gguf"):
        args += ["--gguf-type", plan.gguf_type]
    args += ["--workspace", str(plan.workspace)]
    if plan.weights.label.startswith("checkpoint-"):
        args += ["--checkpoint", plan.weights.label.removeprefix("checkpoint-")]
    if make_zip:
        args.append("--zip")
    if push_to:
        args += ["--push-to", check_repo_id(push_to)] + (["--private"] if private else [])
    return args


def start_export(
    plan: ExportPlan,
    push_to: str | None = None,
    private: bool = False,
    token: str | None = None,
    make_zip: bool = True,
    time_limit_s: float | None = None,
) -> Path:
    """Run the export in a background job (stopped past ``time_limit_s``: engine.runs.jobs); returns the job
    directory.

    ``token`` (a hub token typed in the studio) reaches the job as HF_TOKEN in its environment only; without
    it the job inherits this process's HF_TOKEN, if any.
    """
    for job_dir in jobs.list_jobs(plan.workspace, JOB_KIND, target=str(plan.target)):
        if jobs.is_running(jobs.status(job_dir)):
            raise jobs.JobError(f"an export to {plan.target.name} is already running")
    args = export_args(plan, push_to, private, make_zip)
    labels = {"run_id": plan.run.run_dir.name, "target": str(plan.target), "kind": plan.kind}
    env = {"HF_TOKEN": token} if token else None
    return jobs.start(plan.workspace, JOB_KIND, args, labels=labels, env=env, time_limit_s=time_limit_s)
