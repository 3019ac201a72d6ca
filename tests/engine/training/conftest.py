"""Fixtures of the vision-language family tests: the tiny families' folders and the colour images with their rows."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.helpers.tiny_vlms import build_tiny_vlm
from tests.helpers.vision_families import COLOURS, DEMO_VLM, LONG_ANSWER, colour_row


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """The folder of family ``name`` (built on first use in the module), or the demo VLM for ``llava``."""
    root = tmp_path_factory.mktemp("tiny-vlms")
    return lambda name: DEMO_VLM if name == "llava" else build_tiny_vlm(name, root / name)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Four 32 x 32 single-colour images and their rows (train.jsonl); with_long.jsonl puts before them a row of two
    exchanges whose image comes in the second question."""
    from PIL import Image

    folder = tmp_path_factory.mktemp("colours")
    rows = []
    for colour, rgb in COLOURS.items():
        Image.new("RGB", (32, 32), rgb).save(folder / f"{colour}.png")
        rows.append(colour_row([], colour))
    (folder / "train.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    late_image = colour_row([("Name the colours you know.", LONG_ANSWER)], "red")
    (folder / "with_long.jsonl").write_text("".join(json.dumps(row) + "\n" for row in [late_image, *rows]))
    return folder
