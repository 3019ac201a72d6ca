"""What the page says about a run that waits in line for its devices (engine.runs.queue), in the page's language:
Start's and Resume's message, and a queued run's place in line. Both the scheduler and the demo's queue rules say
these words, so they live below both."""

from __future__ import annotations

from pathlib import Path

from engine.api import FAILED, read_status, run_queue
from studio.i18n.catalog import SOURCE, key, text

STARTED, QUEUED, FAILED_TO_START, COULD_NOT_START = (
    key(f"start.{name}") for name in ("started", "queued", "failed", "could_not_start")
)
NEXT_IN_LINE, ONE_AHEAD, MANY_AHEAD = (key(f"queue.{name}") for name in ("next", "one_ahead", "many_ahead"))


def queue_message(run_dir: Path, lang: str = SOURCE) -> str:
    """What Start (or Resume) says about a run, in ``lang``: started, its place in line for its devices, or why it
    could not start."""
    current = read_status(Path(run_dir))
    name = current.name or Path(run_dir).name
    if current.state == FAILED:
        return text(FAILED_TO_START, lang, name=name, error=current.error or text(COULD_NOT_START, lang))
    ahead = run_queue.runs_ahead(Path(run_dir))
    if ahead is None:
        return text(STARTED, lang, name=name)
    return text(QUEUED, lang, name=name, place=place_text(ahead, lang))


def place_text(ahead: int, lang: str = SOURCE) -> str:
    """A queued run's place in line, in ``lang``: 'yours is next', '1 run ahead of yours', '3 runs ahead of
    yours'."""
    if ahead <= 0:
        return text(NEXT_IN_LINE, lang)
    return text(ONE_AHEAD if ahead == 1 else MANY_AHEAD, lang, count=ahead)
