"""One dataset file read into validated rows of canonical form, and the record of where each row came from.

``load_rows`` is the one loader: a plain data.path, an eval file, and each dataset of a list (engine.data.mixture)
all go through it, so a bad row is reported the same way wherever it is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.config.data import PREFERENCE_FORMAT, UNPAIRED_FORMAT, ColumnMap, DataSection
from engine.data.formats import detect_format, extra_columns, fill_placeholders, normalise_row
from engine.data.loading import read_rows
from engine.data.preference import normalise_kto, normalise_preference
from engine.data.validation import validate_images, validate_rows
from engine.data.vision_rows import VISION_FORMAT, is_vision_dataset, normalise_vision_row


@dataclass
class DatasetRows:
    """What one dataset of data.path gave: its file, its format, and its rows before and after its cap and weight."""

    label: str  # where it is in the config: "data.path" for a plain path, "data.path.N" for an item of a list
    source: str  # the resolved file path or the hub id
    format: str
    num_source_rows: int  # rows in the file
    num_rows: int  # rows it adds to the training data: after its max_samples and weight
    max_samples: int | None = None
    weight: float = 1.0

    def summary(self) -> str:
        """One line: which file, its format and how many of its rows train, e.g. ``data.path.1: x.jsonl:
        conversational, 20 rows used (the first 10 of 2,000, weight 2)``."""
        capped = self.max_samples is not None and self.max_samples < self.num_source_rows
        parts = [
            f"the first {self.max_samples:,} of {self.num_source_rows:,}"
            if capped
            else f"{self.num_source_rows:,} in the file"
        ]
        if self.weight != 1:
            parts.append(f"weight {self.weight:g}")
        return f"{self.label}: {self.source}: {self.format}, {self.num_rows:,} rows used ({', '.join(parts)})"


@dataclass
class LoadedRows:
    """A validated dataset in canonical form.

    For one file ``rows[i]`` is row ``i + 1`` of ``source``. Rows combined from a list of datasets carry their
    ``origins`` (the dataset's index in ``datasets`` and the row's number in its file): ``where`` names either.

    ``extras[i]`` holds the columns of ``rows[i]`` that its format does not read (engine.data.formats.extra_columns),
    as in the file: the reward functions of grpo read them (engine.data.prompts). None when no row has any.
    """

    rows: list[dict[str, Any]]
    format: str
    source: str
    columns: list[str]
    warnings: list[str] = field(default_factory=list)
    datasets: list[DatasetRows] = field(default_factory=list)  # the training data's datasets, in data.path order
    origins: list[tuple[int, int]] | None = None  # per row (dataset index, row number); None: one file
    extras: list[dict[str, Any]] | None = None  # per row its extra columns; None: no row has any

    def where(self, index: int) -> tuple[str, int]:
        """The file and the 1-based row number in it of ``rows[index]``, as an error message names a row."""
        if self.origins is None:
            return self.source, index + 1
        dataset, number = self.origins[index]
        return self.datasets[dataset].source, number

    def extra(self, index: int) -> dict[str, Any]:
        """The extra columns of ``rows[index]`` (empty when it has none); shared with the file's row: do not change."""
        return self.extras[index] if self.extras is not None else {}


def load_rows(data: DataSection, path: str | None = None, first: int | None = None) -> LoadedRows:
    """Load, detect, validate and normalise one file: ``path``, else the plain ``data.path``; raise DataError if
    unusable. ``data``'s format, columns, split and placeholders apply; ``first``: of a hub dataset, only its first
    rows are read (a local file is read whole). A data.path that lists several datasets is loaded by
    engine.data.mixture.load_training_rows (each through here)."""
    if path is None and not isinstance(data.path, str):
        raise TypeError("data.path lists several datasets: load them with engine.data.mixture.load_training_rows")
    raw, source = read_rows(path or data.path, data.split, first)
    columns = list(dict.fromkeys(key for row in raw for key in row))
    fmt = VISION_FORMAT if is_vision_dataset(raw, data, source) else detect_format(raw, data, source)
    validate_rows(raw, fmt, data.columns, source)
    base = Path(source).parent if Path(source).is_file() else None  # image paths are relative to the file
    if fmt == VISION_FORMAT:
        validate_images(raw, data.columns, source, base)
    rows = [normalise(row, fmt, data.columns, base) for row in raw]
    warnings = fill_placeholders(rows, data.placeholders)
    extras = [extra_columns(row, fmt, data.columns) for row in raw]
    return LoadedRows(rows, fmt, source, columns, warnings, extras=extras if any(extras) else None)


def normalise(row: dict[str, Any], fmt: str, columns: ColumnMap, base: Path | None = None) -> dict[str, Any]:
    """One validated row in the canonical form of its format (engine.data.formats, engine.data.preference,
    engine.data.vision_rows: ``base`` is the folder its image paths are relative to)."""
    if fmt == VISION_FORMAT:
        return normalise_vision_row(row, columns, base)
    if fmt == PREFERENCE_FORMAT:
        return normalise_preference(row, columns)
    if fmt == UNPAIRED_FORMAT:
        return normalise_kto(row, columns)
    return normalise_row(row, fmt, columns)
