"""Evaluations of a run: where they are stored, how they are summarised, how one is started in the background.

``python -m engine evaluate RUN_DIR`` (engine.evaluate.worker) scores the base model and the fine-tuned one on a
dataset and writes ``RUN_DIR/evaluations/<id>.json``. Its ``scoring`` is the run's ``Method.scoring``
(a result without one is an "answers" result, written before preference runs could be evaluated)::

    {"id", "created_at", "seconds", "run_id", "weights": "adapter" | "checkpoint-N", "scoring": "answers",
     "data": {"choice": "eval" | "train" | "file", "source", "rows", "format"},
     "base": {"eval_loss", "perplexity", "exact_match", "loss_tokens", "scored_rows"},
     "tuned": {...same...},
     "predictions": [{"prompt", "reference", "base", "tuned", "base_correct", "tuned_correct"}, ...]}

``exact_match`` (0..1) is None when the rows hold no reference answer (plain text). A preference run
(engine.evaluate.preference explains every number)::

    {..., "scoring": "preference", "method": "dpo" | "kto" | "orpo", "beta",
     "data": {..., "dropped"},  # rows whose answer kept no token within train.max_length
     "base": {"accuracy", "chosen_logp", "rejected_logp", "pairs"},
     "tuned": {...same..., "reward_accuracy", "mean_margin"},
     "pairs": [{"row", "prompt", "chosen", "rejected", "chosen_tokens", "rejected_tokens", "base_chosen_logp",
                "base_rejected_logp", "tuned_chosen_logp", "tuned_rejected_logp", "margin", "base_correct",
                "tuned_correct", "reward_correct"}, ...]}

``accuracy`` ranks by mean log-probability per token; ``*_logp`` of a pair are sums over the answer's tokens and
those of a summary are means per token; ``reward_accuracy`` (margin > 0) is None for a method without a reference
(orpo). A kto run's rows are unpaired: its base and tuned hold ``desirable_logp``, ``undesirable_logp``,
``answers``, ``desirable`` (and the tuned ``reward_accuracy``, ``mean_margin``), and ``answers`` replaces
``pairs``: ``[{"row", "prompt", "completion", "label", "tokens", "base_logp", "tuned_logp", "reward",
"base_correct", "tuned_correct"}, ...]``.

A GRPO run (engine.evaluate.rewards) is scored by its own reward functions on one greedy completion per prompt of
each model::

    {..., "scoring": "rewards", "method": "grpo", "baseline", "max_new_tokens",
     "reward_weights": {name: weight},  # the reward functions in the run's order
     "data": {..., "skipped"},  # rows without a prompt (no user turn)
     "base": {"rewards": {name: mean}, "reward", "exact_match", "prompts"},
     "tuned": {...same...},
     "completions": [{"row", "prompt", "reference", "base", "tuned", "base_rewards": {name: score},
                      "tuned_rewards", "base_reward", "tuned_reward", "base_correct", "tuned_correct"}, ...]}

**Baseline** (every scoring but a method's own; engine.evaluate.models): a run that started from another run
(``model.init_from``) is compared with the weights it started from, not the raw base, so its numbers say what this
run's training changed: its "base" is that start, and ``baseline`` says which (``"base"``, or the starting run's
name, with ", checkpoint N" for a checkpoint; a start that is gone leaves ``"base"`` and a ``baseline_note`` saying
so). The raw base is then scored too: ``"raw_base"`` beside "base" and "tuned" (the same summary as "base"), and in
each listed row its own fields (``raw_base``, ``raw_base_correct``, ``raw_base_chosen_logp``, ``raw_base_logp``,
``raw_base_rewards``, ... as the row's ``base_*``). A result without ``baseline`` compares with the raw base.

A reward's mean leaves out the completions it scored None (TRL's convention; None when it scored none);
``reward`` is the mean of each completion's weighted sum of its scores (None counted as 0, as TRL sums them).
``exact_match`` compares the stripped completion with the row's stripped reference answer; it and the
``*_correct`` of a row are None where there is no reference.

This module imports no ML library: the studio and the run list read results through it.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from engine.data.loading import looks_like_hub_id, resolve_path
from engine.evaluate.result_files import list_results, read_result, save_result
from engine.runs import jobs
from engine.runs.artifacts import ArtifactError, FinishedRun, TrainedWeights, open_run, trained_weights
from engine.store.workspace import workspace_of
from engine.training.methods import SCORINGS, method_of

EVALUATIONS_DIR = "evaluations"
# How runs are scored, by Method.scoring (engine.training.methods.base): "answers" by engine.evaluate.worker,
# "preference" by engine.evaluate.preference, "rewards" (a run's own reward functions on greedy completions of
# held-out prompts) by engine.evaluate.rewards.
SCORING_ANSWERS, SCORING_PREFERENCE, SCORING_REWARDS = SCORINGS
DATA_EVAL, DATA_TRAIN = "eval", "train"
JOB_KIND = "evaluate"


def evaluations_dir(run_dir: Path) -> Path:
    """Where a run's evaluation results live."""
    return Path(run_dir) / EVALUATIONS_DIR


def save_evaluation(run_dir: Path, result: dict[str, Any]) -> Path:
    """Write one result atomically (a reader never sees half of it); returns its path."""
    return save_result(evaluations_dir(run_dir), result)


def list_evaluations(run_dir: Path) -> list[Path]:
    """A run's result files, newest first."""
    return list_results(evaluations_dir(run_dir))


def read_evaluation(path: Path) -> dict[str, Any] | None:
    """One result, or None when it cannot be read."""
    return read_result(path)


