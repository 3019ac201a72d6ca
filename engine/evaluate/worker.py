"""Score a run's base model and its fine-tuned model on one dataset: eval loss, perplexity, exact match; or, for a
preference run, how each ranks chosen over rejected answers (engine.evaluate.preference); for a GRPO run, its
reward functions on each model's greedy completions (engine.evaluate.rewards).

Runs inside ``python -m engine evaluate`` (a job, see engine.runs.jobs). The loss is the mean cross-entropy over
the tokens that carry loss in training (the answers, with data.completion_only_loss), so it is comparable to
the trainer's eval_loss. Predictions are greedy answers through the chat template (engine.evaluate.scoring) for
rows that end with a reference answer. A LoRA run loads the base once: the base scores are taken with the
adapter disabled. The result goes to ``RUN_DIR/evaluations/<id>.json`` (engine.evaluate.evaluations).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from engine.config.data import UNPAIRED_FORMAT
from engine.config.vision import DEFAULT_MAX_PIXELS
from engine.data import DataError
from engine.data.pipeline import tokenize_rows
from engine.data.tokenize import TokenizedRow
from engine.data.vision_rows import VISION_FORMAT
from engine.data.vision_sets import as_example
from engine.evaluate import preference
from engine.evaluate.evaluations import (
    DATA_EVAL,
    SCORING_ANSWERS,
    SCORING_PREFERENCE,
    SCORING_REWARDS,
    check_request,
    save_evaluation,
)
from engine.evaluate.models import (
    RAW_BASE,
    arm_count,
    baseline_fields,
    load_eval_tokenizer,
    load_models,
    pick_rows,
    starting_weights,
)
from engine.evaluate.result_files import result_header
from engine.evaluate.rewards import score_rewards
from engine.evaluate.scoring import generate_predictions
from engine.runs.artifacts import FinishedRun, TrainedWeights
from engine.runs.jobs import Progress
from engine.training.methods import method_of
from engine.training.vision import text_tokenizer

ANSWER_SLACK_TOKENS = 8  # room beyond the longest reference, so a slightly longer answer is seen (and wrong)


@dataclass
class EvalSet:
    """The rows to score: tokenized for the loss, and the (prompt, reference) rows for predictions."""

    choice: str
    source: str
    format: str
    tokenized: list[TokenizedRow]
    chats: list[dict[str, Any]]  # rows ending with an assistant answer
    # Vision rows (one per tokenized row): their loss batches come from TRL's collator, images read batch by batch.
    vision_rows: list[dict[str, Any]] | None = None
    collate: Callable[[list[dict[str, Any]]], dict[str, Any]] | None = None
    max_pixels: int = DEFAULT_MAX_PIXELS

    def loss_batches(self, size: int) -> Iterator[Any]:
        """Batches for the loss: tokenized rows, or for vision rows the collator's model inputs with labels."""
        if self.collate is None or self.vision_rows is None:
            yield from _batches(self.tokenized, size)
            return
        for batch in _batches(self.vision_rows, size):
            yield self.collate([as_example(row, self.max_pixels) for row in batch])


def load_eval_set(run: FinishedRun, tokenizer: Any, data: str, max_rows: int | None) -> EvalSet:
    """The chosen rows (see pick_rows), tokenized for the loss, and those that end with a reference answer."""
    return eval_set_of(run, tokenizer, *pick_rows(run, data, max_rows))


def eval_set_of(run: FinishedRun, tokenizer: Any, loaded: Any, indices: list[int], choice: str) -> EvalSet:
    """Rows ``indices`` of ``loaded`` as the answers scoring scores them (``choice``: eval, train or file)."""
    config = run.config
    if loaded.format == VISION_FORMAT:
        return _vision_eval_set(run, tokenizer, loaded, indices, choice)
    tokenized = tokenize_rows(loaded, indices, tokenizer, config.data, config.train.max_length, label=f"{choice} ")
    return EvalSet(choice, loaded.source, loaded.format, tokenized.rows, _chats([loaded.rows[i] for i in indices]))


