"""Vision-language rows (the ``vision`` format): a conversation with images, as users bring them.

Two shapes are read:

- LLaMA-Factory's: ``messages`` (or ShareGPT ``conversations``) whose texts hold ``<image>`` placeholders, and an
  ``images`` list of paths; its ``mllm_demo.json`` is one.
- TRL's: ``messages`` whose contents are lists of parts (``{"type": "image"}``, ``{"type": "text", "text":
  ...}``), and an ``images`` (or a single ``image``) column. A row whose texts hold no placeholder at all gets its
  images before the first user turn's text, as TRL's ``prepare_multimodal_messages`` places them.

The canonical row keeps string contents with ``<image>`` where each image goes, and the images' absolute paths:
``{"messages": [{"role": "user", "content": "<image>What colour is it?"}, ...], "images": ["/data/1.png"]}``.
So the rest of the engine (placeholders, the preview, counting) reads texts as for any conversation, and
``content_parts`` turns a row into the processor's form when it is trained or prompted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.config.data import ColumnMap, DataSection
from engine.data.errors import DataError, kind_of
from engine.data.formats import SHAREGPT_ROLES, column, turn_keys
from engine.data.images import IMAGE_PLACEHOLDER, ImageProblem, check_image, resolve_image
from engine.data.turns import string_problems, turns_problems

VISION_FORMAT = "vision"
IMAGE_COLUMNS = ("images", "image")


def images_column(row: dict[str, Any], columns: ColumnMap) -> str | None:
    """The column of a row that holds its images: the mapped one, else ``images``, else ``image``; None when the
    row has none."""
    if columns.images:
        return columns.images if columns.images in row else None
    return next((name for name in IMAGE_COLUMNS if name in row), None)


def image_references(row: dict[str, Any], columns: ColumnMap) -> list[Any]:
    """A row's image references as a list (a single ``image`` is one; null or absent is none)."""
    name = images_column(row, columns)
    value = row.get(name) if name else None
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def is_vision_row(row: dict[str, Any], columns: ColumnMap) -> bool:
    """Whether a conversation row carries images: a non-empty images column, or an image part in a turn."""
    turns = row.get(column(columns, "messages", row))
    if not isinstance(turns, list):
        return False
    return bool(image_references(row, columns)) or any(
        isinstance(turn, dict) and _has_image_part(turn.get(turn_keys(turn)[1])) for turn in turns
    )


def is_vision_dataset(rows: list[dict[str, Any]], data: DataSection, source: str) -> bool:
    """Whether auto-detection finds conversations with images (the ``vision`` format; engine.data.rows asks before
    the text formats are detected); an override to a text format is refused, since the images would be dropped
    and their placeholders trained as words."""
    if data.format == "vision" or not any(is_vision_row(row, data.columns) for row in rows):
        return False  # an explicit vision override takes the usual path, which checks its columns
    if data.format == "auto":
        return True
    raise DataError(
        f"{source} is a vision-language dataset (conversations with images), but data.format is {data.format}, "
        "which has no images; set data.format to vision (or auto)"
    )


def vision_row_problems(row: dict[str, Any], columns: ColumnMap) -> list[str]:
    """What is wrong with one vision row's shape: its turns, its parts, its images column, and placeholders that do
    not match its images one to one (the files themselves are checked by image_problems)."""
    name = column(columns, "messages", row)
    turns = row[name]
    problems: list[str] = []
    if isinstance(turns, list):
        texts = [_as_text(turn, f"{name}[{index}]", problems) for index, turn in enumerate(turns)]
        if not problems:
            problems += turns_problems(texts, name, conversation=True)
    else:
        problems += turns_problems(turns, name, conversation=True)
    images_name = images_column(row, columns) or (columns.images or "images")
    value = row.get(images_name)
    if value is not None and not isinstance(value, (list, str, dict, bytes)):
        problems.append(f"{images_name} is {kind_of(value)}, not a list of image paths")
    problems += string_problems(row, column(columns, "system"), required=False)
    if problems:
        return problems
    placeholders = sum(turn[turn_keys(turn)[1]].count(IMAGE_PLACEHOLDER) for turn in texts)
    count = len(image_references(row, columns))
    if placeholders and placeholders != count:
        return [
            f"has {placeholders} {IMAGE_PLACEHOLDER} placeholder{'s' * (placeholders != 1)} but {count} "
            f"image{'s' * (count != 1)} in {images_name}; each placeholder takes one image, in order"
        ]
    return []


