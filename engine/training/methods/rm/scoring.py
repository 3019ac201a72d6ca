"""Evaluate's scoring of a reward model: each held-out pair's prompt + chosen and prompt + rejected scored by the
model's head, before training (the base with the head the run started from: the same seed draws it) and after.
The result has the preference scoring's shape (engine.evaluate.evaluations), with scores in place of
log-probabilities (``"score": "reward"``)::

    {..., "scoring": "preference", "method": "rm", "score": "reward", "data": {...},
     "base": {"accuracy", "mean_margin", "chosen_reward", "rejected_reward", "pairs"}, "tuned": {...same...},
     "pairs": [{"row", "prompt", "chosen", "rejected", "base_chosen_reward", "base_rejected_reward",
                "tuned_chosen_reward", "tuned_rejected_reward", "margin", "base_correct", "tuned_correct"}, ...]}

``accuracy`` is the share of pairs whose chosen answer scores higher; ``margin`` is the tuned model's score of
the chosen answer less the rejected one's (``mean_margin`` its mean, for each model).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine.data import DataError
from engine.evaluate.evaluations import SCORING_PREFERENCE
from engine.evaluate.models import load_models, pick_rows
from engine.evaluate.preference import finite_mean, prompt_text, share_of, turns_text
from engine.runs.artifacts import FinishedRun, TrainedWeights
from engine.runs.jobs import Progress
from engine.training.methods.rm.trainer import with_pad_token

SIDES = ("chosen", "rejected")


def score(
    run: FinishedRun, weights: TrainedWeights, tokenizer: Any, data: str, max_rows: int | None, progress: Progress
) -> dict[str, Any]:
    """Score the pairs of ``data`` (eval, train or a file) with the base head and the trained one."""
    from transformers import set_seed

    config = run.config
    loaded, indices, choice = pick_rows(run, data, max_rows)
    if loaded.format != "preference":
        raise DataError(f"{loaded.source} is {loaded.format} data; reward models are evaluated on preference pairs")
    rows = [loaded.rows[i] for i in indices]
    texts = [_conversation(tokenizer, row, side) for row in rows for side in SIDES]
    batch_size = config.train.eval_batch_size
    ticks = {"done": 0, "total": 2 * -(-len(texts) // batch_size)}

    def tick() -> None:
        ticks["done"] += 1
        progress.update(**ticks)

    scores: dict[str, list[float]] = {}
    set_seed(config.train.seed)  # the base's head is the one the run drew before training (engine.training.recipe)
    for label, model in load_models(run, weights, progress):
        progress.update(f"{label}: scoring the answers", **ticks)
        scores[label] = sequence_scores(with_pad_token(model, tokenizer), tokenizer, texts, batch_size, config, tick)
        del model
    pairs = [_pair(indices[k] + 1, row, scores, k) for k, row in enumerate(rows)]
    return {
        "scoring": SCORING_PREFERENCE,
        "method": config.method,
        "score": "reward",
        "data": {"choice": choice, "source": loaded.source, "rows": len(rows), "format": loaded.format},
        "base": _summary(pairs, "base"),
        "tuned": _summary(pairs, "tuned"),
        "pairs": pairs,
    }


def sequence_scores(
    model: Any, tokenizer: Any, texts: list[str], batch_size: int, config: Any, tick: Callable[[], None]
) -> list[float]:
    """The head's score of each text, in batches padded on the right, cut to train.max_length as in training."""
    import torch

    device = next(model.parameters()).device
    found: list[float] = []
    for start in range(0, len(texts), batch_size):
        batch = tokenizer(
            texts[start : start + batch_size],
            padding=True,
            truncation=True,
            max_length=config.train.max_length,
            add_special_tokens=False,
            return_tensors="pt",
        ).to(device)
        with torch.no_grad():
            found += model(**batch).logits.squeeze(-1).float().tolist()
        tick()
    return found


def _conversation(tokenizer: Any, row: dict[str, Any], side: str) -> str:
    """The prompt and one answer through the chat template, as RewardTrainer renders a pair's side."""
    return tokenizer.apply_chat_template(row["prompt"] + row[side], tokenize=False)


def _pair(number: int, row: dict[str, Any], scores: dict[str, list[float]], k: int) -> dict[str, Any]:
    """One pair's scores by each model (its row number in the file)."""
    pair: dict[str, Any] = {
        "row": number,
        "prompt": prompt_text(row["prompt"]),
        "chosen": turns_text(row["chosen"]),
        "rejected": turns_text(row["rejected"]),
    }
    for label, values in scores.items():
        chosen, rejected = values[2 * k], values[2 * k + 1]
        pair |= {f"{label}_chosen_reward": chosen, f"{label}_rejected_reward": rejected}
        pair[f"{label}_correct"] = chosen > rejected
    pair["margin"] = pair["tuned_chosen_reward"] - pair["tuned_rejected_reward"]
    return pair


def _summary(pairs: list[dict[str, Any]], side: str) -> dict[str, Any]:
    """One model's accuracy, mean margin and mean scores over the pairs."""
    chosen = [pair[f"{side}_chosen_reward"] for pair in pairs]
    rejected = [pair[f"{side}_rejected_reward"] for pair in pairs]
    return {
        "accuracy": share_of([pair[f"{side}_correct"] for pair in pairs]),
        "mean_margin": finite_mean([c - r for c, r in zip(chosen, rejected, strict=True)]),
        "chosen_reward": finite_mean(chosen),
        "rejected_reward": finite_mean(rejected),
        "pairs": len(pairs),
    }
