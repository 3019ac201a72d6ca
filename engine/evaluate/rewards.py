"""The "rewards" scoring of a GRPO run: the run's own reward functions on a greedy completion of each held-out
prompt, by the model it started from and by the tuned one, with every completion listed.

**Rows.** The chosen rows (``engine.evaluate.models.pick_rows``: the eval set, the training rows or a file) are
shaped as training shapes GRPO's prompt rows (``engine.data.prompts.prompt_row``: ``{"prompt": [messages],
"answer", "ts_row"}`` and the row's extra columns); rows without a user turn are skipped and counted. Unlike
training, a prompt longer than ``train.max_length`` is kept: generation has no such limit.

**Completions.** One greedy completion per prompt and model, through the chat template with the generation
prompt, batched with left padding (``engine.evaluate.scoring.generate_completions``), at most
``grpo.max_completion_length`` new tokens as in training. Greedy rather than sampled: one repeatable answer per
prompt, the model's most likely one, so that two evaluations of the same weights agree.

**Rewards.** Every completion is scored by the run's reward functions (``engine.training.rewards``, custom ones
from the run's file too), called as TRL 1.16's GRPOTrainer calls them: ``prompts=``, ``completions=`` (one
assistant message each), ``completion_ids=`` (the new tokens up to and including the eos token), the rows' columns
as lists, ``trainer_state``, ``log_extra`` and ``log_metric``. A reward's mean leaves out the completions it scored
None, as TRL's ``rewards/<name>/mean`` does; ``reward`` is the mean of each completion's weighted sum of its scores
(None adds nothing), as TRL's ``reward``.

**Exact match** compares the stripped completion with the row's stripped reference answer (the ``answer`` column),
whatever the rewards compare; it is None where the rows have no reference.

**Baseline.** A run that started from another run (``model.init_from``, engine.runs.lineage) is compared with the
weights it started from, not the raw base: that is what the training changed (an SFT start → GRPO). The result's
``baseline`` says which: ``"base"``, or the starting run's name (", checkpoint N" for a checkpoint); the raw base's
completions and scores are then listed too (``"raw_base"``). A start that is gone since leaves the raw base as
baseline, and ``baseline_note`` says why (engine.evaluate.models.starting_weights).

The result's shape is in engine.evaluate.evaluations. Imports torch (through the worker) and transformers.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from engine.data import DataError, LoadedRows
from engine.data.prompts import REFERENCE_COLUMN, ROW_COLUMN, prompt_rows
from engine.evaluate.evaluations import SCORING_REWARDS
from engine.evaluate.models import arm_count, baseline_fields, load_models, pick_rows, starting_weights
from engine.evaluate.scoring import Completion, generate_completions
from engine.runs.artifacts import FinishedRun, TrainedWeights
from engine.runs.jobs import Progress
from engine.training.methods import method_of
from engine.training.rewards import reward_functions
from engine.training.rewards.functions import RewardFunction

Row = dict[str, Any]
Scores = dict[str, float | None]
# Row keys that TRL hands to a reward function as arguments of their own, not as columns.
_NOT_COLUMNS = ("prompt", "completion", "completion_ids")


def score_completions(
    rewards: list[RewardFunction], rows: list[Row], completions: list[Completion], state: Any
) -> list[Scores]:
    """Each completion's score by each reward function (by name), the functions called as GRPOTrainer calls them."""
    columns = [key for key in dict.fromkeys(key for row in rows for key in row) if key not in _NOT_COLUMNS]
    arguments = {
        "prompts": [row["prompt"] for row in rows],
        "completions": [[{"role": "assistant", "content": done.text}] for done in completions],
        "completion_ids": [done.ids for done in completions],
        "trainer_state": state,
        "log_extra": _ignore,
        "log_metric": _ignore,
        **{column: [row.get(column) for row in rows] for column in columns},
    }
    by_reward = {reward.__name__: reward(**arguments) for reward in rewards}
    return [{name: scores[index] for name, scores in by_reward.items()} for index in range(len(completions))]


def weighted_reward(scores: Scores, weights: dict[str, float]) -> float:
    """A completion's total reward: the weighted sum of its scores, a None adding nothing (TRL's nansum)."""
    return sum(weights[name] * score for name, score in scores.items() if score is not None)


def is_correct(completion: str, reference: Any) -> bool | None:
    """Whether a completion equals the reference (as text; an ``answer`` column may hold numbers) after stripping
    whitespace; None without a reference."""
    return None if reference is None else completion.strip() == str(reference).strip()


@dataclass(frozen=True)
class Arm:
    """One model's completions, in the rows' order: the completions, each one's scores, and whether it equals its
    row's reference (None without one)."""

    completions: list[Completion]
    scores: list[Scores]
    correct: list[bool | None]

    def summary(self, weights: dict[str, float]) -> dict[str, Any]:
        """Each reward's mean over the completions it scored, the mean weighted total, exact match over the rows
        with a reference, and how many prompts."""
        means = {}
        for name in weights:
            given = [row[name] for row in self.scores if row[name] is not None]
            means[name] = statistics.fmean(given) if given else None
        judged = [value for value in self.correct if value is not None]
        return {
            "rewards": means,
            "reward": statistics.fmean(weighted_reward(row, weights) for row in self.scores) if self.scores else None,
            "exact_match": sum(judged) / len(judged) if judged else None,
            "prompts": len(self.scores),
        }


