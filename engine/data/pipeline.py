"""From a DataSection to trainer-ready datasets: load, detect, validate, normalise, split, tokenize.

Every step is deterministic (the eval split is a seeded shuffle, the weights of a list of datasets a seeded
draw), so the studio's dataset check, the preview and the training process all see the same rows.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from engine.config.data import DataSection
from engine.data.errors import DataError, render_error
from engine.data.formats import PAIRED_FORMATS, is_prompt_row
from engine.data.mixture import AcceptDataset, load_training_rows
from engine.data.preference import as_conversations
from engine.data.rows import DatasetRows, LoadedRows, load_rows
from engine.data.template_guard import CHECK_BUDGET_S, Conversation, probe_template, special_tokens_of
from engine.data.tokenize import (
    TokenizedRow,
    closes_assistant_turns,
    encode_head,
    render,
    resolve_chat_template,
    tokenize_row,
)
from engine.data.tools import calls_tools
from engine.data.warnings import EVAL_FILE_PREFIX, warning


@dataclass
class DataReport:
    """What the dataset check found; shown before launch and logged by the trainer."""

    # The fields below describe the whole training data: for a list of datasets, their combined rows.
    format: str  # the detected (or overridden) format: alpaca, ...; a mixed list's joined: alpaca+conversational
    source: str  # the resolved file path or the hub id (a list's joined with " + ")
    num_rows: int  # training rows used: after the eval split, max_samples and dropping rows without loss
    num_eval_rows: int
    columns: list[str]  # the columns of the file(s), in order of first appearance
    num_source_rows: int = 0  # rows in the file; for a list, its datasets' rows after their caps and weights
    eval_source: str | None = None  # the eval file when data.eval_path is set
    num_tokens: int | None = None  # tokens of the training rows after truncation (None without a tokenizer)
    num_loss_tokens: int | None = None  # of which carry loss
    num_too_long: int = 0  # training rows longer than max_length (truncated)
    num_dropped: int = 0  # training rows dropped because no loss token was left after truncation
    num_tool_rows: int = 0  # training rows with an assistant's tool call
    num_tool_rows_whole: int = 0  # of which neither cut short nor dropped by max_length
    num_images: int = 0  # images of the training rows (vision-language data)
    warnings: list[str] = field(default_factory=list)
    datasets: list[DatasetRows] = field(default_factory=list)  # each dataset of data.path: file, format, rows

    @property
    def listed(self) -> bool:
        """Whether data.path lists datasets (then each is reported on its own line)."""
        return any(dataset.label != "data.path" for dataset in self.datasets)


@dataclass
class TokenizedSet:
    """Tokenized rows that train (at least one loss token), their 1-based row numbers, and what was cut."""

    rows: list[TokenizedRow]
    numbers: list[int]
    num_too_long: int
    num_dropped: int
    warnings: list[str]
    tools: ToolRows = field(default_factory=lambda: ToolRows())


@dataclass
class ToolRows:
    """The rows with an assistant's tool call among those tokenized, and how many of them train whole (neither
    cut short nor dropped by max_length): a tool-calling dataset whose calls are all cut away teaches none."""

    rows: int = 0
    whole: int = 0
    first_whole: int | None = None  # the 1-based number of the first that trains whole

    def count(self, number: int, whole: bool) -> None:
        """Count row ``number``, one with a tool call."""
        self.rows += 1
        self.whole += whole
        if whole and self.first_whole is None:
            self.first_whole = number


def split_indices(num_rows: int, eval_size: float, seed: int) -> tuple[list[int], list[int]]:
    """Train and eval row indices: ``eval_size`` (a fraction if < 1, else a count) held out, seeded.

    Both lists keep file order; the same (num_rows, eval_size, seed) always gives the same split.
    """
    if eval_size <= 0:
        return list(range(num_rows)), []
    count = int(eval_size) if eval_size >= 1 else max(1, round(num_rows * eval_size))
    if count >= num_rows:
        raise DataError(
            f"data.eval_size {eval_size:g} holds out {count} of {num_rows} rows and leaves none to train on; "
            "make it smaller"
        )
    order = list(range(num_rows))
    random.Random(seed).shuffle(order)
    return sorted(order[count:]), sorted(order[:count])


def split_rows(loaded: LoadedRows, eval_size: float, seed: int) -> tuple[list[int], list[int]]:
    """``split_indices`` over the distinct rows of the training data: the copies of a row that a dataset's weight
    repeats all train or are held out once, so no evaluated row is also trained on. Without copies (one file, or
    no weight above 1) it is ``split_indices`` over the rows."""
    origins = loaded.origins
    if origins is None or len(set(origins)) == len(origins):
        return split_indices(len(loaded.rows), eval_size, seed)
    first: dict[tuple[int, int], int] = {}  # each distinct row -> the index of its first copy
    for index, origin in enumerate(origins):
        first.setdefault(origin, index)
    distinct = list(first)
    _, eval_picks = split_indices(len(distinct), eval_size, seed)
    held = {distinct[pick] for pick in eval_picks}
    train_idx = [index for index, origin in enumerate(origins) if origin not in held]
    return train_idx, sorted(first[origin] for origin in held)


def select_rows(
    data: DataSection, seed: int, accept: AcceptDataset | None = None
) -> tuple[LoadedRows, list[int], LoadedRows | None, list[int]]:
    """The loaded training data with its training indices, and the eval rows (separate file or held out).

    ``accept`` may refuse a dataset of data.path (raise) once it is loaded (engine.data.mixture)."""
    loaded = load_training_rows(data, seed, accept)
    if data.eval_path:
        train_idx = list(range(len(loaded.rows)))
        try:
            eval_loaded: LoadedRows | None = load_rows(data, data.eval_path)
        except DataError as exc:  # say which field: the two files often look alike
            raise DataError(f"data.eval_path: {exc}") from None
        eval_idx = list(range(len(eval_loaded.rows)))
    else:
        train_idx, eval_idx = split_rows(loaded, data.eval_size, seed)
        eval_loaded = loaded if eval_idx else None
    if data.max_samples is not None:
        train_idx = train_idx[: data.max_samples]
    return loaded, train_idx, eval_loaded, eval_idx


def tokenize_rows(
    loaded: LoadedRows,
    indices: list[int],
    tokenizer: Any,
    data: DataSection,
    max_length: int,
    label: str = "",
) -> TokenizedSet:
    """Tokenize the chosen rows; count truncated rows and drop (with a warning) rows left without loss.

    A preference row gives two tokenized sequences (chosen, rejected) under one row number, a kto row one."""
    template = resolve_chat_template(tokenizer, data.chat_template)
    kept: list[TokenizedRow] = []
    numbers: list[int] = []
    too_long = dropped = long_prompts = 0
    tools = ToolRows()
    paired = loaded.format in PAIRED_FORMATS
    for index in indices:
        sides = _tokenize_sides(loaded, index, tokenizer, template, max_length, data.completion_only_loss or paired)
        if is_prompt_row(loaded.rows[index]):  # no loss by nature: the method samples the answers (grpo)
            long_prompts += sides[0].truncated
            if not sides[0].truncated:
                kept += sides
                numbers.append(index + 1)
            continue
        truncated = any(side.truncated for side in sides)
        too_long += truncated
        untrained = any(side.num_loss_tokens == 0 for side in sides)
        if calls_tools(loaded.rows[index]):
            tools.count(index + 1, whole=not truncated and not untrained)
        if untrained:
            dropped += 1
            continue
        kept += sides
        numbers += [index + 1] * len(sides)
    counts = {"total": len(indices), "label": label, "max_length": max_length}
    warnings = []
    if long_prompts:  # as engine.data.prompts drops them for training
        warnings.append(warning("prompts_too_long", count=long_prompts, **counts))
    chats = any("messages" in loaded.rows[index] and not is_prompt_row(loaded.rows[index]) for index in indices)
    if chats and data.completion_only_loss and not closes_assistant_turns(tokenizer, template):
        warnings.append(warning("no_end_of_turn"))
    if too_long:
        warnings.append(warning("rows_too_long", count=too_long, **counts))
    if dropped:
        warnings.append(warning("rows_dropped", count=dropped, **counts))
    if tools.whole < tools.rows:
        warnings.append(warning("tool_rows_cut", count=tools.rows, whole=tools.whole, **counts))
    return TokenizedSet(kept, numbers, too_long, dropped + long_prompts, warnings, tools)


def _tokenize_sides(
    loaded: LoadedRows, index: int, tokenizer: Any, template: str, max_length: int, completion_only_loss: bool
) -> list[TokenizedRow]:
    """Row ``index`` as the model reads it (conversations_of), tokenized; a prompt-only row as the prompt the
    model answers (with the generation prompt), no token carrying loss. Errors name the row."""
    try:
        row = loaded.rows[index]
        if is_prompt_row(row):
            return [tokenize_prompt(tokenizer, row["messages"], template, max_length)]
        return [
            tokenize_row(tokenizer, one, template, max_length, completion_only_loss)
            for one in conversations_of(loaded, index)
        ]
    except Exception as exc:  # a template's raise_exception, or our DataError: name the row either way
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise render_error(*loaded.where(index), message) from None


def tokenize_prompt(tokenizer: Any, messages: list[dict[str, Any]], template: str, max_length: int) -> TokenizedRow:
    """A prompt as the model reads it before answering: rendered with the generation prompt, no loss."""
    text = render(tokenizer, messages, template, add_generation_prompt=True)
    ids = list(encode_head(tokenizer, text, max_length, add_special_tokens=False)["input_ids"])
    return TokenizedRow(ids[:max_length], [0] * min(len(ids), max_length), len(ids))


def conversations_of(loaded: LoadedRows, index: int) -> list[dict[str, Any]]:
    """What the model reads of one row: the row itself, or for a preference row its two conversations
    (prompt + chosen, prompt + rejected) and for a kto row its one (engine.data.preference.as_conversations)."""
    row = loaded.rows[index]
    return as_conversations(row) if loaded.format in PAIRED_FORMATS else [row]


def require_trainable(tokenized: TokenizedSet, data: DataSection, source: str, max_length: int) -> None:
    """Raise DataError when no training row keeps a token that carries loss (nothing would train), or when the
    data has rows with tool calls and none of them trains whole (the run would teach plain chat only)."""
    tools = tokenized.tools
    if tokenized.rows and (tools.whole or not tools.rows):
        return
    if tokenized.rows:
        raise DataError(f"{source}: " + warning("tool_rows_none", count=tools.rows, max_length=max_length))
    hint = (
        "check data.chat_template: it must render the assistant's answers"
        if data.chat_template
        else "raise train.max_length"
    )
    raise DataError(f"{source}: no training row has a token to learn from within max_length {max_length}; {hint}")


def guard_chat_template(
    data: DataSection, tokenizer: Any, parts: list[tuple[LoadedRows, list[int]]], budget_s: float
) -> None:
    """Before rendering ``parts`` (rows by index) in this process, render them with ``data.chat_template`` in a
    child process under ``budget_s`` CPU seconds and a memory limit (engine.data.template_guard); raise DataError
    when the template exceeds either or fails on a row. The tokenizer's own template is trusted: no child then."""
    if not data.chat_template:
        return
    conversations = [
        Conversation(*loaded.where(index), _probed(one), one.get("prompt_turns", 0), one.get("tools") or None)
        for loaded, indices in parts
        for index in indices
        for one in conversations_of(loaded, index)
        if "messages" in one
    ]
    probe_template(data.chat_template, conversations, special_tokens_of(tokenizer), data.completion_only_loss, budget_s)


