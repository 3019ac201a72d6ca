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
    TokenizedSet,
    add_token_counts,
    guard_chat_template,
    require_trainable,
    select_rows,
    start_report,
    tokenize_rows,
)
from engine.data.template_guard import TRAIN_BUDGET_S

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
    data, max_length = config.data, config.train.max_length
    loaded, train_idx, eval_loaded, eval_idx = select_rows(data, config.train.seed)
    with_labels = not config.train.packing
    parts = [(loaded, train_idx), *([(eval_loaded, eval_idx)] if eval_loaded is not None else [])]
    guard_chat_template(data, tokenizer, parts, TRAIN_BUDGET_S)
    train_set = tokenize_rows(loaded, train_idx, tokenizer, data, max_length)
    require_trainable(train_set, data, loaded.source, max_length)
    report = start_report(data, loaded, train_idx, eval_loaded, eval_idx)
    add_token_counts(report, train_set)
    eval_dataset = None
    if eval_loaded is not None:
        eval_set = tokenize_rows(eval_loaded, eval_idx, tokenizer, data, max_length, label="eval ")
        report.warnings += [warning for warning in eval_set.warnings if warning not in report.warnings]
        report.num_eval_rows = len(eval_set.rows)
        eval_dataset = _to_dataset(eval_set, with_labels) if eval_set.rows else None
    return PreparedData(_to_dataset(train_set, with_labels), eval_dataset, report)


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
