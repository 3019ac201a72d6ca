"""The first training rows exactly as the model sees them, with the loss-bearing parts marked; and the dataset
check that shows them beside each training row's token count (check_tokens), from one tokenization.

Rows with images (the vision format) are previewed from their canonical rows instead (image_rows): their turns
with ``<image>`` where each image goes, and a small PNG thumbnail of each image, made here from the files the data
check opened and checked. So the studio shows them without loading the model's processor (which needs torch), and
never hands a browser a path: only the thumbnails' bytes and the files' names leave the engine.
"""

from __future__ import annotations

import io
from collections import Counter
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.data.errors import DataError
from engine.data.formats import PAIRED_FORMATS
from engine.data.images import MAX_DECODE_PIXELS
from engine.data.mixture import FORMAT_JOIN
from engine.data.pipeline import (
    DataReport,
    TokenizedSet,
    add_token_counts,
    guard_chat_template,
    require_trainable,
    select_rows,
    start_report,
    tokenize_rows,
)
from engine.data.preference import answer_sides
from engine.data.rows import LoadedRows
from engine.data.template_guard import CHECK_BUDGET_S
from engine.data.tokenize import TokenizedRow
from engine.data.vision_rows import VISION_FORMAT

if TYPE_CHECKING:
    from engine.config import RunConfig


@dataclass
class PreviewExample:
    """One training row after templating, tokenization and truncation."""

    row: int  # 1-based row number in the training file
    segments: list[tuple[str, bool]]  # decoded text pieces; True where the tokens carry loss
    num_tokens: int
    num_loss_tokens: int
    truncated: bool
    source: str = ""  # the file of the row when data.path lists several datasets ("" for one file)
    side: str = ""  # of a preference or kto row: which answer (chosen, rejected, desirable, undesirable)


def preview_examples(config: RunConfig, tokenizer: Any, n: int = 3) -> list[PreviewExample]:
    """The first ``n`` rows that train (after the eval split and max_samples), decoded token by token; a
    preference row gives an example per answer.

    Each segment is decoded from its own token ids, so the text is what the model sees, special tokens
    included.
    """
    loaded, train_idx, _, _ = select_rows(config.data, config.train.seed)
    examples: list[PreviewExample] = []
    # Tokenize a few rows at a time: rows without loss are skipped (they do not train), so n may need more.
    position = 0
    while len({(example.source, example.row) for example in examples}) < n and position < len(train_idx):
        batch = train_idx[position : position + n]
        position += n
        tokenized = tokenize_rows(loaded, batch, tokenizer, config.data, config.train.max_length)
        examples += first_examples(tokenizer, loaded, tokenized, n)
    return _of_first_rows(examples, n)


@dataclass
class TokenCheck:
    """The dataset check with a tokenizer, from one tokenization of the training rows."""

    report: DataReport  # as inspect_dataset reports it
    # Tokens before truncation of each training row that trains (TokenizedRow.length; for a row far longer than
    # max_length a lower bound, see encode_head). Rows dropped for want of a loss token (report.num_dropped) have
    # no entry: all that is known of them is that they are longer than max_length.
    lengths: list[int]
    examples: list[PreviewExample]  # the first rows that train, as preview_examples gives them


def check_tokens(
    config: RunConfig, tokenizer: Any, n: int = 3, template_budget_s: float = CHECK_BUDGET_S
) -> TokenCheck:
    """``inspect_dataset`` with a tokenizer, plus every training row's token count and the first ``n`` examples.

    The same steps as inspect_dataset (the template guard before any row is rendered here), but the rows are
    tokenized once for the report, the counts and the examples: the dataset panel needs all three.
    """
    data, max_length = config.data, config.train.max_length
    loaded, train_idx, eval_loaded, eval_idx = select_rows(data, config.train.seed)
    report = start_report(data, loaded, train_idx, eval_loaded, eval_idx)
    guard_chat_template(data, tokenizer, [(loaded, train_idx)], template_budget_s)
    tokenized = tokenize_rows(loaded, train_idx, tokenizer, data, max_length)
    require_trainable(tokenized, data, loaded.source, max_length)
    add_token_counts(report, tokenized)
    examples = first_examples(tokenizer, loaded, _tool_call_first(tokenized), n)
    return TokenCheck(report, [row.length for row in tokenized.rows], examples)


