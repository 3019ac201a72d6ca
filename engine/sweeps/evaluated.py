"""The exact_match objective: Evaluate's greedy exact match of a completed trial's run on its eval set.

The score comes from the same background job the Evaluate tab starts (``python -m engine evaluate``, engine.runs.jobs),
so it is stored with the run (``RUN/evaluations/``) and the Runs list, Evaluate and the model card show it like any
other evaluation. The job's folder is recorded on the trial before the driver waits on it: a driver killed
meanwhile, started again, waits for the same job (it lives in its own session), reads its result when it has
ended, or starts a new one when it failed or was cancelled.

While the run trains, the pruner is fed its eval loss (signed so that higher is better, as the study maximizes
exact match): the evaluation itself comes only at the end.
"""

from __future__ import annotations

import threading
from pathlib import Path

from engine.evaluate.evaluations import DATA_EVAL, read_evaluation, start_evaluation
from engine.runs import jobs
from engine.runs.artifacts import ArtifactError

CANCEL_WAIT_S = 60.0  # a cancelled evaluation removes its half-written output before it ends


class EvaluationFailed(RuntimeError):
    """The trial's evaluation could not give an exact match (it failed, or the eval set has no references)."""


class EvaluationStopped(Exception):
    """The sweep was asked to stop while the evaluation ran; it was cancelled."""


def exact_match(job: jobs.JobStatus) -> float:
    """The tuned model's exact match (0..1) in a completed evaluation job's result."""
    path = (job.result or {}).get("path")
    result = read_evaluation(Path(path)) if path else None
    if result is None:
        raise EvaluationFailed(f"the evaluation job {job.job_id} completed without a readable result")
    score = (result.get("tuned") or {}).get("exact_match")
    if score is None:
        raise EvaluationFailed("the eval set holds no reference answers, so Evaluate scores no exact match")
    return float(score)


def start_trial_evaluation(run_dir: Path, workspace: Path, rows: int | None) -> Path:
    """Start the evaluation of a completed trial's final weights on its eval set; returns the job's folder.
    EvaluationFailed when Evaluate refuses the run (no weights, no eval set) or one is already going."""
    try:
        return start_evaluation(run_dir, DATA_EVAL, None, rows, workspace)
    except (ArtifactError, jobs.JobError) as exc:
        raise EvaluationFailed(f"Evaluate refused the run: {exc}") from exc


def await_evaluation(job_dir: Path, stop: threading.Event, poll_s: float) -> float:
    """Wait for the evaluation job to end and return its exact match. EvaluationStopped (after cancelling the
    job) when ``stop`` is set meanwhile; EvaluationFailed when the job failed."""
    while True:
        current = jobs.status(job_dir)
        if not current.is_running:
            break
        if stop.wait(poll_s):
            jobs.cancel(job_dir)
            jobs.wait(job_dir, timeout=CANCEL_WAIT_S, poll=poll_s)
            raise EvaluationStopped
    if current.state != "completed":
        tail = (current.log_tail or "").rstrip().splitlines()[-4:]
        raise EvaluationFailed("\n".join([f"the evaluation {current.state}: {current.error}", *tail]))
    return exact_match(current)


def reusable_job(job_dir: str | None) -> Path | None:
    """A recorded evaluation job a restarted driver can still use (running, or completed); None otherwise."""
    if not job_dir or not Path(job_dir).is_dir():
        return None
    state = jobs.status(Path(job_dir)).state
    return Path(job_dir) if state not in ("failed", "cancelled") else None
