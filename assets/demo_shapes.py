"""The vision-language demo's pictures and task, from PIL and the standard library: coloured shapes and their rows.

``build_demo_vlm.py`` writes the datasets from these (``write_datasets``) and pre-trains the demo VLM on pictures
drawn the same way (``demo_vlm_pretraining.py``). Whatever is random draws from the ``random.Random`` it is
given, so the same seed gives the same pictures, rows and files.
"""

from __future__ import annotations

import hashlib
import io
import json
import random
import shutil
from pathlib import Path

from PIL import Image, ImageDraw

ASSETS = Path(__file__).resolve().parent
DATA_DIR = ASSETS / "datasets"
IMAGE_DIR_NAME = "demo_vlm_images"
IMAGE_DIR = DATA_DIR / IMAGE_DIR_NAME

SEED = 1234

IMAGE_SIZE = 64  # pixels a side
IMAGE_TOKEN = "<image>"  # where a row's image goes in its text

# Dataset sizes, in images. Each single-shape image gives two rows (its colour, its shape), each counting
# image one row.
TRAIN_SHAPE_IMAGES = 120
TRAIN_COUNT_IMAGES = 120
EVAL_SHAPE_IMAGES = 30
EVAL_COUNT_IMAGES = 30

COLOURS = {
    "red": (215, 38, 38),
    "green": (34, 150, 60),
    "blue": (40, 80, 215),
    "yellow": (235, 195, 20),
    "purple": (135, 55, 175),
    "orange": (245, 125, 25),
}
SHAPES = ["circle", "square", "triangle"]
MAX_SQUARES = 4
MAX_OTHER_SHAPES = 3
BACKGROUND = (255, 255, 255)
SUPERSAMPLE = 4  # shapes are drawn at 4x and scaled down, so their edges are smooth

# What the fine-tune reaches (measured with benchmarks/demo_vlm_bare.py), for the model card and the README.
DEMO_RESULT = """LoRA on the language model (r 16, alpha 32, its attention and MLP projections), with the projector
trained in full and the vision tower frozen, lr 3e-3 (cosine), 300 steps of 16 rows, takes under a minute on
2 CPU cores and scores 94-96% (`python benchmarks/demo_vlm_bare.py --seeds 0 1 2`)."""

COLOUR_QUESTIONS = ["What colour is the shape?", "Which colour is this shape?", "Name the colour of the shape."]
SHAPE_QUESTIONS = ["What shape is this?", "Which shape do you see?", "Name the shape."]
COUNT_QUESTIONS = ["How many squares are there?", "Count the squares.", "How many squares do you see?"]


# ----------------------------------------------------------------------------------------------
# Images and rows
# ----------------------------------------------------------------------------------------------


Shape = tuple[str, str, tuple[float, float, float, float]]  # (kind, colour, (left, top, right, bottom))


def draw_shape(draw: ImageDraw.ImageDraw, kind: str, box: tuple[float, ...], fill: tuple | int, scale: int) -> None:
    """One filled shape inside ``box`` (left, top, right, bottom, in image pixels), drawn ``scale`` times larger."""
    left, top, right, bottom = (round(v * scale) for v in box)
    if kind == "circle":
        draw.ellipse((left, top, right, bottom), fill=fill)
    elif kind == "square":
        draw.rectangle((left, top, right, bottom), fill=fill)
    elif kind == "triangle":
        draw.polygon([((left + right) / 2, top), (right, bottom), (left, bottom)], fill=fill)
    else:
        raise ValueError(f"unknown shape {kind!r}")


def render(shapes: list[Shape]) -> Image.Image:
    """A white IMAGE_SIZE x IMAGE_SIZE RGB picture of the shapes."""
    canvas = Image.new("RGB", (IMAGE_SIZE * SUPERSAMPLE,) * 2, BACKGROUND)
    draw = ImageDraw.Draw(canvas)
    for kind, colour, box in shapes:
        draw_shape(draw, kind, box, COLOURS[colour], SUPERSAMPLE)
    return canvas.resize((IMAGE_SIZE, IMAGE_SIZE), Image.Resampling.LANCZOS)