def latest_evaluation(run_dir: Path) -> dict[str, Any] | None:
    """The newest readable result of a run, if any."""
    return next(filter(None, map(read_evaluation, list_evaluations(run_dir))), None)


def _percent(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.0f}%"


def _number(value: float | None) -> str:
    return "—" if value is None or not math.isfinite(value) else f"{value:.3g}"


def scoring_of(result: dict[str, Any] | None) -> str:
    """How a result was scored (older results, written before the field existed, are answers results)."""
    return (result or {}).get("scoring") or SCORING_ANSWERS


def is_unpaired(result: dict[str, Any] | None) -> bool:
    """Whether a preference result scored unpaired (kto) answers rather than pairs."""
    return "answers" in (result or {}) and "pairs" not in (result or {})


def _preference_summary(result: dict[str, Any]) -> str:
    """Preference accuracy base → tuned and the mean margin; for kto rows the desirable share and the margin."""
    base, tuned = result.get("base") or {}, result.get("tuned") or {}
    margin = f"margin {_number(tuned.get('mean_margin'))}"
    if is_unpaired(result):
        return f"desirable above median {_percent(tuned.get('reward_accuracy'))}, {margin}"
    return f"preference {_percent(base.get('accuracy'))} → {_percent(tuned.get('accuracy'))}, {margin}"


def _rewards_summary(result: dict[str, Any]) -> str:
    """The weighted reward base → tuned, and exact match base → tuned where the rows have references."""
    base, tuned = result.get("base") or {}, result.get("tuned") or {}
    reward = f"reward {_number(base.get('reward'))} → {_number(tuned.get('reward'))}"
    if tuned.get("exact_match") is None:
        return reward
    return f"{reward}, exact match {_percent(base.get('exact_match'))} → {_percent(tuned.get('exact_match'))}"


def summary_text(result: dict[str, Any] | None) -> str:
    """One line for the run list: exact match base → tuned (when it applies) and eval loss base → tuned; for a
    preference result the preference accuracy base → tuned and the mean reward margin; for a rewards result the
    weighted reward base → tuned, and exact match."""
    if not result:
        return ""
    if scoring_of(result) == SCORING_PREFERENCE:
        return _preference_summary(result)
    if scoring_of(result) == SCORING_REWARDS:
        return _rewards_summary(result)
    base, tuned = result.get("base") or {}, result.get("tuned") or {}
    loss = f"loss {_number(base.get('eval_loss'))} → {_number(tuned.get('eval_loss'))}"
    if tuned.get("exact_match") is None:
        return loss
    return f"{_percent(base.get('exact_match'))} → {_percent(tuned.get('exact_match'))}, {loss}"


def check_scoring(run: FinishedRun) -> None:
    """Refuse a run whose method is scored in a way this module does not know (see Method.scoring)."""
    method = method_of(run.config)
    if method.scoring not in SCORINGS:
        raise ArtifactError(f"{run.name} was trained with {method.name}, whose runs cannot be evaluated yet")


def check_data_choice(run: FinishedRun, data: str) -> None:
    """Refuse a dataset choice that cannot work: no eval set in the config, or a file that does not exist."""
    if data == DATA_EVAL and not run.config.has_eval_data:
        raise ArtifactError(
            f"{run.name} has no eval set (data.eval_path / data.eval_size are empty); "
            "evaluate on its training set or on a file instead"
        )
    if data not in (DATA_EVAL, DATA_TRAIN) and resolve_path(data) is None and not looks_like_hub_id(data):
        raise ArtifactError(f"data file not found: {data}")


def check_request(run_dir: Path, data: str, checkpoint: int | None) -> tuple[FinishedRun, TrainedWeights]:
    """The run and the weights an evaluation would score; ArtifactError for a missing or running run, one
    without weights, a method Evaluate cannot score, or a data choice that cannot work."""
    run = open_run(run_dir, checkpoint)
    weights = trained_weights(run, checkpoint, newest_checkpoint=True)
    check_scoring(run)
    check_data_choice(run, data)
    return run, weights


def evaluate_args(
    run_dir: Path,
    data: str = DATA_EVAL,
    checkpoint: int | None = None,
    max_rows: int | None = None,
    max_new_tokens: int | None = None,
) -> list[str]:
    """The arguments of ``python -m engine`` for one evaluation."""
    args = ["evaluate", str(run_dir), "--data", data]
    for flag, value in (("--checkpoint", checkpoint), ("--max-rows", max_rows), ("--max-new-tokens", max_new_tokens)):
        if value is not None:
            args += [flag, str(value)]
    return args


def start_evaluation(
    run_dir: Path,
    data: str = DATA_EVAL,
    checkpoint: int | None = None,
    max_rows: int | None = None,
    workspace: Path | None = None,
    time_limit_s: float | None = None,
) -> Path:
    """Check the request, then evaluate in a background job (stopped past ``time_limit_s``: engine.runs.jobs);
    returns the job directory.

    Raises ArtifactError (missing or running run, no weights, bad data choice) before anything starts, and
    JobError when an evaluation of this run is already going.
    """
    run, _ = check_request(run_dir, data, checkpoint)
    workspace = Path(workspace or workspace_of(run.run_dir) or run.run_dir.parent)
    if jobs.active_job(workspace, JOB_KIND, run_id=run.run_dir.name):
        raise jobs.JobError(f"{run.name} is already being evaluated; wait for it or cancel it")
    args = evaluate_args(run.run_dir, data, checkpoint, max_rows)
    labels = {"run_id": run.run_dir.name, "run_dir": str(run.run_dir)}
    return jobs.start(workspace, JOB_KIND, args, labels=labels, time_limit_s=time_limit_s)
