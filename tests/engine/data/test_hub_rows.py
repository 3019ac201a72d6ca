"""A hub dataset's rows (engine.data.hub): whole, or only the first N, streamed so that the files past them are not
read. A local folder laid out as a hub dataset repository (``data/train-0000N-of-00002.parquet``, written by the
datasets library) is loaded by the same library code as a downloaded hub dataset."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import datasets
import pytest

from engine.config import RunConfig
from engine.data import DataError
from engine.data.embedded_images import IMAGE_CACHE_ENV
from engine.data.hub import read_hub_rows
from engine.data.mixture import load_training_rows
from engine.store.paths import PROJECT_ROOT
from tests.helpers.images_inside import images_inside

DEMO_VLM = PROJECT_ROOT / "assets" / "datasets" / "demo_vlm_train.jsonl"


@pytest.fixture(autouse=True)
def image_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the loader writes the images it is given: a folder of these tests."""
    monkeypatch.setenv(IMAGE_CACHE_ENV, str(tmp_path / "image-cache"))


def vlm_rows() -> list[dict[str, Any]]:
    """The bundled vision set's first ten rows with their images' bytes inside, as a hub dataset holds them."""
    rows = [json.loads(line) for line in DEMO_VLM.read_text().splitlines() if line.strip()][:10]
    return images_inside(rows, DEMO_VLM.parent)


def hub_folder(tmp_path: Path, rows: list[dict[str, Any]]) -> Path:
    """``rows`` as a hub dataset repository of two Parquet shards, the second holding the later half."""
    folder = tmp_path / "org-dataset"
    (folder / "data").mkdir(parents=True)
    half = len(rows) // 2
    for number, part in enumerate((rows[:half], rows[half:])):
        shard = datasets.Dataset.from_list(part).cast_column("images", datasets.Sequence(datasets.Image()))
        shard.to_parquet(str(folder / "data" / f"train-{number:05d}-of-00002.parquet"))
    return folder


def test_the_first_rows_are_the_whole_read_s_first_rows_with_their_image_bytes(tmp_path: Path):
    rows = vlm_rows()
    folder = hub_folder(tmp_path, rows)
    whole = read_hub_rows(str(folder), "train")
    assert whole == rows
    first = read_hub_rows(str(folder), "train", first=3)
    assert first == rows[:3]
    assert isinstance(first[0]["images"][0]["bytes"], bytes)


def test_the_first_rows_are_read_without_the_shards_past_them(tmp_path: Path):
    """The second shard is cut in half: reading the dataset whole fails on it, reading the first rows of the first
    shard does not open it."""
    rows = vlm_rows()
    folder = hub_folder(tmp_path, rows)
    second = folder / "data" / "train-00001-of-00002.parquet"
    second.write_bytes(second.read_bytes()[: second.stat().st_size // 2])
    assert read_hub_rows(str(folder), "train", first=2) == rows[:2]
    with pytest.raises(DataError, match=r"loading it as a hub dataset \(split train\) failed"):
        read_hub_rows(str(folder), "train")


def test_a_split_that_slices_already_is_read_as_given(tmp_path: Path):
    rows = vlm_rows()
    folder = hub_folder(tmp_path, rows)
    assert read_hub_rows(str(folder), f"train[{len(rows) - 2}:]", first=1) == rows[-2:]


def test_a_split_the_dataset_lacks_is_named(tmp_path: Path):
    folder = hub_folder(tmp_path, vlm_rows())
    with pytest.raises(DataError, match=r"\(split validation\) failed"):
        read_hub_rows(str(folder), "validation", first=2)


@pytest.mark.parametrize(
    ("data", "reads"),
    [  # reads: the rows each read of the hub dataset gives; None: all of them
        ({"path": "org/dataset", "max_samples": 2}, [None]),  # rows are held out of the whole dataset
        ({"path": "org/dataset", "max_samples": 2, "eval_size": 0}, [2]),
        ({"path": "org/dataset", "max_samples": 2, "eval_path": str(DEMO_VLM)}, [2]),
        ({"path": [{"path": "org/dataset", "max_samples": 3}, {"path": "org/dataset"}]}, [3, None]),
    ],
)
def test_the_loader_reads_only_the_rows_that_can_train(
    data: dict[str, Any], reads: list[int | None], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """Through the ordinary loader: the hub id ``org/dataset`` is answered by the local repository folder (this
    machine has no hub), and the rows the loader reads are counted."""
    import engine.data.loading as loading

    rows = vlm_rows()
    folder = hub_folder(tmp_path, rows)
    counts: list[int] = []

    def from_folder(dataset_id: str, split: str, first: int | None = None) -> list[dict[str, Any]]:
        assert dataset_id == "org/dataset"
        rows = read_hub_rows(str(folder), split, first)
        counts.append(len(rows))
        return rows

    monkeypatch.setattr(loading, "read_hub_rows", from_folder)
    config = RunConfig.model_validate({"data": {"eval_size": 0.2, **data}})
    loaded = load_training_rows(config.data, seed=0)
    assert counts == [len(rows) if read is None else read for read in reads]
    assert len(loaded.rows) == sum(counts)
