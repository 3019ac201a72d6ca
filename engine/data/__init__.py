"""Datasets for supervised fine-tuning: load, detect the format, validate, tokenize with loss masks.

The public API:

- ``inspect_dataset(data, tokenizer=None, max_length=1024, seed=42) -> DataReport``: the pre-launch check.
- ``prepare_datasets(config, tokenizer) -> PreparedData``: tokenized train / eval ``datasets.Dataset``s
  with ``input_ids`` and ``completion_mask`` (1 = the token carries loss).
- ``preview_examples(config, tokenizer, n=3) -> list[PreviewExample]`` and ``to_text``: rows as the model
  sees them, loss-bearing parts marked.
- ``load_rows(data, path=None, first=None) -> LoadedRows``: one file's validated rows in canonical form (messages or
  text); ``first``: only a hub dataset's first rows (engine.data.hub streams them).

``data.path`` names one file or hub id, or lists several datasets (engine.data.mixture): each is loaded on its own,
capped and weighted, and their rows concatenated; ``DataReport.datasets`` reports each.

Every problem with the data is a ``DataError`` (a ValueError) whose message names the file and the row.
"""

from engine.data.errors import DataError
from engine.data.pipeline import DataReport, inspect_dataset, split_indices
from engine.data.prepare import PreparedData, prepare_datasets, prepare_paired_datasets
from engine.data.preview import PreviewExample, preview_examples, to_text
from engine.data.rows import DatasetRows, LoadedRows, load_rows
from engine.data.tokenize import DEFAULT_CHAT_TEMPLATE, resolve_chat_template

__all__ = [
    "DEFAULT_CHAT_TEMPLATE",
    "DataError",
    "DataReport",
    "DatasetRows",
    "LoadedRows",
    "PreparedData",
    "PreviewExample",
    "inspect_dataset",
    "load_rows",
    "preview_examples",
    "prepare_datasets",
    "prepare_paired_datasets",
    "resolve_chat_template",
    "split_indices",
    "to_text",
]
