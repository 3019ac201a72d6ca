"""The dataset panel's preview of rows with images: LLaMA-Factory's mllm_demo.json shows each row's turns beside
thumbnails of exactly its images, in order; placeholders read as numbered markers; no server path reaches the page;
and the check loads no torch."""

from __future__ import annotations

import base64
import io
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from PIL import Image, ImageChops, ImageStat

from engine.config import RunConfig
from engine.store.paths import PROJECT_ROOT
from studio.form.values import default_values
from studio.i18n.catalog import text
from studio.train import dataset as dp
from studio.train.image_rows import IMAGE_MARKER
from tests.helpers.images_inside import images_inside, write_image_parquet

MLLM_DEMO = Path("/work/shared/datasets/mllm_demo.json")  # LLaMA-Factory's demo set: 6 rows, 3 JPEGs
needs_demo = pytest.mark.skipif(not MLLM_DEMO.is_file(), reason=f"{MLLM_DEMO} is not on this machine")
CARD = re.compile(r'<div class="ts-example ts-image-row" data-row="(\d+)"(.*?)(?=<div class="ts-example |\Z)', re.S)
IMG = re.compile(r'<img class="ts-thumb" data-image="(\d+)" src="data:image/png;base64,([A-Za-z0-9+/=]+)"')


def vision_values(path: Path, **changes: Any) -> dict[str, Any]:
    values = default_values()
    values.update({"model.name_or_path": "assets/demo-vlm", "data.path": str(path), "data.eval_path": ""})
    values.update({key.replace("__", "."): value for key, value in changes.items()})
    return values


def cards(examples: str) -> dict[int, str]:
    return {int(number): body for number, body in CARD.findall(examples)}


def decoded(png: str) -> Image.Image:
    return Image.open(io.BytesIO(base64.b64decode(png))).convert("RGB")


def closest(thumb: Image.Image, sources: dict[str, Image.Image]) -> str:
    """The source image a thumbnail was made from: the one it differs least from, scaled to its size."""

    def difference(source: Image.Image) -> float:
        scaled = source.resize(thumb.size, Image.Resampling.BICUBIC)
        return sum(ImageStat.Stat(ImageChops.difference(scaled, thumb)).mean)

    return min(sources, key=lambda name: difference(sources[name]))


@pytest.fixture
def allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STUDIO_ALLOWED_PATHS", str(MLLM_DEMO.parent))  # as `launch.py --allow-path` does


@needs_demo
def test_each_row_shows_exactly_its_images_in_order(allowed: None) -> None:
    check = dp.check_dataset(vision_values(MLLM_DEMO), with_tokens=True, num_examples=3)
    assert check.error == "" and check.format == "vision"
    rows = json.loads(MLLM_DEMO.read_text(encoding="utf-8"))
    assert "**Images** 8" in check.summary  # every image of the six training rows, counted
    shown = cards(check.examples)
    assert sorted(shown) == [1, 2, 3]
    sources = {
        name: Image.open(MLLM_DEMO.parent / name).convert("RGB")
        for name in sorted({image for row in rows for image in row["images"]})
    }
    for number, body in shown.items():
        row = rows[number - 1]
        thumbs = IMG.findall(body)
        assert [int(index) for index, _ in thumbs] == list(range(1, len(row["images"]) + 1))
        images = [decoded(png) for _, png in thumbs]
        assert [closest(image, sources) for image in images] == row["images"]
        for image, name in zip(images, row["images"], strict=True):
            width, height = sources[name].size
            assert max(image.size) == 96  # the JPEGs are larger: scaled down to 96 px, the aspect kept
            assert abs(image.width / image.height - width / height) < 0.03
        # Each <image> placeholder is a numbered marker, in order; no placeholder is left as text.
        markers = re.findall(r'class="ts-image-marker" data-image="(\d+)"', body)
        assert markers == [str(index) for index in range(1, len(row["images"]) + 1)]
        assert "&lt;image&gt;" not in body and "<image>" not in body
        for turn in row["messages"]:
            for piece in turn["content"].split("<image>"):
                assert piece.replace("'", "&#x27;") in body
    assert text(IMAGE_MARKER, number=1) in check.examples
    assert str(MLLM_DEMO.parent) not in check.examples  # file names only: no server path reaches the page


