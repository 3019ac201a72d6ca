"""The datasets the trainer gets: pre-tokenized ``input_ids`` with ``labels`` (-100 where no loss), or with
``completion_mask`` when TRL must still pack them.

With ``labels`` ready and rows already cut to max_length, the trainer skips TRL's own dataset preparation
(three ``datasets.map`` passes that cost about a second before the first step; see engine.training.builders). For
packing, TRL prepares the data itself, and then this applies:

TRL's SFTTrainer recognises a dataset with an ``input_ids`` column as already processed and builds
``labels`` from ``completion_mask``, but only when ``SFTConfig.completion_only_loss`` is True: its default
(None) means "True only for prompt/completion columns", which is False for these datasets, and then the
mask is silently dropped and every token trains. So the trainer must pass ``completion_only_loss=True``
always; data.completion_only_loss is already applied here (a mask of all ones when it is off).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.data.pipeline import (
    DataReport,
    LoadedRows,
    TokenizedSet,
    add_token_counts,
    guard_chat_template,
    require_trainable,
    select_rows,
    start_report,
    tokenize_rows,
)
from engine.data.template_guard import TRAIN_BUDGET_S
from engine.data.warnings import EVAL_LABEL

if TYPE_CHECKING:
    import datasets

    from engine.config import RunConfig


@dataclass
class PreparedData:
    """Tokenized training (and optional eval) datasets with the report of how they were made."""

    train: datasets.Dataset
    eval: datasets.Dataset | None
    report: DataReport


def prepare_datasets(config: RunConfig, tokenizer: Any) -> PreparedData:
    """Load, check, split and tokenize the data of a run; raise DataError if it cannot train.

    Warnings (truncated rows, dropped rows, unfilled placeholders) are in ``report.warnings`` for the caller
    to show; nothing is printed here, so a training log does not get them twice.
    """
    checked = _checked_sets(config, tokenizer)
    with_labels = not config.train.packing
    evaluation = checked.eval_set
    eval_dataset = _to_dataset(evaluation, with_labels) if evaluation and evaluation.rows else None
    return PreparedData(_to_dataset(checked.train_set, with_labels), eval_dataset, checked.report)


def prepare_paired_datasets(config: RunConfig, tokenizer: Any) -> PreparedData:
    """The rows of a preference or kto run in TRL's conversational form (prompt / chosen / rejected, or prompt /
    completion / label), checked and split as for SFT. TRL's trainer tokenizes them with the tokenizer's chat
    template, so they stay untokenized here; the report's token counts come from the same prompt + answer
    conversations (engine.data.preference.as_conversations)."""
    import datasets

    checked = _checked_sets(config, tokenizer)
    train = datasets.Dataset.from_list(_kept_rows(checked.loaded, checked.train_set))
    evaluation = None
    if checked.eval_loaded is not None and checked.eval_set is not None and checked.eval_set.rows:
        evaluation = datasets.Dataset.from_list(_kept_rows(checked.eval_loaded, checked.eval_set))
    return PreparedData(train, evaluation, checked.report)


@dataclass
class _CheckedSets:
    """The run's rows, split, guarded and tokenized (for training or only for counting), with the report."""

    loaded: LoadedRows
    train_set: TokenizedSet
    eval_loaded: LoadedRows | None
    eval_set: TokenizedSet | None
    report: DataReport


def _checked_sets(config: RunConfig, tokenizer: Any) -> _CheckedSets:
    """What every method's data goes through: select and split the rows, render them through the template guard,
    tokenize, refuse a set with nothing to learn, and report (eval rows counted after their own truncation)."""
    data, max_length = config.data, config.train.max_length
    loaded, train_idx, eval_loaded, eval_idx = select_rows(data, config.train.seed)
    parts = [(loaded, train_idx), *([(eval_loaded, eval_idx)] if eval_loaded is not None else [])]
    guard_chat_template(data, tokenizer, parts, TRAIN_BUDGET_S)
    train_set = tokenize_rows(loaded, train_idx, tokenizer, data, max_length)
    require_trainable(train_set, data, loaded.source, max_length)
    report = start_report(data, loaded, train_idx, eval_loaded, eval_idx)
    add_token_counts(report, train_set)
    eval_set = None
    if eval_loaded is not None:
        eval_set = tokenize_rows(eval_loaded, eval_idx, tokenizer, data, max_length, label=EVAL_LABEL)
        report.warnings += [warning for warning in eval_set.warnings if warning not in report.warnings]
        report.num_eval_rows = len(set(eval_set.numbers))  # a preference row is two sequences under one number
    return _CheckedSets(loaded, train_set, eval_loaded, eval_set, report)


def _kept_rows(loaded: LoadedRows, counted: TokenizedSet) -> list[dict[str, Any]]:
    """The rows that keep answer tokens within max_length, as the report counts them. A row whose prompt fills
    max_length would leave an answer of no tokens: TRL's DPOTrainer drops such rows itself, ORPO's averages
    over no tokens (NaN), so none reaches a trainer."""
    return [loaded.rows[number - 1] for number in dict.fromkeys(counted.numbers)]


def _to_dataset(tokenized: TokenizedSet, with_labels: bool) -> datasets.Dataset:
    import datasets

    ids = [row.input_ids for row in tokenized.rows]
    if not with_labels:
        return datasets.Dataset.from_dict(
            {"input_ids": ids, "completion_mask": [r.completion_mask for r in tokenized.rows]}
        )
    labels = [
        [token if keep else -100 for token, keep in zip(row.input_ids, row.completion_mask, strict=True)]
        for row in tokenized.rows
    ]
    return datasets.Dataset.from_dict({"input_ids": ids, "labels": labels})
