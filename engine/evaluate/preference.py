"""Preference scoring: how a model ranks the chosen answer of a pair above the rejected one, before and after
tuning, and the implicit reward the tuning gave each answer.

Rows are canonical preference rows (engine.data.preference): ``{"prompt": [turns], "chosen": [turns],
"rejected": [turns]}``, or kto rows ``{"prompt": [turns], "completion": [turns], "label": bool}``.

**Rendering, as TRL's preference trainers render it.** The prompt is rendered through the chat template with the
generation prompt, and prompt + answer without it; the answer's tokens are those after the common prefix of the
two (``trl.data_utils.common_prefix_length``), and for a pair the prompt ends where the shorter of its two
prefixes ends, as in DPOTrainer. With ``max_length`` a sequence is cut as the trainer's collator cuts it
(``keep_start`` or ``keep_end``), and a row left with an answer of no tokens is dropped, as the trainers drop it.

**Log-likelihood.** The log-likelihood of an answer is the sum of the log-probabilities of its tokens, each given
everything before it (``torch.log_softmax`` of the model's own logits, no loss code of TRL's).

**Reward and margin.** The implicit DPO reward of an answer is ``beta * (logp_tuned - logp_base)``; a pair's
margin is the chosen answer's reward minus the rejected one's.

**Accuracy.** A model ranks a pair right when the chosen answer's *mean* log-probability per token is above the
rejected one's. The mean, not the sum: a sum favours the shorter answer whatever it says (``"May 21"`` against
``"May 21, 2032"``), and ORPO's trainer ranks by the mean too. The tuned model of a method with a reference
(dpo, kto) is also ranked by its implicit reward (margin > 0), which is what its trainer logs as
``rewards/accuracies``.

**Unpaired (kto) rows** have no pair to rank. They are scored by the mean log-probability per token of the
desirable and of the undesirable answers, base → tuned, and by the share of desirable answers whose log-ratio
(``logp_tuned - logp_base``) is above the median log-ratio of the undesirable ones; an undesirable answer counts
as right when its log-ratio is below the desirable ones' median. The base model's log-ratio is 0 by definition,
so it ranks no row right. The mean margin is the mean reward of the desirable answers minus that of the
undesirable ones (KTOTrainer's ``rewards/margins``).

This module imports torch, transformers (through the tokenizer) and TRL's data helpers; never gradio.
"""

from __future__ import annotations

import contextlib
import math
import statistics
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from trl.data_utils import common_prefix_length

Turns = list[dict[str, Any]]
Row = dict[str, Any]


@dataclass(frozen=True)
class Scored:
    """One sequence to score: prompt then answer token ids, and where the answer starts."""

    ids: list[int]
    answer_start: int


@dataclass(frozen=True)
class AnswerLogp:
    """An answer's log-likelihood under one model: the summed log-probability of its tokens, and their count."""

    total: float
    tokens: int

    @property
    def mean(self) -> float:
        """The mean log-probability per answer token (NaN without tokens)."""
        return self.total / self.tokens if self.tokens else math.nan


@dataclass(frozen=True)
class TokenizedRows:
    """The rows kept for scoring (1-based numbers into the given rows) and their sequences in order: for pairs
    chosen then rejected per row, for kto rows one per row; ``dropped`` rows had an answer of no tokens."""

    numbers: list[int]
    sequences: list[Scored]
    dropped: int


def _render(tokenizer: Any, messages: Turns, template: str | None, generation_prompt: bool) -> list[int]:
    encoded = tokenizer.apply_chat_template(
        messages, chat_template=template, add_generation_prompt=generation_prompt, tokenize=True, return_dict=True
    )
    return list(encoded["input_ids"])


def _truncate(ids: list[int], answer_start: int, max_length: int | None, mode: str) -> Scored:
    """Cut a sequence as TRL's collators cut it; the answer stays the tokens from ``answer_start`` on."""
    if max_length is None or len(ids) <= max_length:
        return Scored(ids, answer_start)
    if mode == "keep_end":
        cut = len(ids) - max_length
        return Scored(ids[cut:], max(answer_start - cut, 0))
    return Scored(ids[:max_length], min(answer_start, max_length))


