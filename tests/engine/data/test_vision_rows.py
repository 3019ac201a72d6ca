"""Vision-language rows: LLaMA-Factory's mllm_demo.json and TRL's content-parts shape read alike, image paths
relative to the data file, and every bad image refused before launch with its row named: a missing file, a
corrupt JPEG, a decompression bomb (refused without being decoded), a URL, placeholders that do not match the
images."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from engine.config import RunConfig
from engine.data import DataError, load_rows
from engine.data.images import MAX_DECODE_PIXELS, load_image, scaled_size
from engine.data.vision_rows import content_parts


def chat(question: str, answer: str = "red") -> list[dict]:
    return [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]


@pytest.fixture
def image_folder(tmp_path: Path) -> Path:
    """A data folder with one good PNG (40 x 30, red) in a subfolder."""
    (tmp_path / "pics").mkdir()
    Image.new("RGB", (40, 30), (255, 0, 0)).save(tmp_path / "pics" / "red.png")
    return tmp_path


def loaded(path: Path, **data):
    return load_rows(RunConfig(data={"path": str(path), **data}).data)


def test_mllm_demo_is_read_as_vision_rows_with_absolute_image_paths(shared_datasets: Path):
    rows = loaded(shared_datasets / "mllm_demo.json")
    raw = json.loads((shared_datasets / "mllm_demo.json").read_text())
    assert rows.format == "vision" and len(rows.rows) == len(raw)
    for row, source in zip(rows.rows, raw, strict=True):
        assert row["images"] == [str((shared_datasets / path).resolve()) for path in source["images"]]
        assert [message["content"] for message in row["messages"]] == [turn["content"] for turn in source["messages"]]
    first = content_parts(rows.rows[0]["messages"])
    assert first[0]["content"] == [{"type": "image"}, {"type": "text", "text": raw[0]["messages"][0]["content"][7:]}]
    assert first[2]["content"][-1] == {"type": "image"}  # "What are they doing?<image>": the image after the text


def test_trl_content_parts_read_as_the_same_canonical_row(image_folder: Path, write_jsonl):
    parts = [
        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What colour is it?"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "red"}]},
    ]
    trl_file = write_jsonl([{"messages": parts, "images": ["pics/red.png"]}], "trl.jsonl")
    factory_file = write_jsonl(
        [{"messages": chat("<image>What colour is it?"), "images": ["pics/red.png"]}], "lf.jsonl"
    )
    assert loaded(trl_file).rows == loaded(factory_file).rows


def test_a_single_image_column_and_no_placeholder_put_the_image_before_the_first_question(
    image_folder: Path, write_jsonl
):
    path = write_jsonl([{"messages": chat("What colour is it?"), "image": "pics/red.png"}])
    row = loaded(path).rows[0]
    assert row["messages"][0]["content"] == "<image>What colour is it?"
    assert row["images"] == [str(image_folder / "pics" / "red.png")]


def test_every_bad_image_is_named_by_its_row(image_folder: Path, write_jsonl):
    Image.new("RGB", (64, 64), (0, 0, 255)).save(image_folder / "whole.jpg")
    (image_folder / "cut.jpg").write_bytes((image_folder / "whole.jpg").read_bytes()[:300])
    (image_folder / "text.png").write_text("not an image")
    rows = [
        {"messages": chat("<image>fine"), "images": ["pics/red.png"]},
        {"messages": chat("<image>q"), "images": ["pics/missing.png"]},
        {"messages": chat("<image>q"), "images": ["cut.jpg"]},
        {"messages": chat("<image>q"), "images": ["text.png"]},
        {"messages": chat("<image>q"), "images": ["https://example.org/cat.png"]},
    ]
    with pytest.raises(DataError) as refused:
        loaded(write_jsonl(rows))
    lines = str(refused.value).splitlines()
    assert lines[0].endswith("4 of 5 rows have problems (their images):")
    assert (
        lines[1].strip()
        == f"row 2: images[0] 'pics/missing.png': no such file (looked for {image_folder}/pics/missing.png)"
    )
    assert lines[2].strip().startswith("row 3: images[0] cut.jpg is corrupt or truncated")
    assert lines[3].strip() == "row 4: images[0] text.png is not an image file Pillow can read"
    assert "row 5: images[0] 'https://example.org/cat.png' is a URL; images are read from local files only" in lines[4]


def test_placeholders_and_images_must_match_one_to_one(image_folder: Path, write_jsonl):
    rows = [
        {"messages": chat("<image><image>two?"), "images": ["pics/red.png"]},
        {"messages": chat("<image>one"), "images": ["pics/red.png", "pics/red.png"]},
    ]
    with pytest.raises(DataError) as refused:
        loaded(write_jsonl(rows))
    message = str(refused.value)
    assert "row 1: has 2 <image> placeholders but 1 image in images" in message
    assert "row 2: has 1 <image> placeholder but 2 images in images" in message


def test_a_decompression_bomb_is_refused_without_being_decoded(tmp_path: Path, write_jsonl):
    """A 20000 x 20000 PNG (400 megapixels, 1.2 GB as RGB) of a few kB, checked in a child whose memory is capped
    at 512 MB: decoding it there would fail with MemoryError, so a refusal that names the size proves it was not."""
    bomb = tmp_path / "bomb.png"
    Image.new("1", (20000, 20000)).save(bomb)  # 1 bit per pixel: 50 MB here, a few kB on disk
    assert bomb.stat().st_size < 200_000
    path = write_jsonl([{"messages": chat("<image>big?"), "images": ["bomb.png"]}])
    script = (
        "import resource, sys; resource.setrlimit(resource.RLIMIT_AS, (512 * 2**20, 512 * 2**20));"
        "from engine.config import RunConfig; from engine.data import load_rows;"
        f"load_rows(RunConfig(data={{'path': {str(path)!r}}}).data)"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 1 and "MemoryError" not in result.stderr, result.stderr[-2000:]
    assert "row 1: images[0] bomb.png is 400,000,000 pixels, more than the " in result.stderr
    assert "refused without decoding it" in result.stderr
    assert resource.getrlimit(resource.RLIMIT_AS)[0] == resource.RLIM_INFINITY  # the cap stayed in the child


def test_an_image_over_the_decode_cap_but_under_pillows_own_is_refused_by_size(tmp_path: Path, write_jsonl):
    side = int(MAX_DECODE_PIXELS**0.5) + 1
    Image.new("1", (side, side)).save(tmp_path / "large.png")
    with pytest.raises(DataError, match=rf"large.png is {side} x {side} pixels \({side * side:,}\), more than the"):
        loaded(write_jsonl([{"messages": chat("<image>big?"), "images": ["large.png"]}]))


def test_images_are_scaled_down_to_max_pixels_keeping_their_shape(image_folder: Path):
    assert scaled_size(40, 30, 10_000) == (40, 30)
    assert scaled_size(4000, 3000, 1_200_000) == (1264, 948)
    image = load_image(image_folder / "pics" / "red.png", max_pixels=300)
    assert image.mode == "RGB" and image.size == scaled_size(40, 30, 300) and image.width * image.height <= 300
    assert image.getpixel((0, 0)) == (255, 0, 0)


def test_a_text_format_override_on_vision_rows_is_refused(image_folder: Path, write_jsonl):
    path = write_jsonl([{"messages": chat("<image>What colour?"), "images": ["pics/red.png"]}])
    with pytest.raises(DataError, match="is a vision-language dataset .* but data.format is conversational"):
        loaded(path, format="conversational")
