"""The first training rows exactly as the model sees them, with the loss-bearing parts marked; and the dataset
check that shows them beside each training row's token count (check_tokens), from one tokenization."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from engine.data.formats import PAIRED_FORMATS
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
from engine.data.preference import answer_sides
from engine.data.rows import LoadedRows
from engine.data.template_guard import CHECK_BUDGET_S
from engine.data.tokenize import TokenizedRow

if TYPE_CHECKING:
    from engine.config import RunConfig


@dataclass
class PreviewExample:
    """One training row after templating, tokenization and truncation."""

    row: int  # 1-based row number in the training file
    segments: list[tuple[str, bool]]  # decoded text pieces; True where the tokens carry loss
    num_tokens: int
    num_loss_tokens: int
    truncated: bool
    source: str = ""  # the file of the row when data.path lists several datasets ("" for one file)
    side: str = ""  # of a preference or kto row: which answer (chosen, rejected, desirable, undesirable)


def preview_examples(config: RunConfig, tokenizer: Any, n: int = 3) -> list[PreviewExample]:
    """The first ``n`` rows that train (after the eval split and max_samples), decoded token by token; a
    preference row gives an example per answer.

    Each segment is decoded from its own token ids, so the text is what the model sees, special tokens
    included.
    """
    loaded, train_idx, _, _ = select_rows(config.data, config.train.seed)
    examples: list[PreviewExample] = []
    # Tokenize a few rows at a time: rows without loss are skipped (they do not train), so n may need more.
    position = 0
    while len({(example.source, example.row) for example in examples}) < n and position < len(train_idx):
        batch = train_idx[position : position + n]
        position += n
        tokenized = tokenize_rows(loaded, batch, tokenizer, config.data, config.train.max_length)
        examples += first_examples(tokenizer, loaded, tokenized, n)
    return _of_first_rows(examples, n)


@dataclass
class TokenCheck:
    """The dataset check with a tokenizer, from one tokenization of the training rows."""

    report: DataReport  # as inspect_dataset reports it
    # Tokens before truncation of each training row that trains (TokenizedRow.length; for a row far longer than
    # max_length a lower bound, see encode_head). Rows dropped for want of a loss token (report.num_dropped) have
    # no entry: all that is known of them is that they are longer than max_length.
    lengths: list[int]
    examples: list[PreviewExample]  # the first rows that train, as preview_examples gives them


def check_tokens(
    config: RunConfig, tokenizer: Any, n: int = 3, template_budget_s: float = CHECK_BUDGET_S
) -> TokenCheck:
    """``inspect_dataset`` with a tokenizer, plus every training row's token count and the first ``n`` examples.

    The same steps as inspect_dataset (the template guard before any row is rendered here), but the rows are
    tokenized once for the report, the counts and the examples: the dataset panel needs all three.
    """
    data, max_length = config.data, config.train.max_length
    loaded, train_idx, eval_loaded, eval_idx = select_rows(data, config.train.seed)
    report = start_report(data, loaded, train_idx, eval_loaded, eval_idx)
    guard_chat_template(data, tokenizer, [(loaded, train_idx)], template_budget_s)
    tokenized = tokenize_rows(loaded, train_idx, tokenizer, data, max_length)
    require_trainable(tokenized, data, loaded.source, max_length)
    add_token_counts(report, tokenized)
    examples = first_examples(tokenizer, loaded, _tool_call_first(tokenized), n)
    return TokenCheck(report, [row.length for row in tokenized.rows], examples)


def _tool_call_first(tokenized: TokenizedSet) -> TokenizedSet:
    """``tokenized`` with its first row that trains a tool call whole moved to the front, so that the preview of a
    tool-calling dataset shows a call, not only the plain chats that happen to come first."""
    first = tokenized.tools.first_whole
    if first is None or tokenized.numbers[0] == first:
        return tokenized
    order = sorted(range(len(tokenized.rows)), key=lambda i: tokenized.numbers[i] != first)  # stable: rest keep order
    return replace(tokenized, rows=[tokenized.rows[i] for i in order], numbers=[tokenized.numbers[i] for i in order])


def first_examples(tokenizer: Any, loaded: LoadedRows, tokenized: TokenizedSet, n: int) -> list[PreviewExample]:
    """The examples of the first ``n`` training rows of ``tokenized``: one per row, or one per answer of a
    preference or kto row (named by its side)."""
    paired = loaded.format in PAIRED_FORMATS
    examples: list[PreviewExample] = []
    seen: Counter[int] = Counter()  # row number -> its answers taken so far
    for number, row in zip(tokenized.numbers, tokenized.rows, strict=True):
        if number not in seen and len(seen) >= n:
            break
        example = _example(tokenizer, loaded, number, row)
        if paired:  # a row's answers follow each other in answer_sides' order (a row is kept or dropped whole)
            example.side = answer_sides(loaded.rows[number - 1])[seen[number]]
        seen[number] += 1
        examples.append(example)
    return examples


def _of_first_rows(examples: list[PreviewExample], n: int) -> list[PreviewExample]:
    """The examples of the first ``n`` rows among ``examples`` (every answer of each)."""
    rows = list(dict.fromkeys((example.source, example.row) for example in examples))[:n]
    return [example for example in examples if (example.source, example.row) in rows]


def _example(tokenizer: Any, loaded: LoadedRows, number: int, row: TokenizedRow) -> PreviewExample:
    """Training row ``number`` (1-based among ``loaded.rows``) as the model sees it, named by its file's row."""
    source, file_row = loaded.where(number - 1)
    segments: list[tuple[str, bool]] = []
    start = 0
    for end in range(1, len(row.input_ids) + 1):
        if end == len(row.input_ids) or row.completion_mask[end] != row.completion_mask[start]:
            text = tokenizer.decode(row.input_ids[start:end], skip_special_tokens=False)
            segments.append((text, bool(row.completion_mask[start])))
            start = end
    listed = source if loaded.origins is not None else ""
    return PreviewExample(file_row, segments, len(row.input_ids), row.num_loss_tokens, row.truncated, listed)


def to_text(example: PreviewExample, marker: str = "[[", end: str = "]]") -> str:
    """The example as one string with the loss-bearing parts wrapped in ``marker`` ... ``end``."""
    return "".join(f"{marker}{text}{end}" if loss else text for text, loss in example.segments)