def tokenize_answers(
    tokenizer: Any,
    prompt: Turns,
    answers: Sequence[Turns],
    template: str | None = None,
    max_length: int | None = None,
    truncation_mode: str = "keep_start",
) -> list[Scored]:
    """One prompt with each of its answers, rendered and split into prompt and answer tokens as TRL does."""
    prompt_ids = _render(tokenizer, prompt, template, generation_prompt=True)
    full = [_render(tokenizer, prompt + list(answer), template, generation_prompt=False) for answer in answers]
    # Some templates render the prompt alone differently from the prompt before an answer: the answer then starts
    # where the two diverge (TRL's rule), the same place for both answers of a pair.
    start = min(common_prefix_length(prompt_ids, ids) for ids in full)
    return [_truncate(ids, start, max_length, truncation_mode) for ids in full]


def tokenize_rows(
    tokenizer: Any,
    rows: Sequence[Row],
    template: str | None = None,
    max_length: int | None = None,
    truncation_mode: str = "keep_start",
) -> TokenizedRows:
    """Tokenize preference rows (chosen, rejected) or kto rows (completion), dropping those whose answer keeps no
    token within ``max_length``."""
    numbers: list[int] = []
    sequences: list[Scored] = []
    for number, row in enumerate(rows, start=1):
        answers = [row["chosen"], row["rejected"]] if "chosen" in row else [row["completion"]]
        scored = tokenize_answers(tokenizer, row["prompt"], answers, template, max_length, truncation_mode)
        # The first token of a sequence is predicted from nothing: an answer needs a token after it.
        if all(len(one.ids) > max(one.answer_start, 1) for one in scored):
            numbers.append(number)
            sequences += scored
    return TokenizedRows(numbers, sequences, len(rows) - len(numbers))