def _probed(row: dict[str, Any]) -> list[dict[str, Any]]:
    """The messages the template probe renders for a row. A prompt alone is rendered with the generation prompt
    (tokenize_prompt, and GRPO), which the probe's plan makes only before an answer: so it probes the prompt
    followed by an empty answer, whose plan holds that render."""
    if not is_prompt_row(row):
        return row["messages"]
    return [*row["messages"], {"role": "assistant", "content": ""}]


def inspect_dataset(
    data: DataSection,
    tokenizer: Any = None,
    max_length: int = 1024,
    seed: int = 42,
    template_budget_s: float = CHECK_BUDGET_S,
    accept: AcceptDataset | None = None,
) -> DataReport:
    """Check a dataset without training: load, detect, validate, split; count tokens if a tokenizer is given.

    Raises DataError with every problem found. ``seed`` picks the held-out rows and draws the weighted rows of a
    list of datasets (use config.train.seed). ``template_budget_s``: CPU seconds a configured chat template may
    take to render the rows (see guard_chat_template); the default suits a check someone waits for. ``accept``
    may refuse each dataset of data.path before any row is tokenized (the method's format check).
    """
    loaded, train_idx, eval_loaded, eval_idx = select_rows(data, seed, accept)
    report = start_report(data, loaded, train_idx, eval_loaded, eval_idx)
    if tokenizer is not None:
        guard_chat_template(data, tokenizer, [(loaded, train_idx)], template_budget_s)
        tokenized = tokenize_rows(loaded, train_idx, tokenizer, data, max_length)
        require_trainable(tokenized, data, loaded.source, max_length)
        add_token_counts(report, tokenized)
    return report


