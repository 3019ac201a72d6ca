"""The HTML pieces several tabs show, one definition each: the message box, the progress bar, a run's state
badge, a duration and a block of preformatted text. Plain Python, no Gradio.

Their classes are the ones assets/studio.css styles (and assets/live_charts.js swaps in as HTML), so a change
here shows on every tab at once.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

from engine.api import ACTIVE_STATES, PAUSED, RUN_STATES, RunStatus
from studio.i18n.catalog import SOURCE, key, text

SEGMENTS = key("progress.segments")
STATE_WORDS = {state: key(f"state.{state}") for state in (*RUN_STATES, "unknown")}  # a badge's word per state


class Html(str):
    """Markup built here, already escaped: ``message_html`` puts it in as it is instead of escaping it again."""


def bold(text: str) -> Html:
    """``text`` in bold, escaped: a piece of a message that must stand out."""
    return Html(f"<b>{html.escape(text)}</b>")


def message_html(text: str | Sequence[str], kind: str = "ok") -> str:
    """A coloured message box (kinds: ok, warn, error; styles in assets/studio.css); "" when there is no text.

    ``text`` is one string or a list of pieces; every piece is escaped except those made here (``bold``), so a
    message that quotes a file name, an error or a model's output never turns into markup.
    """
    pieces = [text] if isinstance(text, str) else list(text)
    body = "".join(piece if isinstance(piece, Html) else html.escape(piece) for piece in pieces)
    return f'<div class="ts-message ts-message-{kind}">{body}</div>' if body else ""


def progress_bar_html(percent: float, text: str, classes: str = "", fill: str = "ts-fill", decimals: int = 0) -> str:
    """A bar filled to ``percent`` (held within 0 to 100) over a line of text.

    ``text`` is the line's HTML (its spans: the caller escapes what it did not write); ``classes`` are added to
    the ``ts-progress`` box (the state colours of assets/studio.css key on them) and ``fill`` are the classes
    of the filled part. ``decimals`` is the width's precision: the Monitor's bar moves in tenths of a percent.
    """
    percent = max(0.0, min(100.0, float(percent)))
    box = f"ts-progress {classes}" if classes else "ts-progress"
    return (
        f'<div class="{box}"><div class="ts-bar"><div class="{fill}" style="width:{percent:.{decimals}f}%"></div>'
        f'</div><div class="ts-progress-text">{text}</div></div>'
    )


def badge_html(state: str | None, note: str | None = None, lang: str = SOURCE) -> str:
    """A coloured pill for a run's state (colours in assets/studio.css, keyed by state), pulsing while a process
    of the run is at work; ``note`` (why it ended: a pruned run's reason) shows when the pointer rests on it. The
    state's word is in ``lang``."""
    state = state or "unknown"
    live = '<span class="ts-pulse"></span>' if state in ACTIVE_STATES and state != PAUSED else ""  # a paused one waits
    title = f' title="{html.escape(note)}"' if note else ""
    word = text(STATE_WORDS[state], lang) if state in STATE_WORDS else state
    return f'<span class="ts-badge ts-state-{html.escape(state)}"{title}>{live}{html.escape(word)}</span>'


def format_duration(seconds: float | None) -> str:
    """1:05:09, 4:09 or 0:07; an em dash when unknown."""
    if seconds is None or seconds < 0:
        return "—"
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def run_time_text(status: RunStatus, now: float | None = None, lang: str = SOURCE) -> str:
    """How long a run has trained: "12:03 total · 2:10 this segment" once it was resumed (in ``lang``), else just
    "2:10"."""
    total = status.total_seconds(now)
    if not status.earlier_seconds:
        return format_duration(total)
    return text(SEGMENTS, lang, total=format_duration(total), segment=format_duration(status.segment_seconds(now)))


def text_block(text: str) -> str:
    """Preformatted, wrapped, escaped text for a Markdown component (a code fence would not wrap)."""
    escaped = html.escape(text.strip()).replace("\n", "<br>")
    return f'<div style="white-space:pre-wrap;font-family:var(--font-mono,monospace);font-size:13px">{escaped}</div>'