def image_problems(row: dict[str, Any], columns: ColumnMap, base: Path | None) -> list[str]:
    """Each image of a (shape-checked) row opened and decoded: a missing, unreadable, corrupt or oversized file is
    named by its place in the images column."""
    name = images_column(row, columns) or "images"
    problems = []
    for index, reference in enumerate(image_references(row, columns)):
        try:
            check_image(resolve_image(reference, base))
        except ImageProblem as exc:
            problems.append(f"{name}[{index}] {exc}")
    return problems


def normalise_vision_row(row: dict[str, Any], columns: ColumnMap, base: Path | None) -> dict[str, Any]:
    """One checked vision row in canonical form: string contents with ``<image>`` where each image goes (before
    the first user text when the row places none), and the images' absolute paths."""
    messages = [_canonical_turn(turn) for turn in row[column(columns, "messages", row)]]
    system = row.get(column(columns, "system"))
    if isinstance(system, str) and system.strip() and messages[0]["role"] != "system":
        messages.insert(0, {"role": "system", "content": system})
    images = [str(resolve_image(reference, base)) for reference in image_references(row, columns)]
    if images and not any(IMAGE_PLACEHOLDER in message["content"] for message in messages):
        first_user = next(message for message in messages if message["role"] == "user")
        first_user["content"] = IMAGE_PLACEHOLDER * len(images) + first_user["content"]
    return {"messages": messages, "images": images}


def content_parts(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Canonical messages with each content split at its ``<image>`` placeholders into the parts a processor's chat
    template reads: ``[{"type": "image"}, {"type": "text", "text": "What colour is it?"}]``."""
    result = []
    for message in messages:
        parts: list[dict[str, Any]] = []
        for index, text in enumerate(message["content"].split(IMAGE_PLACEHOLDER)):
            if index:
                parts.append({"type": "image"})
            if text:
                parts.append({"type": "text", "text": text})
        result.append({**message, "content": parts})
    return result


def count_placeholders(messages: list[dict[str, Any]]) -> int:
    """How many images the canonical messages place."""
    return sum(message["content"].count(IMAGE_PLACEHOLDER) for message in messages)


def _has_image_part(content: Any) -> bool:
    return isinstance(content, list) and any(isinstance(part, dict) and part.get("type") == "image" for part in content)


def _as_text(turn: Any, where: str, problems: list[str]) -> Any:
    """A turn with its content as one string (a list of parts joined, each image part a placeholder); problems with
    the parts are added to ``problems``. A turn that is not an object is returned as is for turns_problems."""
    if not isinstance(turn, dict):
        return turn
    key = turn_keys(turn)[1]
    content = turn.get(key)
    if not isinstance(content, list):
        return turn
    texts = []
    for index, part in enumerate(content):
        part_where = f"{where}.{key}[{index}]"
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "image":
            texts.append(IMAGE_PLACEHOLDER)
        elif kind == "text" and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif kind == "text":
            problems.append(f"{part_where} is a text part whose text is {kind_of(part.get('text'))}, not a string")
        else:
            problems.append(f"{part_where} is not a text or image part ({{'type': 'text' or 'image', ...}})")
    return {**turn, key: "".join(texts)}


def _canonical_turn(turn: dict[str, Any]) -> dict[str, str]:
    speaker, key = turn_keys(turn)
    role = turn[speaker]
    text = _as_text(turn, "", [])[key]
    return {"role": SHAREGPT_ROLES.get(role, role) if speaker == "from" else role, "content": text}