def single_shape(rng: random.Random, kind: str, colour: str) -> list[Shape]:
    """One shape, 24 to 44 pixels wide, anywhere in the picture."""
    size = rng.uniform(24, 44)
    left = rng.uniform(4, IMAGE_SIZE - 4 - size)
    top = rng.uniform(4, IMAGE_SIZE - 4 - size)
    return [(kind, colour, (left, top, left + size, top + size))]


def scattered_shapes(rng: random.Random, squares: int, others: int) -> list[Shape]:
    """``squares`` squares and ``others`` circles and triangles, each in its own cell of a 4x4 grid (so no two
    touch), 9 to 13 pixels wide, in random colours."""
    cells = rng.sample(range(16), squares + others)
    kinds = ["square"] * squares + [rng.choice(["circle", "triangle"]) for _ in range(others)]
    cell = IMAGE_SIZE / 4
    shapes = []
    for kind, index in zip(kinds, cells, strict=True):
        size = rng.uniform(9, 13)
        left = (index % 4) * cell + rng.uniform(1, cell - 1 - size)
        top = (index // 4) * cell + rng.uniform(1, cell - 1 - size)
        shapes.append((kind, rng.choice(list(COLOURS)), (left, top, left + size, top + size)))
    return shapes


def row(image_name: str, question: str, answer: str) -> dict:
    """One conversational row in LLaMA-Factory's shape: the ``<image>`` placeholder opens the question."""
    return {
        "messages": [
            {"role": "user", "content": IMAGE_TOKEN + question},
            {"role": "assistant", "content": answer},
        ],
        "images": [f"{IMAGE_DIR_NAME}/{image_name}"],
    }


def png_bytes(image: Image.Image) -> bytes:
    """The image as an optimised PNG."""
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", optimize=True)
    return buffer.getvalue()


def make_split(
    rng: random.Random, split: str, shape_images: int, count_images: int, seen: set[str]
) -> tuple[list[dict], dict[str, bytes]]:
    """The rows and PNG files of one split. Shapes, colours and counts are balanced; an image identical to one
    already drawn (``seen``, hashes of PNG bytes, shared across splits) is drawn again."""

    def unique(draw_image) -> bytes:
        while True:
            data = png_bytes(draw_image())
            digest = hashlib.sha256(data).hexdigest()
            if digest not in seen:
                seen.add(digest)
                return data

    combos = [(shape, colour) for colour in COLOURS for shape in SHAPES]
    shape_specs = [combos[i % len(combos)] for i in range(shape_images)]
    counts = [1 + i % MAX_SQUARES for i in range(count_images)]
    rng.shuffle(shape_specs)
    rng.shuffle(counts)
    jobs = [("shape", spec) for spec in shape_specs] + [("count", n) for n in counts]
    rng.shuffle(jobs)

    rows, files = [], {}
    for number, (kind, spec) in enumerate(jobs, start=1):
        name = f"{split}_{number:04d}.png"
        if kind == "shape":
            shape, colour = spec
            files[name] = unique(lambda shape=shape, colour=colour: render(single_shape(rng, shape, colour)))
            rows.append(row(name, rng.choice(COLOUR_QUESTIONS), colour))
            rows.append(row(name, rng.choice(SHAPE_QUESTIONS), shape))
        else:
            others = rng.randint(0, MAX_OTHER_SHAPES)
            files[name] = unique(lambda spec=spec, others=others: render(scattered_shapes(rng, spec, others)))
            rows.append(row(name, rng.choice(COUNT_QUESTIONS), str(spec)))
    return rows, files


# ----------------------------------------------------------------------------------------------
# Writing
# ----------------------------------------------------------------------------------------------


def write_jsonl(path: Path, rows: list[dict]) -> None:
    """One JSON object per line, UTF-8."""
    with path.open("w", encoding="utf-8") as handle:
        for item in rows:
            handle.write(json.dumps(item, ensure_ascii=False) + "\n")


README_HEADING = "## Vision-language demo"

DATASETS_README_SECTION = f"""{README_HEADING}

Generated by `assets/build_demo_vlm.py` (seed {SEED}) for the demo vision-language model
(`assets/demo-vlm/`). Each row asks one question about one {IMAGE_SIZE}x{IMAGE_SIZE} PNG picture of coloured
shapes on white; every answer is a single exact word or number, so exact match is a meaningful score:

- one shape (a {", ".join(SHAPES[:-1])} or {SHAPES[-1]}, {len(COLOURS)} colours: {", ".join(COLOURS)}), asked
  its colour ("{COLOUR_QUESTIONS[0]}" `red`) or its shape ("{SHAPE_QUESTIONS[0]}" `triangle`);
- 1 to {MAX_SQUARES} squares among up to {MAX_OTHER_SHAPES} circles and triangles, asked how many squares
  there are ("{COUNT_QUESTIONS[0]}" `3`).

Each question comes in 3 phrasings. Shapes, colours and counts are balanced.

- `demo_vlm_train.jsonl` ({2 * TRAIN_SHAPE_IMAGES + TRAIN_COUNT_IMAGES} rows, {TRAIN_SHAPE_IMAGES + TRAIN_COUNT_IMAGES}
  images) and `demo_vlm_eval.jsonl` ({2 * EVAL_SHAPE_IMAGES + EVAL_COUNT_IMAGES} rows,
  {EVAL_SHAPE_IMAGES + EVAL_COUNT_IMAGES} images, held out: no image is in both, nor are two images alike),
  in LLaMA-Factory's multimodal shape: `{{"messages": [{{"role": "user", "content": "<image>What colour is the
  shape?"}}, {{"role": "assistant", "content": "red"}}], "images": ["{IMAGE_DIR_NAME}/train_0001.png"]}}`. The
  `<image>` placeholder marks where the image goes; image paths are relative to the JSONL file.
- `{IMAGE_DIR_NAME}/`: the images, `train_NNNN.png` and `eval_NNNN.png`. A picture with one shape is used by two
  rows (its colour and its shape).

The demo VLM (`assets/demo-vlm/`) was pre-trained to describe such pictures (others, drawn apart from these),
but never on a question or the chat format, so it scores 0% on the eval file before fine-tuning.
{DEMO_RESULT}
"""


def write_readme_section() -> None:
    """Put the vision-language section at the end of the datasets README, replacing an earlier one."""
    path = DATA_DIR / "README.md"
    text = path.read_text(encoding="utf-8") if path.exists() else "# Demo datasets\n"
    if README_HEADING in text:
        text = text[: text.index(README_HEADING)]
    path.write_text(text.rstrip("\n") + "\n\n" + DATASETS_README_SECTION, encoding="utf-8")


def write_datasets(rng: random.Random) -> tuple[int, int]:
    """Draw both splits (eval first, so its images do not depend on the training set's size) and write them;
    returns the number of images and their total size in bytes."""
    seen: set[str] = set()
    eval_rows, eval_files = make_split(rng, "eval", EVAL_SHAPE_IMAGES, EVAL_COUNT_IMAGES, seen)
    train_rows, train_files = make_split(rng, "train", TRAIN_SHAPE_IMAGES, TRAIN_COUNT_IMAGES, seen)
    if IMAGE_DIR.exists():
        shutil.rmtree(IMAGE_DIR)
    IMAGE_DIR.mkdir(parents=True)
    files = {**eval_files, **train_files}
    for name, data in files.items():
        (IMAGE_DIR / name).write_bytes(data)
    write_jsonl(DATA_DIR / "demo_vlm_train.jsonl", train_rows)
    write_jsonl(DATA_DIR / "demo_vlm_eval.jsonl", eval_rows)
    write_readme_section()
    return len(files), sum(len(data) for data in files.values())