def score_model(
    model: Any,
    tokenizer: Any,
    rows: list[Row],
    rewards: list[RewardFunction],
    state: Any,
    max_new_tokens: int,
    batch_size: int,
    tick: Callable[[], None] = lambda: None,
) -> Arm:
    """A greedy completion of each row's prompt by ``model``, scored by ``rewards``; ``tick`` after each batch."""
    completions: list[Completion] = []
    for begin in range(0, len(rows), batch_size):
        prompts = [row["prompt"] for row in rows[begin : begin + batch_size]]
        completions += generate_completions(model, tokenizer, prompts, max_new_tokens, batch_size)
        tick()
    correct = [is_correct(done.text, row.get(REFERENCE_COLUMN)) for done, row in zip(completions, rows, strict=True)]
    return Arm(completions, score_completions(rewards, rows, completions, state), correct)


def _last_user_turn(prompt: list[dict[str, Any]]) -> str:
    users = [message["content"] for message in prompt if message["role"] == "user"]
    return users[-1] if users else ""


def listed_completions(rows: list[Row], arms: dict[str, Arm], weights: dict[str, float]) -> list[dict[str, Any]]:
    """One entry per prompt: each model's completion (as generated: what the rewards scored) beside the reference,
    with its scores."""
    listed = []
    for index, row in enumerate(rows):
        entry = {
            "row": row[ROW_COLUMN],
            "prompt": _last_user_turn(row["prompt"]),
            "reference": row.get(REFERENCE_COLUMN),
        }
        entry |= {label: arm.completions[index].text for label, arm in arms.items()}
        for label, arm in arms.items():
            entry |= {
                f"{label}_rewards": arm.scores[index],
                f"{label}_reward": weighted_reward(arm.scores[index], weights),
                f"{label}_correct": arm.correct[index],
            }
        listed.append(entry)
    return listed


def _prompt_rows_of(run: FinishedRun, data: str, max_rows: int | None) -> tuple[LoadedRows, list[Row], int, str]:
    """The chosen rows as prompt rows: the loaded file, the rows, how many had no prompt, and the choice. Raises
    DataError for data of a format the method does not take, or without any prompt."""
    method = method_of(run.config)
    loaded, indices, choice = pick_rows(run, data, max_rows)
    if loaded.format not in method.formats:
        raise DataError(
            f"{loaded.source} is {loaded.format} data; {method.name} runs are evaluated on "
            f"{' or '.join(method.formats)} data"
        )
    rows, skipped = prompt_rows(loaded, indices)
    if not rows:
        raise DataError(f"{loaded.source}: none of the {len(indices)} rows has a prompt (a user turn) to answer")
    return loaded, rows, skipped, choice


def score_rewards(
    run: FinishedRun,
    weights: TrainedWeights,
    tokenizer: Any,
    data: str,
    max_rows: int | None,
    max_new_tokens: int | None,
    progress: Progress,
) -> dict[str, Any]:
    """The "rewards" scoring of a GRPO run (see the module's docstring); ``max_new_tokens`` overrides the run's
    ``grpo.max_completion_length``. Raises DataError for data of another format or without a prompt."""
    from transformers import TrainerState  # a real state, so a reward may read trainer_state.global_step

    config, method = run.config, method_of(run.config)
    loaded, rows, skipped, choice = _prompt_rows_of(run, data, max_rows)
    specs = method.rewards(config)
    rewards = reward_functions(specs, tokenizer)
    reward_weights = {reward.__name__: spec.weight for reward, spec in zip(rewards, specs, strict=True)}
    state = TrainerState(global_step=run.status.step or 0, max_steps=run.status.max_steps or 0)
    budget = max_new_tokens or method.settings(config).max_completion_length
    batch_size = config.train.eval_batch_size
    baseline, start, note = starting_weights(run)
    ticks = {"done": 0, "total": arm_count(start) * math.ceil(len(rows) / batch_size)}

    def tick() -> None:
        ticks["done"] += 1
        progress.update(**ticks)

    scored: dict[str, Arm] = {}
    for label, model in load_models(run, weights, progress, start):
        progress.update(f"{label}: generating and scoring completions", **ticks)
        scored[label] = score_model(model, tokenizer, rows, rewards, state, budget, batch_size, tick)
        del model  # a full fine-tune's base can go before the tuned model loads
    data_info = {"choice": choice, "source": loaded.source, "rows": len(rows), "format": loaded.format}
    return {
        "scoring": SCORING_REWARDS,
        "method": method.name,
        **baseline_fields(baseline, note),
        "max_new_tokens": budget,
        "reward_weights": reward_weights,
        "data": {**data_info, "skipped": skipped},
        **{label: arm.summary(reward_weights) for label, arm in scored.items()},
        "completions": listed_completions(rows, scored, reward_weights),
    }


def _ignore(*args: Any, **kwargs: Any) -> None:
    """Stands in for TRL's log_extra and log_metric: an evaluation has no completions table or metrics to log."""
