"""Rows of a hub dataset through the datasets library, whole or only the first N.

A run that trains on the first N rows of a large hub dataset (a listed dataset's ``max_samples``, or
``data.max_samples`` when no rows are held out) streams them: the library then fetches only the files, and the
row groups of a Parquet file, that hold those rows, instead of downloading and preparing the whole dataset. When
streaming fails (an offline machine that has the dataset in its cache, a dataset the library cannot stream), the
split is read the usual way and sliced (``train[:N]``), which still converts only those rows to Python.
"""

from __future__ import annotations

from itertools import islice
from typing import Any

from engine.data.errors import DataError


def read_hub_rows(dataset_id: str, split: str, first: int | None = None) -> list[dict[str, Any]]:
    """The rows of ``split`` of hub dataset ``dataset_id`` (a local dataset folder works too), or its first
    ``first`` rows; images stay as the library stores them (``{"bytes", "path"}``), as ``to_list`` gives them.

    A split that slices already (``train[:5000]``) is read as given. Raises DataError with the library's reason."""
    if first is not None and "[" not in split:
        rows = _stream_first(dataset_id, split, first)
        if rows is None:
            rows = _load(dataset_id, f"{split}[:{first}]", split)
    else:
        rows = _load(dataset_id, split, split)
    if not rows:
        raise DataError(f"hub dataset {dataset_id} (split {split}) has no rows")
    return rows


def _stream_first(dataset_id: str, split: str, first: int) -> list[dict[str, Any]] | None:
    """The first rows read by streaming, undecoded; None when the library cannot stream this dataset here."""
    import datasets

    try:
        stream = datasets.load_dataset(dataset_id, split=split, streaming=True).decode(False)
        return list(islice(stream, first))
    except Exception:  # noqa: BLE001 - any failure of the stream falls back to the ordinary read, which says why
        return None


def _load(dataset_id: str, split: str, named_split: str) -> list[dict[str, Any]]:
    """``split`` read whole by ``datasets.load_dataset``; offline or unknown ids become a DataError."""
    import datasets

    try:
        dataset = datasets.load_dataset(dataset_id, split=split)
    except Exception as exc:  # datasets raises many types (hub, network, config); all mean "cannot load"
        reason = (str(exc).strip() or type(exc).__name__).splitlines()[0]
        raise DataError(
            f"{dataset_id} is not a local file, and loading it as a hub dataset (split {named_split}) failed: {reason}"
        ) from None
    return dataset.to_list()
