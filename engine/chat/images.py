"""Images in a chat: a user turn may carry image files for a vision-language model to read with its text.

In the chat protocol a turn names its images by path, beside its text: ``{"role": "user", "content": "What colour
is it?", "images": ["/tmp/gradio/…/shape.png"]}``. Paths, not pixels: the studio hands over the file a browser
uploaded, and the worker checks it (engine.data.images: a file that is no image, is corrupt or is a decompression
bomb is refused before it is decoded) and reads it scaled down to the run's ``vision.max_pixels``. The images of a
turn go before its text, as TRL places the images of a row that marks no place for them.

The checks of the shape (``chat_images``) are light, for the client; ``vision_conversation`` runs in the worker.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from engine.data.images import IMAGE_PLACEHOLDER, ImageProblem, check_image, resolve_image

IMAGES = "images"  # the key of a turn's image paths
# A conversation's images, all turns together: each is decoded and held while a reply is written.
MAX_CHAT_IMAGES = 8


class ImageRefused(ValueError):
    """An image a chat turn cannot carry; the message says which turn and why (the client raises it as a
    ChatError)."""


def chat_images(messages: list[dict[str, Any]]) -> list[Path]:
    """The image files the turns of ``messages`` carry, in order, each resolved (symlinks followed); raises
    ImageRefused for images on a turn that is not the user's, a value that is not a list of absolute paths, a file
    that is not there, or more than MAX_CHAT_IMAGES. The files are not opened here (``checked_image`` does)."""
    found: list[Path] = []
    for number, message in enumerate(messages, 1):
        if IMAGES not in message:
            continue
        images, where = message[IMAGES], f"message {number}"
        if message.get("role") != "user":
            raise ImageRefused(f"only the user's messages may carry images, not {where} ({message.get('role')})")
        if not isinstance(images, list) or not all(isinstance(path, str) and path for path in images):
            raise ImageRefused(f"{where}: its images must be a list of image file paths, not {images!r:.80}")
        for path in images:
            if not Path(path).is_absolute():
                raise ImageRefused(f"{where}: an image is named by its absolute path, not {path!r:.200}")
            try:
                found.append(resolve_image(path, None))
            except ImageProblem as exc:
                raise ImageRefused(f"{where}: the image {exc}") from None
    if len(found) > MAX_CHAT_IMAGES:
        raise ImageRefused(
            f"the conversation carries {len(found)} images, more than the {MAX_CHAT_IMAGES} a chat may hold; "
            "clear it and start again"
        )
    return found


def text_only_refusal(label: str) -> str:
    """Why a model that reads text alone takes no image (``label``: the loaded model's name)."""
    return f"{label} reads text only, so it cannot take an image; load a vision-language model, or remove the image"


def without_images(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The turns with their images left out (what a template guard or a text model reads)."""
    return [{key: value for key, value in message.items() if key != IMAGES} for message in messages]


def canonical_messages(messages: list[dict[str, Any]], image_tokens: Iterable[str] = ()) -> list[dict[str, Any]]:
    """The turns as the engine writes a vision row: each image an ``<image>`` placeholder before its turn's text
    (engine.data.vision_rows). Raises ImageRefused when a text holds ``<image>`` or another of the model's
    ``image_tokens`` itself: it would stand for an image that is not there."""
    tokens = sorted({IMAGE_PLACEHOLDER, *(token for token in image_tokens if token)})
    result = []
    for number, message in enumerate(messages, 1):
        content = message["content"]
        typed = next((token for token in tokens if token in content), None)
        if typed is not None:
            raise ImageRefused(
                f"message {number} holds {typed}, which stands for an image in this model's prompt; attach the image "
                "instead of typing its placeholder"
            )
        placeholders = IMAGE_PLACEHOLDER * len(message.get(IMAGES) or [])
        result.append({"role": message["role"], "content": placeholders + content})
    return result


def checked_image(path: Path) -> Path:
    """``path`` once it is known to be an image that can be decoded (engine.data.images.check_image, which refuses a
    decompression bomb from its header); ImageRefused saying why not."""
    try:
        check_image(path)
    except ImageProblem as exc:
        raise ImageRefused(f"the image cannot be used: {exc}") from None
    except OSError as exc:  # gone since it was named (an upload swept away), unreadable
        raise ImageRefused(f"the image {path.name} cannot be read ({exc.strerror or exc})") from None
    return path


def vision_conversation(
    messages: list[dict[str, Any]], max_pixels: int, image_tokens: Iterable[str] = ()
) -> list[dict[str, Any]]:
    """The conversation as a vision-language model's processor takes it: content parts, each image part holding
    its image, checked, read and scaled down to ``max_pixels`` (engine.data.vision_sets.with_images). One
    message in, one message out, so turns can still be left out from the front. Raises ImageRefused."""
    from engine.data.vision_sets import with_images

    paths = chat_images(messages)
    canonical = canonical_messages(messages, image_tokens)
    return with_images(canonical, [str(checked_image(path)) for path in paths], max_pixels)