def _tool_call_first(tokenized: TokenizedSet) -> TokenizedSet:
    """``tokenized`` with its first row that trains a tool call whole moved to the front, so that the preview of a
    tool-calling dataset shows a call, not only the plain chats that happen to come first."""
    first = tokenized.tools.first_whole
    if first is None or tokenized.numbers[0] == first:
        return tokenized
    order = sorted(range(len(tokenized.rows)), key=lambda i: tokenized.numbers[i] != first)  # stable: rest keep order
    return replace(tokenized, rows=[tokenized.rows[i] for i in order], numbers=[tokenized.numbers[i] for i in order])


def first_examples(tokenizer: Any, loaded: LoadedRows, tokenized: TokenizedSet, n: int) -> list[PreviewExample]:
    """The examples of the first ``n`` training rows of ``tokenized``: one per row, or one per answer of a
    preference or kto row (named by its side)."""
    paired = loaded.format in PAIRED_FORMATS
    examples: list[PreviewExample] = []
    seen: Counter[int] = Counter()  # row number -> its answers taken so far
    for number, row in zip(tokenized.numbers, tokenized.rows, strict=True):
        if number not in seen and len(seen) >= n:
            break
        example = _example(tokenizer, loaded, number, row)
        if paired:  # a row's answers follow each other in answer_sides' order (a row is kept or dropped whole)
            example.side = answer_sides(loaded.rows[number - 1])[seen[number]]
        seen[number] += 1
        examples.append(example)
    return examples


def _of_first_rows(examples: list[PreviewExample], n: int) -> list[PreviewExample]:
    """The examples of the first ``n`` rows among ``examples`` (every answer of each)."""
    rows = list(dict.fromkeys((example.source, example.row) for example in examples))[:n]
    return [example for example in examples if (example.source, example.row) in rows]


def _example(tokenizer: Any, loaded: LoadedRows, number: int, row: TokenizedRow) -> PreviewExample:
    """Training row ``number`` (1-based among ``loaded.rows``) as the model sees it, named by its file's row."""
    source, file_row = loaded.where(number - 1)
    segments: list[tuple[str, bool]] = []
    start = 0
    for end in range(1, len(row.input_ids) + 1):
        if end == len(row.input_ids) or row.completion_mask[end] != row.completion_mask[start]:
            text = tokenizer.decode(row.input_ids[start:end], skip_special_tokens=False)
            segments.append((text, bool(row.completion_mask[start])))
            start = end
    listed = source if loaded.origins is not None else ""
    return PreviewExample(file_row, segments, len(row.input_ids), row.num_loss_tokens, row.truncated, listed)


def to_text(example: PreviewExample, marker: str = "[[", end: str = "]]") -> str:
    """The example as one string with the loss-bearing parts wrapped in ``marker`` ... ``end``."""
    return "".join(f"{marker}{text}{end}" if loss else text for text, loss in example.segments)


# --- rows with images ----------------------------------------------------------------------------------------

THUMBNAIL_SIDE = 96  # pixels: the longer side of a preview's thumbnail
MAX_THUMBNAILS = 8  # per row: a row of many images is previewed by its first ones


@dataclass(frozen=True)
class Thumbnail:
    """A small PNG of one of a row's images: what a page may show of it (the file's name, never its folder)."""

    name: str
    width: int  # the thumbnail's size in pixels (its longer side at most THUMBNAIL_SIDE, aspect kept)
    height: int
    png: bytes


