"""Build the bundled vision-language demo: a tiny LLaVA and its synthetic image dataset of coloured shapes.

Run ``python assets/build_demo_vlm.py`` from anywhere (paths are relative to this file), after
``assets/build_demo.py``: the language model of the demo VLM is the text demo's pre-trained model. Everything
is synthetic and seeded, so a re-run on the same machine rebuilds the same files. Nothing is downloaded; the
script runs offline on a CPU in three to four minutes on 2 cores.

The model, ``assets/demo-vlm/``, is a real ``LlavaForConditionalGeneration`` with its ``LlavaProcessor``, put
together the way LLaVA is:

- the language model is the text demo's LLaMA (``assets/demo-model/``) and its tokenizer, with one special
  token added, ``<image>``;
- the vision tower is a tiny CLIP vision transformer: a 64x64 image in 16x16 patches gives 17 image tokens
  (CLS and 16 patches). It is pre-trained here first, on its own (``pretrain_vision_tower``), to say what each
  patch shows and how many shapes of each kind and colour the picture holds, as a real VLM starts from a
  pre-trained image encoder;
- the projector is LLaVA's two-layer MLP. The whole model is then pre-trained on captions
  (``pretrain_on_captions``, LLaVA's first stage): an image followed by a plain description ("A red circle.",
  "3 squares and 1 circle."). The language model learns there to read image tokens and to write the words of
  pictures; its tokenizer, trained on dates, spells "triangle" or "purple" in pieces it never saw together.

So, like the text demo model, the base model knows its subject but has never seen the chat format, a
question or a request: asked "What colour is the shape?" in the chat format it describes the picture
("green square.") and scores 0% by exact match. A short fine-tune teaches it to answer.

The task, ``assets/datasets/demo_vlm_{train,eval}.jsonl`` with the PNG images in
``assets/datasets/demo_vlm_images/``: small pictures of coloured shapes and three kinds of question whose
answers are a single exact word or number ("What colour is the shape?" ``red``, "What shape is this?"
``triangle``, "How many squares are there?" ``3``), so held-out exact match measures what was learnt. The eval
file's images are all different from the training file's, and the pre-training pictures are drawn apart from
both.

``python assets/build_demo_vlm.py --datasets-only`` rewrites the images and the datasets without rebuilding
the model. Either run also (re)writes the vision-language section of ``assets/datasets/README.md``; run it
after ``assets/build_demo.py``, which rewrites that file without the section.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import random
import shutil
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
from PIL import Image, ImageDraw
from transformers import (
    AutoTokenizer,
    CLIPImageProcessorPil,
    CLIPVisionConfig,
    LlamaForCausalLM,
    LlavaConfig,
    LlavaForConditionalGeneration,
    LlavaProcessor,
)

ASSETS = Path(__file__).resolve().parent
TEXT_MODEL_DIR = ASSETS / "demo-model"
MODEL_DIR = ASSETS / "demo-vlm"
DATA_DIR = ASSETS / "datasets"
IMAGE_DIR_NAME = "demo_vlm_images"
IMAGE_DIR = DATA_DIR / IMAGE_DIR_NAME

SEED = 1234

# Images and the vision tower: 64x64 pixels in 16x16 patches, so 4x4 = 16 image tokens per image.
IMAGE_SIZE = 64
PATCH_SIZE = 16
VISION_HIDDEN_SIZE = 64
VISION_INTERMEDIATE_SIZE = 128
VISION_LAYERS = 2
VISION_HEADS = 2
IMAGE_TOKEN = "<image>"
PATCHES_PER_SIDE = IMAGE_SIZE // PATCH_SIZE
PATCHES = PATCHES_PER_SIDE**2
IMAGE_TOKENS_PER_IMAGE = 1 + PATCHES  # CLIP's CLS token, then the patches: the "full" feature selection
MAX_COUNT = 8  # the vision tower's count heads tell 0 to MAX_COUNT shapes of a kind

# Pre-training of the vision tower (see pretrain_vision_tower): pictures drawn fresh, none of them in the datasets.
VISION_PRETRAIN_PICTURES = 6000
VISION_HELD_OUT_PICTURES = 500
VISION_PRETRAIN_STEPS = 1200
VISION_PRETRAIN_BATCH = 64
VISION_PRETRAIN_LR = 2e-3
# Caption pre-training of the whole model (see pretrain_on_captions), again on pictures drawn fresh.
CAPTION_PICTURES = 4000
CAPTION_STEPS = int(os.environ.get("DEMO_VLM_CAPTION_STEPS", 400))
CAPTION_BATCH = 32
CAPTION_LR = 1e-3
CAPTION_PROJECTOR_LR = 1e-2  # the projector starts from random: it learns faster at a higher rate

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

# The text demo's chat format, with content parts. Each turn is "<|role|>\n{content}</s>\n"; a message's
# content is a string or a list of parts, {"type": "text", "text": ...} written as its text and
# {"type": "image"} written as "<image>" where it stands (the processor expands it into the image's 16
# tokens). The assistant's content and its closing eos are inside the generation markers, so
# return_assistant_tokens_mask=True (TRL's assistant_only_loss) trains the answer and the stop. Tools, as in
# the text demo. With string contents the text is byte for byte the text demo's.
CHAT_TEMPLATE = (
    "{%- macro render(content) -%}"
    "{%- if content is string -%}{{ content }}"
    "{%- elif content is mapping -%}{{ content | tojson }}"
    "{%- elif content -%}"
    "{%- for part in content -%}"
    "{%- if part is string -%}{{ part }}"
    "{%- elif part['type'] == 'image' -%}{{ '" + IMAGE_TOKEN + "' }}"
    "{%- elif part['type'] == 'text' -%}{{ part['text'] }}"
    "{%- else -%}{{ part | tojson }}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- endif -%}"
    "{%- endmacro -%}"
    "{% if tools %}"
    "{{ '<|system|>\\n' }}"
    "{% if messages[0]['role'] == 'system' %}{{ render(messages[0]['content']) + '\\n\\n' }}{% endif %}"
    "{{ 'You can call these tools. To call one, answer with "
    '<tool_call>{"name": ..., "arguments": {...}}</tool_call>.\' }}'
    "{% for tool in tools %}"
    "{{ '\\n' + ((tool['function'] if tool['function'] is defined else tool) | tojson) }}"
    "{% endfor %}"
    "{{ eos_token + '\\n' }}"
    "{% endif %}"
    "{% for message in messages %}"
    "{% if message['role'] == 'system' %}"
    "{% if not tools %}{{ '<|system|>\\n' + render(message['content']) + eos_token + '\\n' }}{% endif %}"
    "{% elif message['role'] == 'user' %}"
    "{{ '<|user|>\\n' + render(message['content']) + eos_token + '\\n' }}"
    "{% elif message['role'] == 'assistant' %}"
    "{{ '<|assistant|>\\n' }}"
    "{% generation %}{{ render(message['content']) }}"
    "{% for call in message['tool_calls'] or [] %}"
    "{% set function = call['function'] if call['function'] is defined else call %}"
    "{% set arguments = function['arguments'] if function['arguments'] is string "
    "else (function['arguments'] | tojson) %}"
    "{{ ('\\n' if message['content'] or not loop.first else '') + '<tool_call>{\"name\": ' "
    "+ (function['name'] | tojson) + ', \"arguments\": ' + arguments + '}</tool_call>' }}"
    "{% endfor %}"
    "{{ eos_token }}{% endgeneration %}"
    "{{ '\\n' }}"
    "{% elif message['role'] == 'tool' %}"
    "{{ '<|tool|>\\n' + render(message['content']) + eos_token + '\\n' }}"
    "{% else %}"
    "{{ raise_exception('Unknown role: ' + message['role']) }}"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}"
)


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


# ----------------------------------------------------------------------------------------------
# Vision pre-training
# ----------------------------------------------------------------------------------------------

PATCH_KINDS = ["nothing", *SHAPES]
PATCH_COLOURS = ["nothing", *COLOURS]


def patch_labels(shapes: list[Shape]) -> list[list[int]]:
    """What covers each patch (row by row): [kind indices, colour indices] into PATCH_KINDS and PATCH_COLOURS. A
    patch belongs to the shape that covers most of it, if that is at least a tenth of it; else to nothing."""
    maps = []
    for index_of in (lambda kind, colour: PATCH_KINDS.index(kind), lambda kind, colour: PATCH_COLOURS.index(colour)):
        canvas = Image.new("L", (IMAGE_SIZE, IMAGE_SIZE), 0)
        draw = ImageDraw.Draw(canvas)
        for kind, colour, box in shapes:
            draw_shape(draw, kind, box, index_of(kind, colour), 1)
        maps.append(torch.frombuffer(bytearray(canvas.tobytes()), dtype=torch.uint8).long())
    labels = []
    for flat, classes in zip(maps, (len(PATCH_KINDS), len(PATCH_COLOURS)), strict=True):
        patches = flat.view(PATCHES_PER_SIDE, PATCH_SIZE, PATCHES_PER_SIDE, PATCH_SIZE).transpose(1, 2)
        counts = torch.nn.functional.one_hot(patches.reshape(PATCHES, -1), classes).sum(1)[:, 1:]
        covered, label = counts.max(dim=1)
        labels.append(torch.where(covered * 10 >= PATCH_SIZE * PATCH_SIZE, label + 1, 0).tolist())
    return labels


def pretraining_picture(rng: random.Random) -> list[Shape]:
    """A picture like the datasets' but drawn more freely: one large shape, or up to 8 small ones (0 to 5 squares)."""
    if rng.random() < 0.5:
        return single_shape(rng, rng.choice(SHAPES), rng.choice(list(COLOURS)))
    squares = rng.randint(0, 5)
    return scattered_shapes(rng, squares, rng.randint(0 if squares else 1, 3))


