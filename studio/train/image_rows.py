"""The dataset panel's preview of rows with images: each row's turns, its ``<image>`` placeholders shown as numbered
markers, beside thumbnails of its images in the same order.

The thumbnails are embedded in the page as PNG data URLs (the engine makes them from the files the data check
opened: engine.data.preview.image_rows), so no route to a file is opened and no server path reaches the browser:
only each file's name, as the image's alt text.
"""

from __future__ import annotations

import base64
import html
from pathlib import Path
from typing import Any

from studio.i18n.catalog import SOURCE, key, text

IMAGE_MARKER, ROW_IMAGES, MORE_IMAGES, IMAGE_SUMMARY, PREPARING = (
    key(f"train.data.{name}") for name in ("image_marker", "row_images", "more_images", "images", "preparing_images")
)
LEGEND_LOSS, LEGEND_PROMPT, FILE_ROW, ROW = (
    key(f"train.data.{name}") for name in ("legend_loss", "legend_prompt", "file_row", "row")
)
PLACEHOLDER = "<image>"  # where an image goes in a canonical row's text (engine.data.vision_rows)

_LOSS_STYLE = "background:#bbf7d0;color:#14532d;border-radius:2px"
_PROMPT_STYLE = "color:#6b7280"
_MARKER_STYLE = (
    "display:inline-block;border:1px solid #6366f1;color:#4338ca;background:#eef2ff;border-radius:4px;"
    "padding:0 4px;margin:0 4px 0 1px;font-size:11px;line-height:16px;vertical-align:baseline"
)
_CARD_STYLE = "border:1px solid var(--border-color-primary,#ddd);border-radius:6px;padding:6px 8px;margin-bottom:6px"


def images_summary(num_images: int, lang: str = SOURCE) -> str:
    """The summary's line on the training rows' images (their tokens: the Estimate button, studio.train.estimate)."""
    return text(IMAGE_SUMMARY, lang, count=f"{num_images:,}")


def preparing_note(lang: str = SOURCE) -> str:
    """What the panel says while the thumbnails are being made (the quick check's last line)."""
    return f"*{text(PREPARING, lang)}*"


def image_rows_html(examples: list[Any], lang: str = SOURCE) -> str:
    """Rows with images (engine.data.preview.ImageRowPreview): a card per row with its thumbnails on the left and its
    turns on the right, answers marked as the text rows' are; everything escaped. The words are in ``lang``."""
    legend = (
        f'<div style="font-size:12px;margin-bottom:6px"><span style="{_LOSS_STYLE}">'
        f"&nbsp;{html.escape(text(LEGEND_LOSS, lang))}&nbsp;</span> &nbsp;"
        f'<span style="{_PROMPT_STYLE}">{html.escape(text(LEGEND_PROMPT, lang))}</span></div>'
    )
    return legend + "".join(_row_html(example, lang) for example in examples)


def _row_html(example: Any, lang: str) -> str:
    if example.source:
        where = text(FILE_ROW, lang, file=Path(example.source).name, row=example.row)
    else:
        where = text(ROW, lang, row=example.row)
    head = f"{html.escape(where)} · {html.escape(text(ROW_IMAGES, lang, count=example.num_images))}"
    thumbs = "".join(_thumbnail_html(number, thumb, lang) for number, thumb in enumerate(example.thumbnails, 1))
    more = example.num_images - len(example.thumbnails)
    if more > 0:
        thumbs += f'<div style="font-size:11px;opacity:.75">{html.escape(text(MORE_IMAGES, lang, count=more))}</div>'
    column = f'<div class="ts-thumbs" style="display:flex;flex-direction:column;gap:6px;flex:none">{thumbs}</div>'
    counter = iter(range(1, example.num_images + 1))
    turns = "".join(_turn_html(turn, counter, lang) for turn in example.turns)
    body = (
        f'<div style="display:flex;gap:10px;align-items:flex-start;margin-top:4px">{column}'
        f'<div class="ts-turns" style="min-width:0;flex:1">{turns}</div></div>'
    )
    return (
        f'<div class="ts-example ts-image-row" data-row="{example.row}" style="{_CARD_STYLE}">'
        f'<div style="font-size:12px;opacity:.75">{head}</div>{body}</div>'
    )


def _thumbnail_html(number: int, thumb: Any, lang: str) -> str:
    """One thumbnail, numbered as its marker in the turns; the image is the engine's PNG, inlined."""
    data = base64.b64encode(thumb.png).decode("ascii")
    name = html.escape(thumb.name)
    label = html.escape(text(IMAGE_MARKER, lang, number=number))
    return (
        f'<figure style="margin:0;text-align:center;width:{thumb.width}px">'
        f'<img class="ts-thumb" data-image="{number}" src="data:image/png;base64,{data}" width="{thumb.width}" '
        f'height="{thumb.height}" alt="{name}" title="{name}" '
        'style="display:block;border-radius:4px;border:1px solid var(--border-color-primary,#ddd)">'
        f'<figcaption style="font-size:11px;opacity:.75">{label}</figcaption></figure>'
    )


def _turn_html(turn: Any, counter: Any, lang: str) -> str:
    """A turn: its role, then its text with each ``<image>`` as the marker of the next image."""
    pieces = turn.text.split(PLACEHOLDER)
    style = _LOSS_STYLE if turn.loss else _PROMPT_STYLE
    tag, cls = ("mark", "ts-loss") if turn.loss else ("span", "ts-prompt")
    parts = [f'<{tag} class="{cls}" style="{style}">{html.escape(pieces[0])}</{tag}>' if pieces[0] else ""]
    for piece in pieces[1:]:
        number = next(counter, None)
        label = text(IMAGE_MARKER, lang, number=number) if number is not None else PLACEHOLDER
        parts.append(f'<span class="ts-image-marker" data-image="{number or ""}" style="{_MARKER_STYLE}">')
        parts.append(f"{html.escape(label)}</span>")
        if piece:
            parts.append(f'<{tag} class="{cls}" style="{style}">{html.escape(piece)}</{tag}>')
    role = f'<b style="font-size:12px;opacity:.8">{html.escape(turn.role)}</b> '
    return (
        f'<div class="ts-turn" data-role="{html.escape(turn.role)}" '
        f'style="white-space:pre-wrap;margin:2px 0;font-size:13px;font-family:var(--font-mono,monospace)">'
        f"{role}{''.join(parts)}</div>"
    )
