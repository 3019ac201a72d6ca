"""What a sweep has done, read from its study: its trials ranked by the objective, the best one, its progress.

Read-only: the CLI's ``sweep-status`` and (later) the studio read it while a driver writes the study.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from engine.sweeps.study import STUDY_FILE, SWEEP_ATTR, TARGET_ATTR, SweepError, storage_for, sweep_dir, sweeps_dir

# Trial user attributes (optuna's user_attrs) the driver writes.
RUN_ID_ATTR = "run_id"  # the trial's run directory under WORKSPACE/runs/
PRUNED_ATTR = "pruned"  # why the pruner stopped it; set before the run is stopped, so a restart finishes the job
# What that reason says, by pruner, each made from one template (the studio says it again in the page's language).
PRUNE_REASONS = {
    "halving": "pruned at step {step}: {metric} {value} is not among the best 1/{factor} of the trials at this rung",
    "median": "pruned at step {step}: {metric} {value} is worse than the median {median} of earlier trials at that "
    "step",
    "median_unknown": "pruned at step {step}: {metric} {value} is worse than the median of earlier trials at that step",
}
ERROR_ATTR = "error"  # why the trial failed: the run's error and the end of its log
EVAL_JOB_ATTR = "evaluation_job"  # exact_match: the folder of the trial's evaluation job, for a restarted driver
# The driver lost the trial (it died before the trial's run existed, or the run ended with it and left nothing to
# continue from): failed, and not counted; a new trial takes its place.
LOST_ATTR = "lost"

FINISHED = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)


@dataclass(frozen=True)
class TrialSummary:
    """One trial: its number, optuna state (complete, pruned, fail, running, waiting), parameters (by field path,
    as optuna records them), objective value, run id and why it was pruned or failed."""

    number: int
    state: str
    params: dict[str, Any]
    value: float | None
    run_id: str | None
    note: str | None = None
    counted: bool = False  # finished, and counts towards the sweep's trials (see ``counts``)


@dataclass(frozen=True)
class SweepSummary:
    """A sweep's progress: its objective, the trials it runs, its trials ranked (completed ones best first, then
    the rest by number) and the best trial."""

    name: str
    metric: str
    direction: str
    target: int
    trials: list[TrialSummary] = field(default_factory=list)

    @property
    def best(self) -> TrialSummary | None:
        """The completed trial with the best objective value; None before one completed."""
        return self.trials[0] if self.trials and self.trials[0].value is not None else None

    def count(self, state: str) -> int:
        """How many trials are in ``state`` (complete, pruned, fail, running, waiting)."""
        return sum(trial.state == state for trial in self.trials)

    @property
    def done(self) -> int:
        """Trials that count towards ``target``: completed, pruned, failed (not those the driver lost)."""
        return sum(trial.counted for trial in self.trials)


def counts(trial: FrozenTrial) -> bool:
    """Whether a finished trial counts towards the sweep's trials (one the driver lost before its run existed
    does not)."""
    return trial.state in FINISHED and not trial.user_attrs.get(LOST_ATTR)


def trial_summary(trial: FrozenTrial) -> TrialSummary:
    """A study's trial as the sweep shows it."""
    attrs = trial.user_attrs
    note = attrs.get(PRUNED_ATTR) if trial.state == TrialState.PRUNED else attrs.get(ERROR_ATTR)
    return TrialSummary(
        number=trial.number,
        state=trial.state.name.lower(),
        params=dict(trial.params),
        value=trial.value if trial.state == TrialState.COMPLETE else None,
        run_id=attrs.get(RUN_ID_ATTR),
        note=note,
        counted=counts(trial),
    )