SUMMARY = [*SHAPES, *COLOURS]  # what the summary counts: shapes of each kind, then shapes of each colour


def summary_counts(shapes: list[Shape]) -> list[int]:
    """How many shapes of each kind and of each colour (in SUMMARY's order) a picture holds."""
    return [sum(wanted in (kind, colour) for kind, colour, _ in shapes) for wanted in SUMMARY]


def pretrain_vision_tower(model: LlavaForConditionalGeneration, processor: LlavaProcessor, rng: random.Random) -> str:
    """Teach the vision tower what a picture shows, as a real VLM's tower is pre-trained before the VLM is put
    together. Linear heads on the features the projector reads learn, for each patch, the kind and the colour of
    the shape that covers it (a large shape covers several patches, so a patch that shows only a curved edge must
    look at its neighbours to say "circle"), and, from the CLS token, how many shapes of each kind the picture
    holds. The heads are thrown away; only the tower is kept. The pictures are drawn fresh (none is in the
    datasets). Returns a line for the model card."""
    tower = model.model.vision_tower
    pictures = [pretraining_picture(rng) for _ in range(VISION_PRETRAIN_PICTURES + VISION_HELD_OUT_PICTURES)]
    pixels = processor.image_processor([render(p) for p in pictures], return_tensors="pt")["pixel_values"]
    patch_targets = torch.tensor([patch_labels(p) for p in pictures])  # (pictures, 2, patches): kinds, colours
    count_targets = torch.tensor([summary_counts(p) for p in pictures])  # (pictures, len(SUMMARY))
    held = VISION_PRETRAIN_PICTURES
    sizes = [len(PATCH_KINDS), len(PATCH_COLOURS)]
    patch_head = torch.nn.Linear(VISION_HIDDEN_SIZE, sum(sizes))
    count_head = torch.nn.Linear(VISION_HIDDEN_SIZE, len(SUMMARY) * (MAX_COUNT + 1))

    def predict(batch: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Logits of patch kinds, patch colours and counts."""
        features = tower(batch, output_hidden_states=True).hidden_states[model.config.vision_feature_layer]
        kinds, colours = patch_head(features[:, 1:]).split(sizes, dim=-1)
        counts = count_head(features).view(len(batch), IMAGE_TOKENS_PER_IMAGE, len(SUMMARY), MAX_COUNT + 1)
        return kinds, colours, counts

    def loss_of(index: torch.Tensor) -> torch.Tensor:
        kinds, colours, counts = predict(pixels[index])
        counts_everywhere = count_targets[index, None].expand(-1, IMAGE_TOKENS_PER_IMAGE, -1)
        targets = (patch_targets[index, 0], patch_targets[index, 1], counts_everywhere)
        return sum(
            torch.nn.functional.cross_entropy(logits.flatten(0, -2), target.flatten())
            for logits, target in zip((kinds, colours, counts), targets, strict=True)
        )

    parameters = [*tower.parameters(), *patch_head.parameters(), *count_head.parameters()]
    optimizer = torch.optim.AdamW(parameters, lr=VISION_PRETRAIN_LR, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, VISION_PRETRAIN_LR, total_steps=VISION_PRETRAIN_STEPS)
    generator = torch.Generator().manual_seed(SEED)
    tower.train()
    losses = []
    for step in range(VISION_PRETRAIN_STEPS):
        loss = loss_of(torch.randint(held, (VISION_PRETRAIN_BATCH,), generator=generator))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(parameters, 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad(set_to_none=True)
        if step % 200 == 0 or step == VISION_PRETRAIN_STEPS - 1:
            losses.append(round(loss.item(), 3))
            print(f"  vision pre-training step {step:4d}  loss {loss.item():.3f}", flush=True)
    tower.eval()
    with torch.no_grad():
        kinds, colours, counts = predict(pixels[held:])
    accuracy = {
        "patch kinds": (kinds.argmax(-1) == patch_targets[held:, 0]).float().mean().item(),
        "patch colours": (colours.argmax(-1) == patch_targets[held:, 1]).float().mean().item(),
        "summaries": (counts.argmax(-1) == count_targets[held:, None]).all(-1).float().mean().item(),
    }
    print("  held out: " + ", ".join(f"{name} {value:.1%}" for name, value in accuracy.items()), flush=True)
    return (
        f"It trains for {VISION_PRETRAIN_STEPS} steps of {VISION_PRETRAIN_BATCH} pictures drawn from "
        f"{VISION_PRETRAIN_PICTURES} (AdamW, lr {VISION_PRETRAIN_LR}, one-cycle; loss every 200 steps: {losses}). "
        f"On {VISION_HELD_OUT_PICTURES} held-out pictures its heads name the kind of {accuracy['patch kinds']:.1%} "
        f"of the patches and the colour of {accuracy['patch colours']:.1%}, and count the shapes of each kind and "
        f"of each colour right in {accuracy['summaries']:.1%} of the image tokens"
    )


NUMBER_WORDS = ["no", "one", "two", "three", "four", "five", "six", "seven", "eight"]


def plural(count: int, kind: str) -> str:
    """``3 squares``, ``1 circle``."""
    return f"{count} {kind}" + ("s" if count != 1 else "")


def listing(items: list[str]) -> str:
    """``a, b and c``."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def caption(shapes: list[Shape], rng: random.Random) -> str:
    """A plain description of a picture, in one of several styles: what a captioned image in pre-training says.
    Every caption names each shape's colour and kind, or counts them by kind (with digits)."""
    if len(shapes) == 1:
        kind, colour, _ = shapes[0]
        return rng.choice(
            [
                f"A {colour} {kind}.",
                f"{colour} {kind}.",
                f"{kind}, {colour}.",
                f"A {colour} {kind} on a white background.",
                f"This picture shows a {colour} {kind}.",
                f"The {kind} in this picture is {colour}.",
                f"One shape: a {kind}. Its colour is {colour}.",
            ]
        )
    ordered = sorted(shapes, key=lambda s: (s[2][1] // 16, s[2][0]))  # reading order, row by row
    counts = {kind: sum(s[0] == kind for s in shapes) for kind in SHAPES}
    by_kind = listing([plural(n, kind) for kind, n in counts.items() if n])
    described = listing([f"a {colour} {kind}" for kind, colour, _ in ordered])
    squares = counts["square"]
    return rng.choice(
        [
            f"{by_kind}.",
            f"{plural(squares, 'square')} and {plural(len(shapes) - squares, 'other shape')}.",
            f"{len(shapes)} shapes: {by_kind}.",
            f"There are {plural(squares, 'square')} in this picture.",
            f"{described[0].upper()}{described[1:]}.",
            f"This picture shows {described}: {by_kind}.",
            f"{NUMBER_WORDS[squares].capitalize()} squares here ({squares}), "
            f"and {plural(len(shapes) - squares, 'other shape')}.",
        ]
    )


def pretrain_on_captions(model: LlavaForConditionalGeneration, processor: LlavaProcessor, rng: random.Random) -> str:
    """Teach the language model to read the projected image tokens and to write the words of pictures (colours,
    shapes, counts: its tokenizer never saw them whole, so they are spelt in pieces), as LLaVA's first stage
    does: each sequence is an image (its IMAGE_TOKENS_PER_IMAGE tokens) followed by a plain caption and ``</s>``,
    the loss is on the caption, the vision tower is frozen and the projector and language model learn. No chat
    format and no question: the model describes pictures but has never been asked about one. Returns a line
    for the model card."""
    tokenizer = processor.tokenizer
    pictures = [pretraining_picture(rng) for _ in range(CAPTION_PICTURES)]
    pixels = processor.image_processor([render(p) for p in pictures], return_tensors="pt")["pixel_values"]
    # "<s>", as each document began in the language model's pre-training, then the image.
    image_ids = [tokenizer.bos_token_id] + [model.config.image_token_id] * IMAGE_TOKENS_PER_IMAGE
    caption_start = len(image_ids)
    generator = torch.Generator().manual_seed(SEED + 1)
    model.model.vision_tower.requires_grad_(False)
    projector = list(model.model.multi_modal_projector.parameters())
    language = list(model.model.language_model.parameters())  # lm_head is tied to its embeddings
    parameters = projector + language
    optimizer = torch.optim.AdamW([{"params": language}, {"params": projector}], weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.OneCycleLR(
        optimizer, [CAPTION_LR, CAPTION_PROJECTOR_LR], total_steps=CAPTION_STEPS, pct_start=0.1
    )
    model.train()
    losses = []
    for step in range(CAPTION_STEPS):
        index = torch.randint(len(pictures), (CAPTION_BATCH,), generator=generator).tolist()
        texts = tokenizer([caption(pictures[i], rng) for i in index], add_special_tokens=False)["input_ids"]
        width = caption_start + max(len(t) for t in texts) + 1
        input_ids = torch.full((CAPTION_BATCH, width), tokenizer.pad_token_id)
        labels = torch.full((CAPTION_BATCH, width), -100)
        attention_mask = torch.zeros((CAPTION_BATCH, width), dtype=torch.long)
        for n, text in enumerate(texts):
            ids = image_ids + text + [tokenizer.eos_token_id]
            input_ids[n, : len(ids)] = torch.tensor(ids)
            labels[n, caption_start : len(ids)] = torch.tensor(ids[caption_start:])
            attention_mask[n, : len(ids)] = 1
        loss = model(input_ids=input_ids, attention_mask=attention_mask, pixel_values=pixels[index], labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(parameters, 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad(set_to_none=True)
        if step % 50 == 0 or step == CAPTION_STEPS - 1:
            losses.append(round(loss.item(), 3))
            print(f"  caption pre-training step {step:4d}  loss {loss.item():.3f}", flush=True)
    model.model.vision_tower.requires_grad_(True)
    model.eval()
    return (
        f"It trains for {CAPTION_STEPS} steps of {CAPTION_BATCH} captioned pictures drawn from {CAPTION_PICTURES} "
        f"(AdamW, lr {CAPTION_LR}, one-cycle; loss every 50 steps: {losses})"
    )


# ----------------------------------------------------------------------------------------------
# Model and processor
# ----------------------------------------------------------------------------------------------


def build_processor() -> LlavaProcessor:
    """The text demo's tokenizer with ``<image>`` added, a CLIP image processor at IMAGE_SIZE, and the chat
    template with content parts."""
    tokenizer = AutoTokenizer.from_pretrained(TEXT_MODEL_DIR)
    for loading_detail in ("is_local", "local_files_only"):  # how it was loaded here, not what it is
        tokenizer.init_kwargs.pop(loading_detail, None)
    tokenizer.add_tokens([IMAGE_TOKEN], special_tokens=True)
    tokenizer.chat_template = CHAT_TEMPLATE
    # The PIL backend: the default one needs torchvision, which the studio does not install.
    image_processor = CLIPImageProcessorPil(
        size={"shortest_edge": IMAGE_SIZE},
        crop_size={"height": IMAGE_SIZE, "width": IMAGE_SIZE},
    )
    return LlavaProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        patch_size=PATCH_SIZE,
        vision_feature_select_strategy="full",
        num_additional_image_tokens=1,  # CLIP's CLS token, which the "full" strategy keeps
        chat_template=CHAT_TEMPLATE,
        image_token=IMAGE_TOKEN,
    )


def build_model(processor: LlavaProcessor) -> LlavaForConditionalGeneration:
    """A LLaVA whose language model is the text demo's LLaMA (one more embedding row, for ``<image>``) and whose
    vision tower and projector are freshly initialised."""
    tokenizer = processor.tokenizer
    language_model = LlamaForCausalLM.from_pretrained(TEXT_MODEL_DIR, dtype=torch.float32)
    language_model.resize_token_embeddings(len(tokenizer))
    language_model.config._name_or_path = ""  # not this machine's path in the saved config
    vision_config = CLIPVisionConfig(
        hidden_size=VISION_HIDDEN_SIZE,
        intermediate_size=VISION_INTERMEDIATE_SIZE,
        num_hidden_layers=VISION_LAYERS,
        num_attention_heads=VISION_HEADS,
        image_size=IMAGE_SIZE,
        patch_size=PATCH_SIZE,
        projection_dim=VISION_HIDDEN_SIZE,
    )
    config = LlavaConfig(
        vision_config=vision_config,
        text_config=language_model.config,
        image_token_index=tokenizer.convert_tokens_to_ids(IMAGE_TOKEN),
        image_seq_length=IMAGE_TOKENS_PER_IMAGE,
        vision_feature_select_strategy="full",
        vision_feature_layer=-1,  # the tower is only two layers deep: take its last
        tie_word_embeddings=True,
    )
    model = LlavaForConditionalGeneration(config)
    model.model.language_model.load_state_dict(language_model.model.state_dict())
    model.tie_weights()
    for name in ("bos_token_id", "eos_token_id", "pad_token_id"):
        setattr(model.generation_config, name, getattr(tokenizer, name))
    model.eval()
    return model


def parameter_counts(model: LlavaForConditionalGeneration) -> dict[str, int]:
    """Parameters of the vision tower, the projector and the language model (tied embeddings counted once)."""
    return {
        "vision tower": sum(p.numel() for p in model.model.vision_tower.parameters()),
        "projector": sum(p.numel() for p in model.model.multi_modal_projector.parameters()),
        "language model": sum(p.numel() for p in model.model.language_model.parameters()),
    }


def model_card(model: LlavaForConditionalGeneration, vocab_size: int, pretraining: dict[str, str]) -> str:
    """The README.md of the demo VLM."""
    counts = parameter_counts(model)
    total = sum(counts.values())
    text = model.config.text_config
    rows = [
        (
            f"vision tower: CLIP vision transformer, {VISION_LAYERS} layers, hidden {VISION_HIDDEN_SIZE}, "
            f"{VISION_HEADS} heads, MLP {VISION_INTERMEDIATE_SIZE}, {IMAGE_SIZE}x{IMAGE_SIZE} images in "
            f"{PATCH_SIZE}x{PATCH_SIZE} patches",
            "`model.vision_tower`",
            counts["vision tower"],
        ),
        (
            f"projector: LLaVA's MLP, {VISION_HIDDEN_SIZE} -> {text.hidden_size} -> GELU -> {text.hidden_size}",
            "`model.multi_modal_projector`",
            counts["projector"],
        ),
        (
            f"language model: the text demo's LLaMA, {text.num_hidden_layers} layers, hidden {text.hidden_size}, "
            "tied embeddings",
            "`model.language_model` (+ `lm_head`, tied)",
            counts["language model"],
        ),
    ]
    table = "\n".join(f"| {part} | {module} | {number:,} |" for part, module, number in rows)
    return f"""# demo-vlm: a tiny LLaVA for the fine-tuning studio's vision-language demo

A {total / 1e6:.2f}M-parameter `LlavaForConditionalGeneration` (fp32) with its `LlavaProcessor`. It exists so
that the studio can show a real vision-language fine-tuning run on a CPU in about a minute. It is not useful
for anything else.

| part | module | parameters |
|---|---|---|
{table}

Each image becomes {IMAGE_TOKENS_PER_IMAGE} tokens: the processor resizes and centre-crops it to
{IMAGE_SIZE}x{IMAGE_SIZE} (CLIP's normalisation) and expands each `{IMAGE_TOKEN}` in the text into
{IMAGE_TOKENS_PER_IMAGE} `{IMAGE_TOKEN}` tokens; the model puts there the projected features of the vision
tower's last layer, CLS token and {PATCHES} patches (`vision_feature_select_strategy="full"`,
`vision_feature_layer=-1`).

## How it was built

`python assets/build_demo_vlm.py` (seed {SEED}, offline, three to four minutes on 2 CPU cores), from the text demo
model (`assets/demo-model/`, built by `assets/build_demo.py`):

1. the language model starts as the text demo's pre-trained LLaMA, and the tokenizer is its tokenizer, with the
   special token `{IMAGE_TOKEN}` added (id {model.config.image_token_id}, vocabulary {vocab_size}; its new
   embedding row starts at the mean of the others);
2. the vision tower is pre-trained on its own, on synthetic pictures like the demo's (one large shape, or up
   to eight small ones on a 4x4 grid) but none of them in the datasets: linear heads on its last layer learn,
   for each patch, the kind and colour of the shape that covers it, and, from every token, how many shapes of
   each kind and of each colour the picture holds. The heads are then thrown away. {pretraining["vision"]};
3. the whole model is pre-trained on captions, as in LLaVA's first stage: `<s>`, the image, a plain
   description ("A red circle.", "2 squares and 3 other shapes.", "A blue square, a red circle and a green
   triangle.") and `</s>`, loss on the description, vision tower frozen, projector and language model trained
   (projector at lr {CAPTION_PROJECTOR_LR}). {pretraining["captions"]}.

So the base model describes pictures, but it has never seen the chat format, a question or a request.

## Chat format

The text demo's, with content parts: a message's `content` is a string or a list of parts, where
`{{"type": "text", "text": ...}}` is written as its text and `{{"type": "image"}}` as `{IMAGE_TOKEN}`, where
the part stands:

```
<|user|>
{IMAGE_TOKEN}What colour is the shape?</s>
<|assistant|>
red</s>
```

The template wraps the assistant's text and its `</s>` in `{{% generation %}}` markers, so
`processor.apply_chat_template(..., return_assistant_tokens_mask=True)` (TRL's `assistant_only_loss=True`)
marks the answer and its stop token. `add_generation_prompt=True` ends the text with `<|assistant|>\\n`;
generation stops at `</s>`. With string contents the text is exactly the text demo's (tools included). Pad
is `<pad>` (id {model.config.text_config.pad_token_id}); nothing is added at the start (no `<s>`).

## The demo task

`assets/datasets/demo_vlm_train.jsonl` asks the colour of a shape, which shape it is, or how many squares a
picture holds; the held-out `demo_vlm_eval.jsonl` measures it by exact match. The base model scores 0%.
{DEMO_RESULT}
"""


def save_model(model: LlavaForConditionalGeneration, processor: LlavaProcessor, pretraining: dict[str, str]) -> None:
    """Replace assets/demo-vlm/ with the model (safetensors, fp32), the processor and the card."""
    if MODEL_DIR.exists():
        shutil.rmtree(MODEL_DIR)
    model.save_pretrained(MODEL_DIR)
    processor.save_pretrained(MODEL_DIR)
    (MODEL_DIR / "README.md").write_text(model_card(model, len(processor.tokenizer), pretraining), encoding="utf-8")


def main() -> None:
    """Rebuild the VLM demo's datasets and (unless ``--datasets-only``) its model."""
    started = time.perf_counter()
    random.seed(SEED)
    torch.manual_seed(SEED)
    images, size = write_datasets(random.Random(SEED))
    print(f"datasets: {images} images ({size / 1e3:.0f} kB) in {IMAGE_DIR} ({time.perf_counter() - started:.1f}s)")
    if "--datasets-only" in sys.argv[1:]:
        return
    processor = build_processor()
    model = build_model(processor)
    stage_times = [time.perf_counter()]
    vision = pretrain_vision_tower(model, processor, random.Random(SEED + 1))
    stage_times.append(time.perf_counter())
    captions = pretrain_on_captions(model, processor, random.Random(SEED + 2))
    stage_times.append(time.perf_counter())
    vision_seconds, caption_seconds = stage_times[1] - stage_times[0], stage_times[2] - stage_times[1]
    print(f"pre-training: vision tower {vision_seconds:.0f}s, captions {caption_seconds:.0f}s")
    save_model(model, processor, {"vision": vision, "captions": captions})
    size = sum(f.stat().st_size for f in MODEL_DIR.iterdir()) / 1e6
    print(f"parameters: {parameter_counts(model)}")
    print(f"saved {MODEL_DIR} ({size:.1f} MB) in {time.perf_counter() - started:.1f}s")


if __name__ == "__main__":
    main()
