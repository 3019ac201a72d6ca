"""The thumbnails of the preview of rows with images (engine.data.preview): small PNGs, aspect kept, never larger
than the image, of any image mode Pillow reads, made again when the file changes."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
from PIL import Image

from engine.data.preview import THUMBNAIL_SIDE, has_images, thumbnail


def png_size(data: bytes) -> tuple[int, int]:
    with Image.open(io.BytesIO(data)) as image:
        assert image.format == "PNG"
        return image.size


@pytest.mark.parametrize(
    ("mode", "size", "expected"),
    [
        ("RGB", (640, 480), (96, 72)),
        ("RGBA", (100, 400), (24, 96)),
        ("P", (300, 300), (96, 96)),
        ("L", (50, 30), (50, 30)),  # a small image keeps its size
        ("CMYK", (192, 96), (96, 48)),
    ],
)
def test_a_thumbnail_keeps_the_aspect_and_never_grows(
    tmp_path: Path, mode: str, size: tuple[int, int], expected: tuple[int, int]
) -> None:
    path = tmp_path / f"image-{mode}.{'jpg' if mode == 'CMYK' else 'png'}"
    Image.new(mode, size).save(path)
    thumb = thumbnail(path)
    assert (thumb.width, thumb.height) == expected == png_size(thumb.png)
    assert thumb.name == path.name and max(expected) <= THUMBNAIL_SIDE


def test_a_changed_file_gets_a_new_thumbnail(tmp_path: Path) -> None:
    path = tmp_path / "changing.png"
    Image.new("RGB", (200, 100)).save(path)
    assert png_size(thumbnail(path).png) == (96, 48)
    Image.new("RGB", (100, 200)).save(path)
    os.utime(path, ns=(1, 1))  # another modification time, whatever the clock's resolution
    assert png_size(thumbnail(path).png) == (48, 96)


def test_which_formats_hold_images() -> None:
    assert has_images("vision") and has_images("vision+vision")
    assert not has_images("conversational") and not has_images("alpaca+conversational")