def start_report(
    data: DataSection,
    loaded: LoadedRows,
    train_idx: list[int],
    eval_loaded: LoadedRows | None,
    eval_idx: list[int],
) -> DataReport:
    """The report as far as rows go (token counts come with a tokenizer), with the loading warnings."""
    report = DataReport(
        format=loaded.format,
        source=loaded.source,
        num_rows=len(train_idx),
        num_eval_rows=len(eval_idx),
        columns=loaded.columns,
        num_source_rows=len(loaded.rows),
        eval_source=eval_loaded.source if data.eval_path and eval_loaded else None,
        warnings=list(loaded.warnings),
        datasets=list(loaded.datasets),
    )
    if eval_loaded is not None and eval_loaded is not loaded:
        report.warnings += [f"{EVAL_FILE_PREFIX}: {line}" for line in eval_loaded.warnings]
    return report


def add_token_counts(report: DataReport, tokenized: TokenizedSet) -> None:
    """Fill the report's token counts from the tokenized training rows."""
    report.num_rows = len(set(tokenized.numbers))
    report.num_tokens = sum(len(row.input_ids) for row in tokenized.rows)
    report.num_loss_tokens = sum(row.num_loss_tokens for row in tokenized.rows)
    report.num_too_long = tokenized.num_too_long
    report.num_dropped = tokenized.num_dropped
    report.num_tool_rows, report.num_tool_rows_whole = tokenized.tools.rows, tokenized.tools.whole
    report.warnings += tokenized.warnings
