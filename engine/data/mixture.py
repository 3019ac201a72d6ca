"""The training rows of data.path: one file, or several datasets concatenated after their caps and weights.

Each dataset of a list is read by the one loader (engine.data.rows.load_rows) with its own format, columns and
split, so its bad rows are named with its file and row number as for a single file. Its rows are then capped
(``max_samples``: the first N) and weighted (2: each row twice; 0.5: half the rows, drawn with the run's seed),
and the datasets are concatenated in the order of the list. The eval split and data.max_samples then apply to the
combined rows (engine.data.pipeline.select_rows).
"""

from __future__ import annotations

import random
from collections.abc import Callable

from engine.config.data import DataSection, DatasetEntry
from engine.data.errors import DataError
from engine.data.formats import PAIRED_FORMATS
from engine.data.rows import DatasetRows, LoadedRows, load_rows

# Formats of a mixed set read "alpaca+conversational"; engine.training.method_data.require_format splits them.
FORMAT_JOIN = "+"
SOURCE_JOIN = " + "

# Called with each dataset once it is loaded, before the datasets are combined (the method's format check).
AcceptDataset = Callable[[DatasetRows], None]


def load_training_rows(data: DataSection, seed: int, accept: AcceptDataset | None = None) -> LoadedRows:
    """The rows data.path names, validated and normalised: a plain path as load_rows reads it; a list of datasets
    each loaded, capped, weighted (``seed`` draws the fractional part) and concatenated in order.

    ``accept`` may refuse a dataset (raise) before the rows are combined. Raises DataError naming the dataset
    (``data.path.N``) and its file."""
    if isinstance(data.path, str):
        loaded = load_rows(data, first=_rows_that_can_train(data))
        size = len(loaded.rows)
        loaded.datasets = [DatasetRows("data.path", loaded.source, loaded.format, size, size)]
        if accept is not None:
            accept(loaded.datasets[0])
        return loaded
    parts = []
    for number, entry in enumerate(data.entries()):
        label = f"data.path.{number}"
        loaded = _load_entry(data, entry, label)
        picked = weighted_indices(len(loaded.rows), entry, seed, number)
        size = len(loaded.rows)
        rows = DatasetRows(label, loaded.source, loaded.format, size, len(picked), entry.max_samples, entry.weight)
        if accept is not None:
            accept(rows)
        parts.append((rows, loaded, picked))
    return combine(parts)


def _load_entry(data: DataSection, entry: DatasetEntry, label: str) -> LoadedRows:
    """One dataset of the list through load_rows, with its own format, columns and split (the section's other
    settings, the placeholders, apply to every dataset); its errors start with where it is in the list."""
    section = data.model_copy(
        update={"path": entry.path, "format": entry.format, "columns": entry.columns, "split": entry.split}
    )
    try:
        return load_rows(section, first=entry.max_samples)
    except DataError as exc:
        raise DataError(f"{label}: {exc}") from None


def _rows_that_can_train(data: DataSection) -> int | None:
    """How many of a plain data.path's first rows can train: data.max_samples when no rows are held out of it (the
    eval rows come from data.eval_path or nowhere), so the rest need not be read; None: every row may."""
    holds_out = not data.eval_path and data.eval_size > 0
    return None if holds_out else data.max_samples


def weighted_indices(num_rows: int, entry: DatasetEntry, seed: int, number: int) -> list[int]:
    """The row indices one dataset adds: of its first ``max_samples`` rows, every row once per whole unit of the
    weight, then for the fraction that share of the rows drawn with ``seed`` (at least one when the weight is
    below 1), in file order. Dataset ``number`` draws with a seed of its own, so equal files draw differently."""
    capped = list(range(min(num_rows, entry.max_samples or num_rows)))
    whole = int(entry.weight)
    extra = round(len(capped) * (entry.weight - whole))
    if whole == 0:
        extra = max(1, extra)  # a weight that small is still meant to train on the dataset
    drawn = sorted(random.Random(f"{seed}:{number}").sample(capped, min(extra, len(capped))))
    return capped * whole + drawn


def combine(parts: list[tuple[DatasetRows, LoadedRows, list[int]]]) -> LoadedRows:
    """The picked rows of each dataset, concatenated in order, remembering where each came from. Their extra
    columns come along: a row of a dataset without a column simply lacks it."""
    _require_one_kind(parts)
    rows, origins, columns, warnings, extras = [], [], [], [], []
    for number, (dataset, loaded, picked) in enumerate(parts):
        rows += [loaded.rows[index] for index in picked]
        origins += [(number, index + 1) for index in picked]
        extras += [loaded.extra(index) for index in picked]
        columns += loaded.columns
        warnings += [f"{dataset.label}: {warning}" for warning in loaded.warnings]
    datasets = [dataset for dataset, _, _ in parts]
    formats = FORMAT_JOIN.join(dict.fromkeys(dataset.format for dataset in datasets))
    source = SOURCE_JOIN.join(dataset.source for dataset in datasets)
    has_extras = any(loaded.extras is not None for _, loaded, _ in parts)
    return LoadedRows(
        rows,
        formats,
        source,
        list(dict.fromkeys(columns)),
        warnings,
        datasets,
        origins,
        extras if has_extras else None,
    )


def _require_one_kind(parts: list[tuple[DatasetRows, LoadedRows, list[int]]]) -> None:
    """Refuse a list that mixes preference or kto data with anything else: those rows train differently (every
    SFT format becomes a conversation or a text; see engine.data.formats)."""
    datasets = [dataset for dataset, _, _ in parts]
    paired = next((dataset for dataset in datasets if dataset.format in PAIRED_FORMATS), None)
    other = next((dataset for dataset in datasets if paired and dataset.format != paired.format), None)
    if paired is None or other is None:
        return
    raise DataError(
        f"{other.label} ({other.source}) is {other.format} data, but {paired.label} ({paired.source}) is "
        f"{paired.format} data: the datasets of one run are all {paired.format} data, or all instruction, chat, "
        f"prompt-completion, prompt-only, text or tool-calling data; remove {other.label} or {paired.label} from "
        "data.path"
    )
