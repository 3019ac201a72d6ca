"""Images held inside the data (the datasets library's Image feature, as hub datasets and their Parquet files store
them): each is written once to the image cache, named as the data named it, read like an image by path, and checked
like one; a bad one is named by its row."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import datasets
import pytest
from PIL import Image

from engine.config import RunConfig
from engine.data import DataError, load_rows
from engine.data.embedded_images import IMAGE_CACHE_ENV
from engine.data.images import MAX_DECODE_PIXELS
from engine.store.paths import PROJECT_ROOT
from tests.helpers.images_inside import images_inside, write_image_parquet

DEMO_TRAIN = PROJECT_ROOT / "assets" / "datasets" / "demo_vlm_train.jsonl"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The image cache of these tests: a folder of their own."""
    folder = tmp_path / "image-cache"
    monkeypatch.setenv(IMAGE_CACHE_ENV, str(folder))
    return folder


def demo_rows(count: int) -> list[dict[str, Any]]:
    """The first rows of the bundled VLM demo set, as JSON lines hold them (images by relative path)."""
    lines = DEMO_TRAIN.read_text(encoding="utf-8").splitlines()[:count]
    return [json.loads(line) for line in lines]


def loaded(path: Path) -> Any:
    return load_rows(RunConfig(data={"path": str(path)}).data)


def test_a_parquet_of_embedded_images_reads_as_its_json_with_paths_does(tmp_path: Path, cache: Path):
    rows = demo_rows(12)
    parquet = write_image_parquet(images_inside(rows, DEMO_TRAIN.parent), tmp_path / "train.parquet")
    assert b"PNG" in parquet.read_bytes()  # the images travel inside the file
    from_paths, from_bytes = loaded(DEMO_TRAIN), loaded(parquet)
    assert from_bytes.format == from_paths.format == "vision"
    for by_path, by_bytes in zip(from_paths.rows[:12], from_bytes.rows, strict=False):
        assert by_bytes["messages"] == by_path["messages"]
        for original, written in zip(by_path["images"], by_bytes["images"], strict=True):
            written = Path(written)
            assert written.read_bytes() == Path(original).read_bytes()
            assert written.name == Path(original).name  # the name the data gave it, for previews and messages
            assert written.is_relative_to(cache.resolve())


def test_loading_the_same_data_again_writes_nothing(tmp_path: Path, cache: Path):
    parquet = write_image_parquet(images_inside(demo_rows(6), DEMO_TRAIN.parent), tmp_path / "train.parquet")
    first = [path for row in loaded(parquet).rows for path in row["images"]]
    stamps = {path: Path(path).stat().st_mtime_ns for path in first}
    again = [path for row in loaded(parquet).rows for path in row["images"]]
    assert again == first and {path: Path(path).stat().st_mtime_ns for path in again} == stamps
    files = [path for path in cache.rglob("*") if path.is_file()]
    assert sorted(map(str, files)) == sorted(set(first))  # one file per distinct image, no leftovers


def test_an_image_without_a_name_and_a_column_of_raw_bytes(tmp_path: Path, cache: Path):
    rows = images_inside(demo_rows(2), DEMO_TRAIN.parent, keep_names=False)
    unnamed = loaded(write_image_parquet(rows, tmp_path / "unnamed.parquet")).rows
    assert [Path(row["images"][0]).name for row in unnamed] == ["image.png", "image.png"]
    raw = [{"messages": row["messages"], "image": row["images"][0]["bytes"]} for row in rows]
    datasets.Dataset.from_list(raw).to_parquet(str(tmp_path / "raw.parquet"))
    assert loaded(tmp_path / "raw.parquet").rows == unnamed


def test_a_bad_embedded_image_is_named_by_its_row(tmp_path: Path, cache: Path):
    rows = images_inside(demo_rows(3), DEMO_TRAIN.parent)
    rows[1]["images"][0]["bytes"] = rows[1]["images"][0]["bytes"][:200]  # cut short
    rows[2]["images"][0] = {"bytes": b"not an image at all", "path": "notes.png"}
    with pytest.raises(DataError) as refused:
        loaded(write_image_parquet(rows, tmp_path / "bad.parquet"))
    message = str(refused.value)
    assert "row 2: images[0] train_0002.png is corrupt or truncated" in message
    assert "row 3: images[0] notes.png is not an image file Pillow can read" in message
    assert "row 1" not in message


def test_a_decompression_bomb_held_in_the_data_is_refused_by_its_header(tmp_path: Path, cache: Path):
    side = int(MAX_DECODE_PIXELS**0.5) + 1
    Image.new("1", (side, side)).save(tmp_path / "large.png")
    rows = [
        {
            "messages": [{"role": "user", "content": "<image>big?"}, {"role": "assistant", "content": "yes"}],
            "images": [{"bytes": (tmp_path / "large.png").read_bytes(), "path": "large.png"}],
        }
    ]
    with pytest.raises(DataError, match=rf"row 1: images\[0\] large.png is {side} x {side} pixels"):
        loaded(write_image_parquet(rows, tmp_path / "bomb.parquet"))


def test_embedded_images_load_where_image_paths_are_confined(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
):
    """A studio holds image paths to its own folders; an image the data holds is the data's own, and loads."""
    data_folder = tmp_path / "allowed"
    data_folder.mkdir()
    monkeypatch.setenv("STUDIO_IMAGE_ROOTS", str(data_folder))
    rows = demo_rows(2)
    parquet = write_image_parquet(images_inside(rows, DEMO_TRAIN.parent), data_folder / "train.parquet")
    assert len(loaded(parquet).rows) == 2
    outside = data_folder / "outside.jsonl"
    row = {**rows[0], "images": [str(DEMO_TRAIN.parent / rows[0]["images"][0])]}
    outside.write_text(json.dumps(row) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match="is outside the folders the studio may read images from"):
        loaded(outside)


def test_a_hub_dataset_gives_its_images_as_bytes():
    """What a hub dataset's rows hold once loaded (engine.data.loading reads them with ``to_list``): the Image
    feature's bytes and name, not decoded images, so they take the same path as a Parquet file's."""
    rows = images_inside(demo_rows(1), DEMO_TRAIN.parent)
    dataset = datasets.Dataset.from_list(rows).cast_column("images", datasets.Sequence(datasets.Image()))
    image = dataset.to_list()[0]["images"][0]
    assert image == rows[0]["images"][0]


def test_where_images_inside_the_data_are_refused_none_is_written(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
):
    """A public demo's setting (STUDIO_EMBEDDED_IMAGES=refuse): each row holding its image is named, the cache stays
    empty, and images by path load as before."""
    parquet = write_image_parquet(images_inside(demo_rows(3), DEMO_TRAIN.parent), tmp_path / "train.parquet")
    monkeypatch.setenv("STUDIO_EMBEDDED_IMAGES", "refuse")
    with pytest.raises(DataError) as refused:
        loaded(parquet)
    for number in (1, 2, 3):
        assert f"row {number}: images[0] holds its image inside the data, which this studio does not take" in str(
            refused.value
        )
    assert not cache.exists()
    assert len(loaded(DEMO_TRAIN).rows) > 3
