"""The demo VLM's pre-training: its vision tower on its own, then the whole model on captions.

``build_demo_vlm.py`` puts the model together and runs both stages (``pretrain_vision_tower``, then
``pretrain_on_captions``) before it saves it. Their pictures are drawn like the datasets' (``demo_shapes.py``) but
fresh, none of them in the datasets. Each stage draws from the ``random.Random`` it is given and from torch
generators seeded from SEED, so the same seeds give the same model on the same machine.
"""

from __future__ import annotations

import os
import random
from typing import TYPE_CHECKING

import torch
from demo_shapes import COLOURS, IMAGE_SIZE, SEED, SHAPES, Shape, draw_shape, render, scattered_shapes, single_shape
from PIL import Image, ImageDraw

if TYPE_CHECKING:
    from transformers import LlavaForConditionalGeneration, LlavaProcessor

# The vision tower's geometry, which build_demo_vlm.py builds the model with: 64x64 pixels in 16x16 patches, so
# 4x4 = 16 patch tokens per image.
PATCH_SIZE = 16
VISION_HIDDEN_SIZE = 64
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


# ----------------------------------------------------------------------------------------------
# Caption pre-training
# ----------------------------------------------------------------------------------------------

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