@needs_demo
def test_the_quick_check_counts_rows_and_the_markers_speak_the_page_language(allowed: None) -> None:
    quick = dp.check_dataset(vision_values(MLLM_DEMO), with_tokens=False)
    assert quick.error == "" and quick.examples == "" and "6 train" in quick.summary
    japanese = dp.check_dataset(vision_values(MLLM_DEMO), with_tokens=True, num_examples=1, lang="ja")
    assert text(IMAGE_MARKER, "ja", number=1) in japanese.examples
    assert text(IMAGE_MARKER, "ja", number=1) != text(IMAGE_MARKER, number=1)


@needs_demo
def test_a_text_model_refuses_the_images_before_any_preview(allowed: None) -> None:
    check = dp.check_dataset(vision_values(MLLM_DEMO, model__name_or_path="assets/demo-model"), with_tokens=True)
    assert check.examples == "" and "reads text only" in check.error


def test_the_bundled_vision_set_previews_its_pngs() -> None:
    data = PROJECT_ROOT / "assets" / "datasets" / "demo_vlm_train.jsonl"
    if not data.is_file():
        pytest.skip("the bundled vision set is not on this machine")
    check = dp.check_dataset(vision_values(data), with_tokens=True, num_examples=2)
    assert check.error == "" and len(cards(check.examples)) == 2
    first = json.loads(data.read_text(encoding="utf-8").splitlines()[0])
    [(_, png)] = IMG.findall(cards(check.examples)[1])
    width, height = Image.open(data.parent / first["images"][0]).size
    scale = min(1.0, 96 / max(width, height))  # a thumbnail is never larger than its image
    assert decoded(png).size == (round(width * scale), round(height * scale))


def test_a_row_of_many_images_shows_its_first_ones(tmp_path: Path) -> None:
    """A row of twelve images: thumbnails of the first eight, and how many more there are."""
    names = []
    for index in range(12):
        name = f"{index}.png"
        Image.new("RGB", (200, 50), (index * 20, 0, 0)).save(tmp_path / name)
        names.append(name)
    row = {
        "messages": [
            {"role": "user", "content": "<image>" * 12 + "How many?"},
            {"role": "assistant", "content": "twelve"},
        ],
        "images": names,
    }
    data = tmp_path / "many.json"
    data.write_text(json.dumps([row, row]), encoding="utf-8")
    check = dp.check_dataset(vision_values(data), with_tokens=True, num_examples=1, workspace=tmp_path)
    assert check.error == ""
    body = cards(check.examples)[1]
    thumbs = [decoded(png) for _, png in IMG.findall(body)]
    assert len(thumbs) == 8 and all(image.size == (96, 24) for image in thumbs)  # 200 x 50, aspect kept
    assert "+4 more" in body and body.count('class="ts-image-marker"') == 12