def _batches(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


@torch.inference_mode()
def _batch_logps(model: Any, batch: Sequence[Scored], pad_id: int) -> list[AnswerLogp]:
    """Answer log-likelihoods of one right-padded batch."""
    width = max(len(one.ids) for one in batch)
    ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
    attention = torch.zeros((len(batch), width), dtype=torch.long)
    answer = torch.zeros((len(batch), width), dtype=torch.bool)
    for i, one in enumerate(batch):
        ids[i, : len(one.ids)] = torch.tensor(one.ids)
        attention[i, : len(one.ids)] = 1
        answer[i, one.answer_start : len(one.ids)] = True
    ids, attention, answer = ids.to(model.device), attention.to(model.device), answer.to(model.device)
    # No cache: a cache changes how some models build the mask (STACK.md), and nothing is generated here.
    logits = model(input_ids=ids, attention_mask=attention, use_cache=False).logits.float()
    # Token t is predicted from the positions before it.
    logps = torch.log_softmax(logits[:, :-1], dim=-1).gather(-1, ids[:, 1:, None]).squeeze(-1)
    mask = answer[:, 1:]
    totals = torch.where(mask, logps, 0.0).sum(dim=1)
    counts = mask.sum(dim=1)
    return [AnswerLogp(float(t), int(c)) for t, c in zip(totals.tolist(), counts.tolist(), strict=True)]


def answer_logps(
    model: Any,
    sequences: Sequence[Scored],
    pad_id: int,
    batch_size: int = 16,
    on_batch: Callable[[], None] | None = None,
) -> list[AnswerLogp]:
    """The log-likelihood of every sequence's answer under ``model`` (put in eval mode, then left as it was);
    ``on_batch`` is called after each batch (progress)."""
    was_training = model.training
    model.eval()
    logps: list[AnswerLogp] = []
    try:
        for batch in _batches(sequences, batch_size):
            logps += _batch_logps(model, batch, pad_id)
            if on_batch:
                on_batch()
    finally:
        model.train(was_training)
    return logps


def turns_text(turns: Turns) -> str:
    """A conversation's turns as one text, one turn per line."""
    return "\n".join(str(turn.get("content") or "") for turn in turns)


def prompt_text(prompt: Turns) -> str:
    """The prompt as a person scans it in a table: its last user turn."""
    users = [turn for turn in prompt if turn.get("role") == "user"]
    return turns_text(users[-1:]) if users else turns_text(prompt[-1:])


def finite_mean(values: Sequence[float]) -> float | None:
    """The mean of the finite values (None when there are none)."""
    kept = [value for value in values if math.isfinite(value)]
    return sum(kept) / len(kept) if kept else None


def share_of(flags: Sequence[bool | None]) -> float | None:
    """The share of true flags among those that are not None (None when all are)."""
    kept = [flag for flag in flags if flag is not None]
    return sum(kept) / len(kept) if kept else None


def compare_pairs(
    rows: Sequence[Row],
    numbers: Sequence[int],
    base: Sequence[AnswerLogp],
    tuned: Sequence[AnswerLogp],
    beta: float,
    by_reward: bool = True,
) -> dict[str, Any]:
    """Base and tuned scores of pairs, from each model's answer log-likelihoods (chosen, rejected per row).

    Returns ``{"base": {...}, "tuned": {...}, "pairs": [...]}`` (see engine.evaluate.evaluations for the keys);
    ``by_reward`` adds the tuned model's accuracy by implicit reward (methods with a reference).
    """
    pairs = []
    for k, number in enumerate(numbers):
        row = rows[number - 1]
        base_chosen, base_rejected, tuned_chosen, tuned_rejected = (
            base[2 * k],
            base[2 * k + 1],
            tuned[2 * k],
            tuned[2 * k + 1],
        )
        margin = beta * ((tuned_chosen.total - base_chosen.total) - (tuned_rejected.total - base_rejected.total))
        pairs.append(
            {
                "row": number,
                "prompt": prompt_text(row["prompt"]),
                "chosen": turns_text(row["chosen"]),
                "rejected": turns_text(row["rejected"]),
                "chosen_tokens": tuned_chosen.tokens,
                "rejected_tokens": tuned_rejected.tokens,
                "base_chosen_logp": base_chosen.total,
                "base_rejected_logp": base_rejected.total,
                "tuned_chosen_logp": tuned_chosen.total,
                "tuned_rejected_logp": tuned_rejected.total,
                "margin": margin,
                "base_correct": base_chosen.mean > base_rejected.mean,
                "tuned_correct": tuned_chosen.mean > tuned_rejected.mean,
                "reward_correct": margin > 0 if by_reward else None,
            }
        )
    return {"base": _pair_summary(pairs, "base"), "tuned": _pair_summary(pairs, "tuned", by_reward), "pairs": pairs}


def _pair_summary(pairs: list[dict[str, Any]], side: str, by_reward: bool = False) -> dict[str, Any]:
    """Accuracy and mean per-token log-likelihoods of one model over the pairs (and the tuned model's margin)."""
    summary: dict[str, Any] = {
        "accuracy": share_of([p[f"{side}_correct"] for p in pairs]),
        "chosen_logp": finite_mean([p[f"{side}_chosen_logp"] / p["chosen_tokens"] for p in pairs]),
        "rejected_logp": finite_mean([p[f"{side}_rejected_logp"] / p["rejected_tokens"] for p in pairs]),
        "pairs": len(pairs),
    }
    if side == "tuned":
        summary["reward_accuracy"] = share_of([p["reward_correct"] for p in pairs]) if by_reward else None
        summary["mean_margin"] = finite_mean([p["margin"] for p in pairs])
    return summary


def compare_unpaired(
    rows: Sequence[Row],
    numbers: Sequence[int],
    base: Sequence[AnswerLogp],
    tuned: Sequence[AnswerLogp],
    beta: float,
) -> dict[str, Any]:
    """Base and tuned scores of kto rows (one answer each, labelled desirable or not); see the module docstring.

    Returns ``{"base": {...}, "tuned": {...}, "answers": [...]}``.
    """
    answers = []
    for k, number in enumerate(numbers):
        row = rows[number - 1]
        answers.append(
            {
                "row": number,
                "prompt": prompt_text(row["prompt"]),
                "completion": turns_text(row["completion"]),
                "label": bool(row["label"]),
                "tokens": tuned[k].tokens,
                "base_logp": base[k].total,
                "tuned_logp": tuned[k].total,
                "reward": beta * (tuned[k].total - base[k].total),
            }
        )
    desirable = [a["reward"] for a in answers if a["label"]]
    undesirable = [a["reward"] for a in answers if not a["label"]]
    medians = {
        label: statistics.median(rewards) if rewards else None
        for label, rewards in ((True, desirable), (False, undesirable))
    }
    for answer in answers:
        # Against the other label's median; rewards are beta times the log-ratios, so they rank alike.
        median = medians[not answer["label"]]
        answer["tuned_correct"] = _right_side(answer["reward"], answer["label"], median)
        # The base's log-ratio is 0 for every answer: 0 is neither above nor below a median of zeros.
        answer["base_correct"] = _right_side(0.0, answer["label"], 0.0 if median is not None else None)
    return {
        "base": _unpaired_summary(answers, "base"),
        "tuned": _unpaired_summary(answers, "tuned"),
        "answers": answers,
    }


def add_arm(scores: dict[str, Any], other: dict[str, Any], name: str) -> None:
    """Put the base side of ``other`` (the same rows compared with another base model) into ``scores`` as arm
    ``name``: its summary (what the base's is, without what compares with the tuned model) and, in each listed row,
    its ``base_*`` log-likelihoods and ranking as ``<name>_*``."""
    listed = "pairs" if "pairs" in scores else "answers"
    scores[name] = other["base"]
    for mine, theirs in zip(scores[listed], other[listed], strict=True):
        mine.update({f"{name}_{key[5:]}": value for key, value in theirs.items() if key.startswith("base_")})


def _right_side(reward: float, desirable: bool, median: float | None) -> bool | None:
    """Whether a reward is above (desirable) or below (undesirable) the other label's median; None without one."""
    if median is None:
        return None
    return reward > median if desirable else reward < median


def _unpaired_summary(answers: list[dict[str, Any]], side: str) -> dict[str, Any]:
    def mean_logp(label: bool) -> float | None:
        return finite_mean([a[f"{side}_logp"] / a["tokens"] for a in answers if a["label"] == label])

    summary: dict[str, Any] = {
        "desirable_logp": mean_logp(True),
        "undesirable_logp": mean_logp(False),
        "answers": len(answers),
        "desirable": sum(a["label"] for a in answers),
    }
    if side == "tuned":
        summary["reward_accuracy"] = share_of([a["tuned_correct"] for a in answers if a["label"]])
        good = finite_mean([a["reward"] for a in answers if a["label"]])
        bad = finite_mean([a["reward"] for a in answers if not a["label"]])
        summary["mean_margin"] = good - bad if good is not None and bad is not None else None
    return summary


@contextlib.contextmanager
def _base_of(model: Any, base_model: Any) -> Iterator[Any]:
    """The base to compare with: ``base_model`` when given, else a peft model with its adapter switched off."""
    if base_model is not None:
        yield base_model
        return
    if not hasattr(model, "disable_adapter"):
        raise ValueError("a full model needs its base_model to compare with")
    with model.disable_adapter():
        yield model


def score_pairs(
    model: Any,
    tokenizer: Any,
    template: str | None,
    rows: Sequence[Row],
    *,
    base_model: Any = None,
    beta: float = 0.1,
    by_reward: bool = True,
    max_length: int | None = None,
    truncation_mode: str = "keep_start",
    batch_size: int = 16,
) -> dict[str, Any]:
    """Score a loaded tuned model against its base on preference rows (or kto rows); no run directory needed.

    Args:
        model: the tuned causal LM; a peft model is its own base with the adapter switched off.
        tokenizer: its tokenizer (a pad token, or an eos token that stands in for it).
        template: the chat template to render with; None for the tokenizer's own.
        rows: canonical preference rows (prompt / chosen / rejected) or kto rows (prompt / completion / label).
        base_model: the base to compare with, for a full model (required then).
        beta: the method's beta, which scales the implicit reward.
        by_reward: also rank the tuned model's pairs by implicit reward (dpo, kto; not orpo, which has no
            reference).
        max_length, truncation_mode: cut long sequences as the trainer did (train.max_length).
        batch_size: sequences per forward pass.

    Returns:
        ``{"base", "tuned", "pairs"}`` for pairs or ``{"base", "tuned", "answers"}`` for kto rows (see
        ``compare_pairs`` / ``compare_unpaired``), plus ``"dropped"``: rows whose answer kept no token.
    """
    tokenized = tokenize_rows(tokenizer, rows, template, max_length, truncation_mode)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    tuned = answer_logps(model, tokenized.sequences, pad_id, batch_size)
    with _base_of(model, base_model) as base_model:
        base = answer_logps(base_model, tokenized.sequences, pad_id, batch_size)
    if rows and "chosen" not in rows[0]:
        scores = compare_unpaired(rows, tokenized.numbers, base, tuned, beta)
    else:
        scores = compare_pairs(rows, tokenized.numbers, base, tuned, beta, by_reward)
    return {**scores, "dropped": tokenized.dropped}
