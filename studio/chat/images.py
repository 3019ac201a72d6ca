"""The image a Chat message carries, for a vision-language model: the file the browser uploaded in the image box
beside the message (Gradio's upload), handed to the chat worker by its path (engine.chat.images), which checks and
reads it. No Gradio here.

Whoever reaches the page names the files it sends, so an image is taken only from Gradio's upload folder: a typed
path, another of the server's files or a bundled asset is refused before anything is sent. A text model takes no
image, and says so before anything is sent too. In the conversation the studio keeps, a user turn holds its images'
paths beside its text, as the worker takes it (``{"role": "user", "content": ..., "images": [path]}``); the Chatbot
shows them in the user's turn (``shown_turn``).

The path a turn keeps is not the upload's: Gradio deletes an upload 50 to 55 minutes after it arrived, and every
message sends the whole conversation again, so a conversation would fail from then on. The image sent is kept in a
folder of its own (``kept_image``: a hard link, no copy, where it can be) under chat_images_dir, which the workers
may read images from in demo mode too, and Gradio shows from; the folder goes when the conversation is cleared or
the page's session ends (``forget_images``).
"""

from __future__ import annotations

import secrets
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from engine.api import ChatClient, PathNotAllowed, confine
from studio.chat.models import worker_tag
from studio.demo.caller import Caller
from studio.i18n.catalog import SOURCE, key, text
from studio.path_guard import chat_images_dir, gradio_upload_dir, private_copy

IMAGES = "images"  # a turn's image paths (engine.chat.images.IMAGES)
IMAGE_LABEL = key("chat.image.label")
TEXT_ONLY, NOT_UPLOADED = key("chat.refuse.image_text"), key("chat.refuse.image_upload")


def uploaded_image(value: Any) -> Path | None:
    """The resolved path of the image the browser uploaded (None for none); PathNotAllowed for anything outside
    Gradio's upload folder (a link out of it included)."""
    if value is None or value == "":
        return None
    if not isinstance(value, (str, Path)):
        raise PathNotAllowed(f"not the path of an uploaded image: {type(value).__name__}")
    return confine(value, [gradio_upload_dir()])


def takes_images(client: ChatClient, caller: Caller) -> bool:
    """Whether the loaded model reads images (a vision-language model) and ``caller`` may chat with it: the image
    box is shown then."""
    info = client.info
    return info is not None and info.vision and client.may_use(worker_tag(caller))


def image_refusal(
    client: ChatClient, image: Any, history: list[dict[str, Any]], lang: str = SOURCE
) -> tuple[str | None, Path | None]:
    """(why the message cannot carry ``image`` now, in ``lang``, or None; the image's checked path, or None). A
    text model refuses an image in the box or in the conversation so far (a vision-language model was loaded when
    it was sent)."""
    try:
        path = uploaded_image(image)
    except PathNotAllowed:
        return text(NOT_UPLOADED, lang), None
    carried = path is not None or any(turn.get(IMAGES) for turn in history)
    if carried and client.info is not None and not client.info.vision:
        return text(TEXT_ONLY, lang), path
    return None, path


def kept_image(upload: Path) -> Path:
    """The image of a message as its conversation keeps it: a private copy of the checked ``upload`` that stays
    when Gradio sweeps its uploads."""
    # A long random folder name: in demo mode any visitor's dataset may name a path in chat_images_dir, and only
    # the conversation that kept an image knows where it is.
    return private_copy(upload, chat_images_dir(), prefix=secrets.token_hex(16))


def forget_images(histories: Mapping[str, list[dict[str, Any]]] | None) -> None:
    """Delete the kept images of ``histories`` (cleared, or its page's session ended): only folders kept_image made."""
    kept = chat_images_dir().resolve()
    for turns in (histories or {}).values():
        for turn in turns:
            for path in turn.get(IMAGES) or ():
                folder = Path(path).parent
                if folder.parent.resolve() == kept:
                    shutil.rmtree(folder, ignore_errors=True)


def user_turn(message: str, image: Path | None) -> dict[str, Any]:
    """The user's turn as the conversation keeps it and the worker takes it."""
    turn: dict[str, Any] = {"role": "user", "content": message}
    return turn | {IMAGES: [str(image)]} if image is not None else turn


def shown_turn(turn: dict[str, Any]) -> dict[str, Any]:
    """A turn as the Chatbot shows it: a user turn with images shows them above its text (a copy: a streaming reply
    is edited in place)."""
    images = turn.get(IMAGES)
    if not images:
        return dict(turn)
    return {"role": turn["role"], "content": [*({"path": path} for path in images), turn["content"]]}