def _vision_eval_set(run: FinishedRun, processor: Any, loaded: Any, indices: list[int], choice: str) -> EvalSet:
    """Vision rows counted as training counts them (engine.data.vision_sets), their loss batches made by TRL's
    vision collator with the template training used, so the loss is the trainer's eval_loss."""
    from trl.trainer.sft_trainer import DataCollatorForVisionLanguageModeling

    from engine.data.vision_sets import VisionCheck

    config = run.config
    settings = VisionCheck.of(config, processor)
    counted = settings.tokenize(loaded, indices, processor, label=f"{choice} ")
    rows = [loaded.rows[number - 1] for number in counted.numbers]
    collator = DataCollatorForVisionLanguageModeling(
        processor,
        max_length=settings.max_length,
        assistant_only_loss=settings.answers_only,
        chat_template=settings.template,
    )
    chats = _chats(rows)
    return EvalSet(choice, loaded.source, loaded.format, counted.rows, chats, rows, collator, settings.max_pixels)


def _chats(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows that end with a reference answer."""
    return [row for row in rows if "messages" in row and row["messages"][-1]["role"] == "assistant"]


def _batches(items: list[Any], size: int) -> Iterator[list[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


@torch.inference_mode()
def _batch_loss(model: Any, batch: Any, pad_id: int) -> tuple[float, int]:
    """Summed cross-entropy over the loss-bearing tokens of a batch (tokenized rows, or a vision collator's model
    inputs with labels), and how many tokens that is."""
    if isinstance(batch, list):
        inputs, labels = _padded(batch, pad_id)
    else:
        inputs = {name: value for name, value in batch.items() if name != "labels"}
        labels = batch["labels"]
    logits = model(**{name: value.to(model.device) for name, value in inputs.items()}).logits.float()
    # Token t is predicted from the positions before it, as in the trainer's loss.
    targets = labels[:, 1:].to(logits.device)
    nll = torch.nn.functional.cross_entropy(
        logits[:, :-1].reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-100, reduction="sum"
    )
    return float(nll), int((targets != -100).sum())


def _padded(rows: list[TokenizedRow], pad_id: int) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """Tokenized rows as a right-padded batch and its labels (-100 where no loss)."""
    width = max(len(row.input_ids) for row in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    labels = torch.full((len(rows), width), -100, dtype=torch.long)
    attention = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        n = len(row.input_ids)
        ids[i, :n] = torch.tensor(row.input_ids)
        attention[i, :n] = 1
        labels[i, :n] = torch.where(torch.tensor(row.completion_mask) == 1, ids[i, :n], -100)
    return {"input_ids": ids, "attention_mask": attention}, labels


def _perplexity(loss: float) -> float:
    return math.exp(loss) if loss < 700 else math.inf


class Scorer:
    """Scores one model after another on the same rows, counting progress across all of them."""

    def __init__(
        self,
        tokenizer: Any,
        eval_set: EvalSet,
        batch_size: int,
        max_new_tokens: int,
        progress: Progress,
        models: int = 2,
    ):
        self.tokenizer, self.eval_set, self.batch_size = tokenizer, eval_set, batch_size
        self.max_new_tokens, self.progress = max_new_tokens, progress
        per_model = math.ceil(len(eval_set.tokenized) / batch_size) + math.ceil(len(eval_set.chats) / batch_size)
        self.total, self.done = models * per_model, 0

    def _tick(self) -> None:
        self.done += 1
        self.progress.update(done=self.done, total=self.total)

    def score(self, model: Any, label: str) -> tuple[dict[str, Any], list[Any]]:
        """Loss, perplexity and exact match of ``model``, and its predictions."""
        self.progress.update(f"{label}: eval loss", done=self.done, total=self.total)
        pad_id = text_tokenizer(self.tokenizer).pad_token_id
        nll, tokens = 0.0, 0
        for batch in self.eval_set.loss_batches(self.batch_size):
            batch_nll, batch_tokens = _batch_loss(model, batch, pad_id)
            nll, tokens = nll + batch_nll, tokens + batch_tokens
            self._tick()
        self.progress.update(f"{label}: generating answers", done=self.done, total=self.total)
        predictions = []
        for batch in _batches(self.eval_set.chats, self.batch_size):
            predictions += generate_predictions(
                model, self.tokenizer, batch, self.max_new_tokens, len(batch), self.eval_set.max_pixels
            )
            self._tick()
        loss = nll / tokens if tokens else math.nan
        metrics = {
            "eval_loss": loss,
            "perplexity": _perplexity(loss) if tokens else math.nan,
            "exact_match": sum(p.correct for p in predictions) / len(predictions) if predictions else None,
            "loss_tokens": tokens,
            "scored_rows": len(self.eval_set.tokenized),
        }
        return metrics, predictions


def _answer_budget(tokenizer: Any, chats: list[dict[str, Any]]) -> int:
    """Enough new tokens for the longest reference answer, and a little more."""
    text = text_tokenizer(tokenizer)
    lengths = [len(text(row["messages"][-1]["content"])["input_ids"]) for row in chats]
    return max(lengths, default=0) + ANSWER_SLACK_TOKENS


def _prediction_rows(
    chats: list[dict[str, Any]], base: list[Any], tuned: list[Any], raw: list[Any] | None = None
) -> list[dict[str, Any]]:
    """Predictions beside the references, one dict per row (the prompt shown is the last user turn); with ``raw``
    (the raw base's, beside a starting run's ``base``) those too."""
    rows = []
    for index, (row, b, t) in enumerate(zip(chats, base, tuned, strict=True)):
        users = [m["content"] for m in row["messages"][:-1] if m["role"] == "user"]
        listed = {
            "prompt": users[-1] if users else "",
            "reference": t.reference,
            "base": b.prediction,
            "tuned": t.prediction,
            "base_correct": b.correct,
            "tuned_correct": t.correct,
        }
        if raw is not None:
            listed |= {RAW_BASE: raw[index].prediction, f"{RAW_BASE}_correct": raw[index].correct}
        rows.append(listed)
    return rows


def evaluate(
    run_dir: Path,
    data: str = DATA_EVAL,
    checkpoint: int | None = None,
    max_rows: int | None = None,
    max_new_tokens: int | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Score base and fine-tuned model of a run on ``data`` (eval, train or a file path); save and return it.

    The method's ``scoring`` picks it: answers (loss, perplexity, exact match), preference, or rewards
    (GRPO's reward functions on greedy completions, engine.evaluate.rewards).
    Raises ArtifactError for a missing or running run or one without weights, DataError for unusable data.
    """
    progress = progress or Progress(None)
    began = time.time()
    run, weights = check_request(run_dir, data, checkpoint)
    progress.update("loading the data")
    tokenizer = load_eval_tokenizer(run, weights)
    method = method_of(run.config)
    scoring = method.scoring
    own = method.scorer()
    if own is not None:  # the method scores its runs itself, in its kind's result shape
        scored = own.score(run, weights, tokenizer, data, max_rows, progress)
    elif scoring == SCORING_PREFERENCE:
        scored = score_preference(run, weights, tokenizer, data, max_rows, progress)
    elif scoring == SCORING_REWARDS:
        scored = score_rewards(run, weights, tokenizer, data, max_rows, max_new_tokens, progress)
    else:
        eval_set = load_eval_set(run, tokenizer, data, max_rows)
        scored = score_answers(run, weights, tokenizer, eval_set, max_new_tokens, progress)
    progress.update("saving the results")
    result = {**result_header(run.run_dir.name, weights.label, began), **scored}
    result["path"] = str(save_evaluation(run.run_dir, result))
    return result


def score_answers(
    run: FinishedRun,
    weights: TrainedWeights,
    tokenizer: Any,
    eval_set: EvalSet,
    max_new_tokens: int | None,
    progress: Progress,
) -> dict[str, Any]:
    """The "answers" scoring of ``eval_set``: loss, perplexity and exact match of both models (against the run it
    started from when it has one, with the raw base beside: engine.evaluate.models), and their predictions."""
    budget = max_new_tokens or _answer_budget(tokenizer, eval_set.chats)
    baseline, start, note = starting_weights(run)
    scorer = Scorer(tokenizer, eval_set, run.config.train.eval_batch_size, budget, progress, arm_count(start))
    scores: dict[str, tuple[dict[str, Any], list[Any]]] = {}
    for label, model in load_models(run, weights, progress, start):
        scores[label] = scorer.score(model, label)
        del model  # a full fine-tune's base can go before the tuned model loads
    raw = scores.get(RAW_BASE)
    return {
        "scoring": SCORING_ANSWERS,
        **baseline_fields(baseline, note),
        "data": {
            "choice": eval_set.choice,
            "source": eval_set.source,
            "rows": len(eval_set.tokenized),
            "format": eval_set.format,
        },
        "max_new_tokens": budget,
        "base": scores["base"][0],
        "tuned": scores["tuned"][0],
        **({RAW_BASE: raw[0]} if raw else {}),
        "predictions": _prediction_rows(eval_set.chats, scores["base"][1], scores["tuned"][1], raw[1] if raw else None),
    }


def preference_settings(run: FinishedRun) -> tuple[float, bool, str]:
    """The run's beta (from its method's config section), whether its pairs are also ranked by implicit reward
    (methods with a reference model), and how its trainer cut long sequences."""
    section = getattr(run.config, run.config.method)
    # A method without a reference model (orpo) does not optimise the implicit reward: rank by likelihood only.
    by_reward = method_of(run.config).reference
    return section.beta, by_reward, getattr(section, "truncation_mode", "keep_start")


def score_preference(
    run: FinishedRun, weights: TrainedWeights, tokenizer: Any, data: str, max_rows: int | None, progress: Progress
) -> dict[str, Any]:
    """The "preference" scoring: every answer's log-likelihood under the base and the tuned model, compared
    (engine.evaluate.preference); the rows listed carry their row numbers in the file. A run that started from
    another run is compared with that run (as its trainer took it for reference), the raw base beside."""
    config, method = run.config, method_of(run.config)
    loaded, indices, choice = pick_rows(run, data, max_rows)
    if loaded.format not in method.formats:
        raise DataError(
            f"{loaded.source} is {loaded.format} data; {method.name} runs are evaluated on "
            f"{' or '.join(method.formats)} data"
        )
    rows = [loaded.rows[i] for i in indices]
    beta, by_reward, truncation = preference_settings(run)
    # load_eval_tokenizer set the run's chat template on the tokenizer: render with it (template None).
    tokenized = preference.tokenize_rows(tokenizer, rows, None, config.train.max_length, truncation)
    batch_size = config.train.eval_batch_size
    baseline, start, note = starting_weights(run)
    ticks = {"done": 0, "total": arm_count(start) * math.ceil(len(tokenized.sequences) / batch_size)}

    def tick() -> None:
        ticks["done"] += 1
        progress.update(done=ticks["done"], total=ticks["total"])

    logps: dict[str, list[preference.AnswerLogp]] = {}
    for label, model in load_models(run, weights, progress, start):
        progress.update(f"{label}: scoring the answers", **ticks)
        logps[label] = preference.answer_logps(model, tokenized.sequences, tokenizer.pad_token_id, batch_size, tick)
        del model  # a full fine-tune's base can go before the tuned model loads

    def compared(base: list[preference.AnswerLogp]) -> dict[str, Any]:
        numbers, tuned = tokenized.numbers, logps["tuned"]
        if loaded.format == UNPAIRED_FORMAT:
            return preference.compare_unpaired(rows, numbers, base, tuned, beta)
        return preference.compare_pairs(rows, numbers, base, tuned, beta, by_reward)

    scores = compared(logps["base"])
    if RAW_BASE in logps:  # the raw base beside the starting run: its own numbers, from the same comparison
        preference.add_arm(scores, compared(logps[RAW_BASE]), RAW_BASE)
    for listed in scores.get("pairs") or scores.get("answers") or []:
        listed["row"] = indices[listed["row"] - 1] + 1  # a position among the picked rows -> its row in the file
    return {
        "scoring": SCORING_PREFERENCE,
        "method": method.name,
        **baseline_fields(baseline, note),
        "beta": beta,
        "data": {
            "choice": choice,
            "source": loaded.source,
            "rows": len(tokenized.numbers),
            "format": loaded.format,
            "dropped": tokenized.dropped,
        },
        **scores,
    }