def test_the_check_of_images_loads_no_torch() -> None:
    data = PROJECT_ROOT / "assets" / "datasets" / "demo_vlm_train.jsonl"
    if not data.is_file():
        pytest.skip("the bundled vision set is not on this machine")
    code = (
        "import sys\n"
        "from studio.form.values import default_values\n"
        "from studio.train.dataset import check_dataset\n"
        "values = default_values()\n"
        f"values.update({{'model.name_or_path': 'assets/demo-vlm', 'data.path': {str(data)!r}}})\n"
        "check = check_dataset(values, with_tokens=True)\n"
        "assert check.error == '' and 'ts-thumb' in check.examples, check.error\n"
        "heavy = {'torch', 'transformers', 'trl', 'datasets'} & set(sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=PROJECT_ROOT, check=True, timeout=120)


@needs_demo
def test_a_dataset_holding_its_images_previews_as_its_files_do(
    allowed: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """mllm_demo.json as a hub dataset stores it (Parquet, each image's bytes inside): the same thumbnails, in the
    same order, and neither the image cache's folder nor the data's reaches the page."""
    cache = tmp_path / "image-cache"
    monkeypatch.setenv("STUDIO_IMAGE_CACHE", str(cache))
    rows = json.loads(MLLM_DEMO.read_text(encoding="utf-8"))
    parquet = write_image_parquet(images_inside(rows, MLLM_DEMO.parent), tmp_path / "mllm_demo.parquet")
    by_path = dp.check_dataset(vision_values(MLLM_DEMO), with_tokens=True, num_examples=3)
    held_check = dp.check_dataset(vision_values(parquet), with_tokens=True, num_examples=3, workspace=tmp_path)
    assert held_check.error == "" and held_check.format == "vision" and "**Images** 8" in held_check.summary
    assert held_check.examples == by_path.examples  # the same turns, thumbnails and file names
    assert str(cache) not in held_check.examples and str(tmp_path) not in held_check.examples
    assert any(cache.rglob("*.jpg"))


def test_estimate_counts_the_tokens_of_rows_with_images() -> None:
    """The panel shows rows with images without the processor; Estimate counts their tokens through it, as the
    engine's check does, and says what max_length drops, in the page's language."""
    from engine.config import load_config
    from engine.training.check import check_run
    from studio.i18n.problems import translate_warning
    from studio.train.estimate import estimate_run

    config = load_config(PROJECT_ROOT / "assets" / "presets" / "demo-vlm.yaml")
    config = config.model_copy(update={"data": config.data.model_copy(update={"max_samples": 40})})
    expected = check_run(config).data
    shown = estimate_run(config).markdown
    assert f"**Tokens** {expected.num_tokens:,}, of which {expected.num_loss_tokens:,} carry loss" in shown
    assert "⚠" not in shown  # every row fits the preset's max_length

    short = config.model_copy(update={"train": config.train.model_copy(update={"max_length": 38})})
    cut = check_run(short).data
    assert cut.warnings and cut.num_tokens < expected.num_tokens
    japanese = estimate_run(short, "ja").markdown
    for warning in cut.warnings:
        assert translate_warning(warning, "ja") != warning and f"⚠ {translate_warning(warning, 'ja')}" in japanese
    assert estimate_run(RunConfig()).markdown.count("**Tokens**") == 0  # text data: the panel shows its tokens


def test_a_demo_refuses_a_dataset_holding_its_images(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """In demo mode a visitor's Parquet file holding its images is stored (it is a dataset like any) but its check
    refuses the images, naming the row, and writes none: a few kB could hold thousands of images to write
    (engine.data.embedded_images). A demo takes the bundled sets' images only, as before."""
    from studio.demo.caller import Caller
    from studio.path_guard import confine_images
    from studio.train import actions
    from tests.helpers.visitors import ALICE, DEMO

    workspace, uploads = tmp_path / "workspace", tmp_path / "gradio"
    monkeypatch.setenv("GRADIO_TEMP_DIR", str(uploads))
    for name in ("STUDIO_IMAGE_ROOTS", "STUDIO_IMAGE_CACHE", "STUDIO_EMBEDDED_IMAGES"):
        monkeypatch.delenv(name, raising=False)
    confine_images(workspace, demo=True)
    data = PROJECT_ROOT / "assets" / "datasets" / "demo_vlm_train.jsonl"
    rows = [json.loads(line) for line in data.read_text(encoding="utf-8").splitlines()[:8]]
    (uploads / "f00d").mkdir(parents=True)
    upload = write_image_parquet(images_inside(rows, data.parent), uploads / "f00d" / "shapes.parquet")
    alice = Caller(workspace, DEMO, ALICE)
    name, error = actions.upload_dataset(alice, upload)
    assert error == "" and name == "shapes.parquet"
    check = actions.check_data(alice, vision_values(Path(name), data__eval_size=0.0))
    assert "row 1: images[0] holds its image inside the data, which this studio does not take" in check.error
    assert check.examples == "" and not (workspace / "cache").exists()  # nothing written
    assert actions.check_data(alice, vision_values(data, data__eval_size=0.0)).error == ""  # the bundled set's paths