@dataclass(frozen=True)
class ImageTurn:
    """One turn of a row with images: its text with ``<image>`` where each image goes."""

    role: str
    text: str
    loss: bool  # whether the turn trains: the answers, or every turn when data.completion_only_loss is off


@dataclass
class ImageRowPreview:
    """One training row with images as a preview shows it: its turns, and its images' thumbnails in order."""

    row: int  # 1-based row number in its file
    turns: list[ImageTurn]
    thumbnails: list[Thumbnail]  # the row's first MAX_THUMBNAILS images, in the order of its placeholders
    num_images: int  # every image of the row (more than the thumbnails when it has more than MAX_THUMBNAILS)
    source: str = ""  # the file of the row when data.path lists several datasets ("" for one file)


@dataclass
class ImageRows:
    """The preview of a dataset with images: its first training rows, and how many images its training rows hold."""

    examples: list[ImageRowPreview] = field(default_factory=list)
    num_images: int = 0


def has_images(fmt: str) -> bool:
    """Whether data of the (detected, maybe joined: ``vision+vision``) format ``fmt`` holds rows with images."""
    return VISION_FORMAT in fmt.split(FORMAT_JOIN)


def image_rows(config: RunConfig, n: int = 3, side: int = THUMBNAIL_SIDE) -> ImageRows:
    """The first ``n`` training rows (after the eval split and max_samples) of data with images, each with a
    thumbnail of its images (the longer side ``side`` pixels at most), and the count of the training rows' images.

    The rows are loaded as the data check loads them, so every image named here was resolved and checked there.
    """
    loaded, train_idx, _, _ = select_rows(config.data, config.train.seed)
    answers_only = config.data.completion_only_loss
    examples = []
    for index in train_idx:
        row = loaded.rows[index]
        if len(examples) >= n:
            break
        if "messages" not in row:  # a dataset of another format in a list of datasets
            continue
        source, number = loaded.where(index)
        turns = [
            ImageTurn(turn["role"], turn["content"], turn["role"] == "assistant" or not answers_only)
            for turn in row["messages"]
        ]
        paths = row.get("images", [])
        try:
            thumbnails = [thumbnail(Path(path), side) for path in paths[:MAX_THUMBNAILS]]
        except (OSError, ValueError) as exc:  # the file changed since it was checked
            raise DataError(f"{source} row {number}: its image cannot be shown again ({exc})") from None
        listed = source if loaded.origins is not None else ""
        examples.append(ImageRowPreview(number, turns, thumbnails, len(paths), listed))
    num_images = sum(len(loaded.rows[index].get("images", [])) for index in train_idx)
    return ImageRows(examples, num_images)


def thumbnail(path: Path, side: int = THUMBNAIL_SIDE) -> Thumbnail:
    """A PNG of the image at ``path`` (a file the data check opened) whose longer side is at most ``side`` pixels,
    its aspect kept; made once per file, size and modification time. Shown as the model is given it: no EXIF
    rotation (load_image applies none)."""
    stat = path.stat()
    return _thumbnail(str(path), stat.st_size, stat.st_mtime_ns, side)


@lru_cache(maxsize=512)
def _thumbnail(path: str, size: int, mtime_ns: int, side: int) -> Thumbnail:
    from PIL import Image

    with Image.open(path) as image:
        if image.width * image.height > MAX_DECODE_PIXELS:  # changed since the check: never decode a bomb
            raise ValueError(f"{Path(path).name} is larger than an image may be")
        image.draft("RGB", (side, side))  # JPEG: decode at a fraction of its size, far faster
        picture = image if image.mode in ("RGB", "RGBA", "L", "LA") else image.convert("RGBA")
        picture.thumbnail((side, side), Image.Resampling.LANCZOS)  # shrinks only, aspect kept
        out = io.BytesIO()
        picture.save(out, format="PNG", optimize=True)
    return Thumbnail(Path(path).name, picture.width, picture.height, out.getvalue())
