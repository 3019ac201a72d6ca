"""Datasets that hold their images, as the hub stores them: rows whose image paths are replaced by the images' bytes
(the datasets library's Image feature: ``{"bytes": ..., "path": name}``), written to Parquet by that library."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def images_inside(rows: list[dict[str, Any]], folder: Path, keep_names: bool = True) -> list[dict[str, Any]]:
    """``rows`` (images by path relative to ``folder``) with each image's bytes in place of its path; its file name
    kept as the feature's path unless ``keep_names`` is False."""
    return [
        {
            **row,
            "images": [
                {"bytes": (folder / name).read_bytes(), "path": Path(name).name if keep_names else None}
                for name in row["images"]
            ],
        }
        for row in rows
    ]


def write_image_parquet(rows: list[dict[str, Any]], path: Path) -> Path:
    """Rows holding their images written as a hub dataset's Parquet file: through the datasets library, the images
    column as a list of its Image feature."""
    import datasets

    dataset = datasets.Dataset.from_list(rows).cast_column("images", datasets.Sequence(datasets.Image()))
    dataset.to_parquet(str(path))
    return path