def summarize_study(study: optuna.Study) -> SweepSummary:
    """The summary of a sweep's loaded study (SweepError when its making was cut short)."""
    record = study.user_attrs.get(SWEEP_ATTR)
    if record is None:
        raise SweepError(f"the sweep {study.study_name} was never set up completely; start it again")
    trials = [trial_summary(trial) for trial in study.get_trials(deepcopy=False)]
    maximize = record["objective"]["direction"] == "maximize"
    completed = sorted((t for t in trials if t.value is not None), key=lambda t: -t.value if maximize else t.value)
    rest = sorted((t for t in trials if t.value is None), key=lambda t: t.number)
    return SweepSummary(
        name=record["name"],
        metric=record["objective"]["metric"],
        direction=record["objective"]["direction"],
        target=study.user_attrs[TARGET_ATTR],
        trials=completed + rest,
    )


def sweep_status(workspace: Path, name: str) -> SweepSummary:
    """The progress of the sweep ``name`` of a workspace; SweepError when there is no such sweep."""
    folder = sweep_dir(workspace, name)
    if not (folder / STUDY_FILE).is_file():
        raise SweepError(f"no sweep named {name} in {sweeps_dir(workspace)}")
    try:
        study = optuna.load_study(study_name=name, storage=storage_for(folder))
    except KeyError:
        raise SweepError(f"{folder} holds no study named {name}") from None
    return summarize_study(study)


def list_sweeps(workspace: Path) -> list[SweepSummary]:
    """Every sweep of a workspace, by name (a folder without a complete study is left out)."""
    root = sweeps_dir(workspace)
    found = []
    for folder in sorted(root.iterdir()) if root.is_dir() else []:
        try:
            found.append(sweep_status(workspace, folder.name))
        except SweepError:
            continue
    return found


def format_value(value: float | None) -> str:
    """An objective value or parameter in 5 significant digits; "-" when there is none."""
    return "-" if value is None else f"{value:.5g}"


def format_params(params: dict[str, Any]) -> str:
    """``train.learning_rate=0.0012 adapter.r=16``."""
    return " ".join(f"{path}={format_value(v) if isinstance(v, float) else v}" for path, v in params.items())


def outcome_text(trial: TrialSummary, metric: str) -> str:
    """The objective of a completed trial, else the first line of why it was pruned or failed."""
    if trial.value is not None:
        return f"{metric} {format_value(trial.value)}"
    return (trial.note or "").strip().split("\n")[0]


def trial_line(trial: TrialSummary, summary: SweepSummary) -> str:
    """One line of the sweep's progress: number, parameters, state, objective (or why not), best so far."""
    best = summary.best
    best_text = f"best {format_value(best.value)} (trial {best.number})" if best else "best -"
    parts = [f"trial {trial.number}", format_params(trial.params), trial.state, outcome_text(trial, summary.metric)]
    return "  ".join(part for part in [*parts, best_text] if part)


STATE_LABELS = (("complete", "complete"), ("pruned", "pruned"), ("fail", "failed"), ("running", "running"))


def progress_line(summary: SweepSummary) -> str:
    """One sweep in a list: trials done of its target, by state, and the best objective so far."""
    by_state = ", ".join(f"{summary.count(state)} {label}" for state, label in STATE_LABELS if summary.count(state))
    best = summary.best
    found = f"best {summary.metric} {format_value(best.value)} (trial {best.number})" if best else "none completed"
    counted = f"{summary.done}/{summary.target} trials" + (f" ({by_state})" if by_state else "")
    return f"{summary.name}  {counted}  {found}"


def trials_table(summary: SweepSummary) -> list[str]:
    """The trials as a text table, best first: rank (of the completed ones), number, state, objective, params, run
    id, and why a trial was pruned or failed."""
    header = ["rank", "trial", "state", summary.metric, "params", "run id", "note"]
    rows = [header]
    for rank, trial in enumerate(summary.trials, start=1):
        completed = trial.value is not None
        rows.append(
            [
                str(rank) if completed else "-",
                str(trial.number),
                trial.state,
                format_value(trial.value),
                format_params(trial.params),
                trial.run_id or "-",
                "" if completed else outcome_text(trial, summary.metric),
            ]
        )
    widths = [max(len(row[column]) for row in rows) for column in range(len(header))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]
