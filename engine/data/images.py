"""The images of vision-language rows: where a row's image reference points, whether it is an image that can be
used, and the image itself, scaled down to the run's resolution cap.

A reference is a path, absolute or relative to the data file's folder (LLaMA-Factory's ``mllm_demo.json`` and
TRL's local datasets both write them so), or the image's bytes held in the data (the datasets library's Image
feature in a Parquet file or a hub dataset: engine.data.embedded_images writes each to a file). URLs are refused:
the engine reads local files only, so an offline machine and a public demo behave the same, and nothing is fetched
behind the user's back.

Every image is opened and decoded once before launch (a corrupt JPEG fails only when its data is decoded), but
never one whose header claims more than MAX_DECODE_PIXELS: a 20000 x 20000 file (a decompression bomb) would
need 1.2 GB as RGB, and is refused from its header alone. Pillow's own guard (Image.MAX_IMAGE_PIXELS) stays
as it is, below ours in strictness, so it only ever adds a refusal.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from engine.data.embedded_images import EmbeddedImagesRefused, embedded_bytes, written_image
from engine.data.errors import kind_of
from engine.store.paths import PathNotAllowed, confine, env_roots

# What an image is refused at before it is decoded: 8,192 x 8,192 (a 36 MP camera photo passes).
MAX_DECODE_PIXELS = 8192 * 8192
# The folders images may come from (os.pathsep-separated), when set: the studio sets it to the folders its page may
# read, so a dataset cannot name any other file of the server as an image (its runs and jobs inherit it).
IMAGE_ROOTS_ENV = "STUDIO_IMAGE_ROOTS"
IMAGE_PLACEHOLDER = "<image>"
_URL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")


class ImageProblem(ValueError):
    """An image reference that cannot be used; the message says why, without the row (the caller names it)."""


@dataclass(frozen=True)
class ImageFacts:
    """What the check learnt of one image file: its resolved path and its size in pixels."""

    path: Path
    width: int
    height: int


def resolve_image(reference: Any, base: Path | None) -> Path:
    """The local file a row's image reference names: an absolute path, or one relative to ``base`` (the data
    file's folder); for an image held in the data itself (engine.data.embedded_images), the file it is written to.
    Raises ImageProblem for a URL, a non-string, or a file that is not there."""
    data = embedded_bytes(reference)
    if data is not None:
        try:
            return written_image(data, reference.get("path") if isinstance(reference, dict) else None).resolve()
        except EmbeddedImagesRefused as exc:
            raise ImageProblem(str(exc)) from None
        except OSError as exc:
            raise ImageProblem(f"holds an image that cannot be written to the image cache ({exc})") from None
    if isinstance(reference, dict) and isinstance(reference.get("path"), str):
        reference = reference["path"]  # the datasets library's Image feature, written out as JSON
    if not isinstance(reference, str) or not reference.strip():
        raise ImageProblem(f"is {kind_of(reference)}, not the path of an image file")
    if _URL.match(reference):
        raise ImageProblem(
            f"{reference!r} is a URL; images are read from local files only: download it and give its path"
        )
    try:
        path = Path(reference).expanduser()
        if not path.is_absolute():
            if base is None:
                raise ImageProblem(f"{reference!r} is a relative path, and the data has no folder to read it from")
            path = base / path
        _confined(reference, path)
        if not path.is_file():
            raise ImageProblem(f"{reference!r}: no such file (looked for {path})")
    except (OSError, ValueError) as exc:
        if isinstance(exc, ImageProblem):
            raise
        raise ImageProblem(f"{reference!r} is not a usable path ({exc})") from None
    return path.resolve()


def _confined(reference: str, path: Path) -> None:
    """Refuse an image outside the folders IMAGE_ROOTS_ENV lists (nothing to refuse when it is not set); checked
    before the file's existence, so a refusal never tells whether a file is there."""
    roots = env_roots(IMAGE_ROOTS_ENV)
    if not roots:
        return
    try:
        confine(path, roots)
    except PathNotAllowed:
        raise ImageProblem(f"{reference!r} is outside the folders the studio may read images from") from None


def check_image(path: Path) -> ImageFacts:
    """Open and fully decode the image at ``path`` (cached per file, size and modification time); raise
    ImageProblem for a file that is not an image, is truncated or corrupt, or is too large to decode."""
    stat = path.stat()
    return _checked(str(path), stat.st_size, stat.st_mtime_ns)


@lru_cache(maxsize=4096)
def _checked(path: str, size: int, mtime_ns: int) -> ImageFacts:
    from PIL import Image, UnidentifiedImageError

    name = Path(path).name
    try:
        with Image.open(path) as image:
            width, height = image.size  # from the header: nothing decoded yet
            if width * height > MAX_DECODE_PIXELS:
                raise ImageProblem(
                    f"{name} is {width} x {height} pixels ({width * height:,}), more than the {MAX_DECODE_PIXELS:,} an "
                    "image may have; refused without decoding it. Scale it down first"
                )
            image.load()
    except Image.DecompressionBombError as exc:  # Pillow's own guard, at open: far over our cap
        pixels = re.search(r"\((\d+) pixels\)", str(exc))
        size = f"{int(pixels.group(1)):,} pixels" if pixels else "more pixels than Pillow decodes"
        raise ImageProblem(
            f"{name} is {size}, more than the {MAX_DECODE_PIXELS:,} an image may have (a decompression bomb?); "
            "refused without decoding it. Scale it down first"
        ) from None
    except UnidentifiedImageError:
        raise ImageProblem(f"{name} is not an image file Pillow can read") from None
    except (OSError, SyntaxError, ValueError) as exc:  # truncated or corrupt data, found while decoding
        if isinstance(exc, ImageProblem):
            raise
        raise ImageProblem(f"{name} is corrupt or truncated ({str(exc).strip() or type(exc).__name__})") from None
    return ImageFacts(Path(path), width, height)


def scaled_size(width: int, height: int, max_pixels: int) -> tuple[int, int]:
    """The size an image of ``width`` x ``height`` is scaled down to so it has at most ``max_pixels``, keeping its
    aspect ratio (an image within the cap keeps its size)."""
    if width * height <= max_pixels:
        return width, height
    scale = math.sqrt(max_pixels / (width * height))
    return max(1, math.floor(width * scale)), max(1, math.floor(height * scale))


def load_image(path: str | Path, max_pixels: int) -> Any:
    """The image at ``path`` as an RGB PIL image of at most ``max_pixels`` pixels (a checked file: check_image)."""
    from PIL import Image

    with Image.open(path) as image:
        image = image.convert("RGB")
    size = scaled_size(image.width, image.height, max_pixels)
    return image if size == image.size else image.resize(size, Image.Resampling.BICUBIC)
