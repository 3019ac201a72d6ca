"""Images held inside the data: the datasets library's Image feature as a Parquet file or a hub dataset stores it
(``{"bytes": b"\\x89PNG...", "path": "0001.png"}``, the path often just the original file's name), or a column of
raw image bytes. Most vision-language datasets on the hub come so.

Each such image is written once to a file in the image cache and read from there like any other image: the rest of
the engine reads a row's images by path (the check decodes each file once, the preview makes thumbnails, and
training reads each image when its item is taken rather than holding every image of the set in memory, as TRL's
collator expects). Files are named by the SHA-256 of their bytes, so loading the same data again (the check, then
the run's worker, a resumed run) writes nothing, and two datasets that share an image share its file. Each keeps the
name the data gave it (``<cache>/ab/abcd.../0001.png``), which previews and error messages show.

The cache is STUDIO_IMAGE_CACHE when set (the studio sets it inside its workspace), else
``$XDG_CACHE_HOME/tuning-studio/images``. Embedded images are the data's own, not paths a visitor chose, so the
folders a studio confines image paths to (engine.data.images.IMAGE_ROOTS_ENV) do not apply to their files; their
bytes still go through the same check as any image file (size cap before decoding, a full decode).

A public demo refuses them (STUDIO_EMBEDDED_IMAGES=refuse, set by the studio in demo mode): a Parquet file of 0.3 MB
held 20,000 distinct one-pixel PNGs, which took 5.8 s to write and check and 160 MB of disk (a file and a folder
each), so the 20 MB a visitor may upload could fill gigabytes; a visitor's own images never reached a demo before
either (image paths there are held to the bundled sets).
"""

from __future__ import annotations

import hashlib
import io
import os
import re
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

IMAGE_CACHE_ENV = "STUDIO_IMAGE_CACHE"
EMBEDDED_IMAGES_ENV = "STUDIO_EMBEDDED_IMAGES"  # "refuse": images inside the data are refused (a public demo)
_UNSAFE = re.compile(r"[^\w.-]+")
_MAX_NAME = 100


def image_cache_dir() -> Path:
    """Where embedded images are written: STUDIO_IMAGE_CACHE, else the user's cache folder."""
    configured = os.environ.get(IMAGE_CACHE_ENV)
    if configured:
        return Path(configured).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tuning-studio" / "images"


def embedded_bytes(reference: Any) -> bytes | None:
    """The image bytes a reference holds (an Image feature's ``bytes``, or raw bytes), or None for a reference by
    path. An Image feature whose bytes are empty names its image by path, as one written from local files does."""
    if isinstance(reference, dict):
        reference = reference.get("bytes")
    if isinstance(reference, (bytes, bytearray, memoryview)) and len(reference):
        return bytes(reference)
    return None


class EmbeddedImagesRefused(ValueError):
    """Images held inside the data, where this process takes images by path only (EMBEDDED_IMAGES_ENV)."""


def written_image(data: bytes, name_hint: Any = None) -> Path:
    """The cache file holding ``data`` (written now if it is not there yet), named after ``name_hint`` (the Image
    feature's path) or, without one, ``image.<format>`` as Pillow reads the header. Raises EmbeddedImagesRefused
    where they are refused."""
    if os.environ.get(EMBEDDED_IMAGES_ENV) == "refuse":
        raise EmbeddedImagesRefused(
            "holds its image inside the data, which this studio does not take (a public demo takes the images of "
            "its bundled sets only); train on it in a studio of your own"
        )
    digest = hashlib.sha256(data).hexdigest()
    folder = image_cache_dir() / digest[:2] / digest
    path = folder / _file_name(name_hint, data)
    if path.is_file() and path.stat().st_size == len(data):
        return path
    folder.mkdir(parents=True, exist_ok=True)
    partial = folder / f".{path.name}.{os.getpid()}.part"
    partial.write_bytes(data)
    os.replace(partial, path)  # atomic: another process loading the same data at once sees a whole file or none
    return path


def _file_name(name_hint: Any, data: bytes) -> str:
    """A safe file name: the hint's last part (a Windows or POSIX path) with only word characters, dots and dashes."""
    if isinstance(name_hint, str) and name_hint.strip():
        name = PurePosixPath(PureWindowsPath(name_hint.strip()).as_posix()).name
        name = _UNSAFE.sub("_", name).lstrip(".")[-_MAX_NAME:]
        if name:
            return name
    found = _format(data)
    return f"image.{found}" if found else "image"


def _format(data: bytes) -> str | None:
    """The image format Pillow reads in the bytes' header (``png``, ``jpeg``), or None when it reads none."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as image:
            return (image.format or "").lower() or None
    except (Image.DecompressionBombError, UnidentifiedImageError, OSError, ValueError):
        return None  # the check that follows says what is wrong with it
