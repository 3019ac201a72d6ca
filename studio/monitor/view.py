"""What the Monitor shows, as pure functions of a run's status and its metrics feed (HTML and button states).

Kept apart from the Gradio wiring so the rules (which button makes sense in which state, how far along a run
is, when it will end) are tested as plain functions.
"""

from __future__ import annotations

import html
import time
from dataclasses import dataclass
from typing import Any

from engine.api import (
    ABORTED,
    ACTIVE_STATES,
    COMPLETED,
    FAILED,
    PAUSED,
    PRUNED,
    QUEUED,
    TRAINING_STATES,
    RunStatus,
    limit_reached,
)
from studio.i18n.catalog import SOURCE, key, prune_keys, say_again, text
from studio.markup import STATE_WORDS, badge_html, format_duration, progress_bar_html, run_time_text
from studio.monitor.feed import REWARD_TOTAL, MetricsFeed, eta_seconds
from studio.queue.words import place_text

# The states in which the worker takes Save now and Pause / Continue (engine.runs.requests).
REQUEST_STATES = ("running", PAUSED)
# The words of the progress line, the stats cards and the error box (studio.i18n), said in the page's language.
STEP, EPOCH, ELAPSED, ETA, PAUSED_SINCE, CANCELLED, TIME_LIMIT, PRUNED_NOTE, QUEUED_LINE = (
    key(f"progress.{name}")
    for name in ("step", "epoch", "elapsed", "eta", "paused_since", "cancelled", "time_limit", "pruned", "queued")
)
PRUNE_KEYS = prune_keys()
STATS = {
    name: key(f"stats.{name}")
    for name in ("loss", "best_loss", "eval_loss", "eval_reward", "reward", "learning_rate", "tokens", "memory")
}
# What the eval loss card says where no eval loss will come: the run learns from rewards (its reward is shown in its
# place), or it has no eval set.
IN_PLACE_OF_EVAL, NO_EVAL_SET = key("stats.note.rewards"), key("stats.note.no_eval_set")
FAILED_TITLE, EXIT_CODE, NO_MESSAGE = key("monitor.failed"), key("monitor.exit_code"), key("monitor.no_message")
HINT_RESUME, HINT_NEW, EMPTY = key("monitor.hint_resume"), key("monitor.hint_new"), key("monitor.empty")


@dataclass(frozen=True)
class Controls:
    """Which run actions make sense now."""

    stop: bool
    resume: bool
    abort: bool
    stop_label: str = "Stop"  # "Cancel" for a queued run: it leaves the line
    save: bool = False  # Save now
    pause: bool = False  # Pause
    continue_run: bool = False  # Continue, shown in Pause's place: the run is paused or asked to pause


def controls_for(status: RunStatus, pause_requested: bool = False) -> Controls:
    """Stop while it runs or is paused (Cancel while it waits in the queue), Abort while a process lives, Resume
    when it ended without completing (stopped, failed, aborted) and has a checkpoint; Save now while it runs or is
    paused, Pause while it runs, Continue in Pause's place while it is paused or ``pause_requested`` (not yet at
    the step's end: Continue takes the request back)."""
    state = status.state
    has_checkpoint = bool(status.checkpoints)
    takes_requests = state in REQUEST_STATES
    waits = takes_requests and (state == PAUSED or pause_requested)
    return Controls(
        stop=state in (QUEUED, *TRAINING_STATES),
        resume=status.is_resumable and has_checkpoint,
        abort=state in ACTIVE_STATES,
        stop_label="Cancel" if state == QUEUED else "Stop",
        save=takes_requests,
        pause=takes_requests and not waits,
        continue_run=waits,
    )


def header_html(status: RunStatus, run_id: str, live: str = "", lang: str = SOURCE, shown: str = "") -> str:
    """Run name, badge (its word in ``lang``) and id; ``live`` is the token the page script asks for the run's
    charts with, ``shown`` the key of what the Monitor shows with this header (studio.monitor.session)."""
    name = html.escape(str(status.name or run_id))
    return (
        f'<div class="ts-run-head" data-live="{html.escape(live)}" data-monitor="{html.escape(shown)}">'
        f'<span class="ts-run-name">{name}</span>{badge_html(status.state, lang=lang)}'
        f'<span class="ts-run-id">{html.escape(run_id)}</span></div>'
    )


def queue_html(ahead: int, lang: str = SOURCE) -> str:
    """A queued run's place in line for its devices, instead of the progress bar (in ``lang``)."""
    line = text(QUEUED_LINE, lang, place=html.escape(place_text(ahead, lang)))  # the catalog's markup, as written
    return progress_bar_html(0, f"<span>{line}</span>", "ts-state-queued ts-queue")


def run_note(status: RunStatus, now: float | None = None, lang: str = SOURCE) -> str:
    """What the state alone does not say (in ``lang``): since when a run is paused; why it ended: cancelled in the
    queue, its time limit, who aborted it, why its sweep's pruner stopped it, or that it stopped early (early
    stopping). A pruner's reason is said in ``lang`` (its templates, engine.sweeps.summary.PRUNE_REASONS); who aborted
    a run and why it stopped early are the engine's words, in English."""
    if status.state == PAUSED:
        since = status.paused_at
        if not since:
            return text(STATE_WORDS[PAUSED], lang)
        waited = format_duration((now or time.time()) - since)
        return text(PAUSED_SINCE, lang, time=time.strftime("%H:%M:%S", time.localtime(since)), waited=waited)
    if status.state == COMPLETED and status.reason:
        return status.reason
    if status.cancelled:
        return text(CANCELLED, lang)
    if limit_reached(status):
        return text(TIME_LIMIT, lang, minutes=f"{status.time_limit_s / 60:g}")
    if status.state == ABORTED:
        return status.error or text(STATE_WORDS[ABORTED], lang)
    if status.state == PRUNED:  # the pruner's reason, as the sweep's driver wrote it from its template
        return say_again(status.error, PRUNE_KEYS, lang) if status.error else text(PRUNED_NOTE, lang)
    return ""


def progress_html(status: RunStatus, feed: MetricsFeed | None, now: float | None = None, lang: str = SOURCE) -> str:
    """A progress bar with step / max_steps, epoch, elapsed time and ETA (and why it ended, when that needs
    saying), in ``lang``."""
    step, max_steps = int(status.step or 0), int(status.max_steps or 0)
    state = status.state or "unknown"
    fraction = min(1.0, step / max_steps) if max_steps > 0 else 0.0
    if state == COMPLETED:
        fraction = 1.0
    eta = None
    going = state in TRAINING_STATES and state != PAUSED  # a paused run has no time of arrival
    if going and feed is not None:
        eta = eta_seconds(step, max_steps, feed.seconds_per_step())
    epoch = status.epoch
    note = run_note(status, now, lang)
    said = {
        "step": text(STEP, lang, step=step),
        "epoch": text(EPOCH, lang, epoch=f"{epoch:.2f}" if isinstance(epoch, (int, float)) else "—"),
        "elapsed": text(ELAPSED, lang, time=run_time_text(status, now, lang)),
        "eta": text(ETA, lang, time=format_duration(eta)) if going else "",
    }
    said = {name: html.escape(words) for name, words in said.items()}
    parts = [
        f"<b>{said['step']}</b> / {max_steps if max_steps > 0 else '?'}",
        said["epoch"],
        said["elapsed"],
        said["eta"],
        f"<b>{html.escape(note)}</b>" if note else "",
    ]
    line = f"<span>{' · '.join(part for part in parts if part)}</span><span>{fraction * 100:.0f}%</span>"
    return progress_bar_html(fraction * 100, line, f"ts-state-{html.escape(state)}", decimals=1)


def stats_html(feed: MetricsFeed | None, lang: str = SOURCE) -> str:
    """The latest numbers in small cards (labelled in ``lang``): loss, best loss, eval loss, learning rate,
    tokens/s, memory. Where no eval loss will come, its card says why: a run that learns from rewards (its
    method's record) shows its latest reward in its place; a run without an eval set says it has none."""
    latest = feed.latest if feed else {}
    cards = [
        ("loss", _fmt(latest.get("loss")), ""),
        ("best_loss", _fmt(feed.best_loss if feed else None), ""),
        _eval_card(feed, latest, lang),
        ("learning_rate", _fmt(latest.get("learning_rate"), ".2e"), ""),
        ("tokens", _fmt(latest.get("tokens_per_second"), ",.0f"), ""),
        ("memory", f"{_fmt(latest.get('memory_mb'), ',.0f')} MB" if "memory_mb" in latest else "—", ""),
    ]
    body = "".join(
        f'<div class="ts-stat"><span>{html.escape(text(STATS[name], lang))}</span><b>{value}</b>'
        + (f"<small>{html.escape(note)}</small>" if note else "")
        + "</div>"
        for name, value, note in cards
    )
    return f'<div class="ts-stats">{body}</div>'


def _eval_card(feed: MetricsFeed | None, latest: dict[str, float], lang: str) -> tuple[str, str, str]:
    """The third card (name, value, note): the held-out metric that tells how the run does (the eval loss; a
    sampling method's eval reward, whose eval loss is a policy loss), or what applies where none has come."""
    held_out = feed.facts.held_out if feed is not None else "eval_loss"
    card = held_out if held_out in STATS else "eval_loss"
    if feed is None or card in latest:
        return card, _fmt(latest.get(card)), ""
    if feed.facts.learns_from_rewards:
        return "reward", _fmt(latest.get(REWARD_TOTAL)), text(IN_PLACE_OF_EVAL, lang)
    if not feed.facts.has_eval:
        return "eval_loss", "—", text(NO_EVAL_SET, lang)
    return "eval_loss", "—", ""


def _fmt(value: Any, spec: str = ".4f") -> str:
    return format(value, spec) if isinstance(value, (int, float)) else "—"


def error_html(status: RunStatus, lang: str = SOURCE) -> str:
    """For a failed run: what went wrong (the engine's error as it wrote it, the rest in ``lang``) and the end of
    its log; empty otherwise (an aborted run did not fail: its progress line says who ended it)."""
    if status.state != FAILED:
        return ""
    error = str(status.error or text(NO_MESSAGE, lang))
    code = status.exit_code
    hint = html.escape(text(HINT_RESUME if status.checkpoints else HINT_NEW, lang))
    tail = html.escape(_last_lines(status.log_tail or "", 8))
    exit_note = text(EXIT_CODE, lang, code=code) if code is not None else ""
    title = html.escape(text(FAILED_TITLE, lang, exit=exit_note, error=error))
    return (
        f'<div class="ts-error"><div class="ts-error-title">{title}</div>'
        f'<div class="ts-error-hint">{hint}</div>' + (f"<pre>{tail}</pre>" if tail.strip() else "") + "</div>"
    )


def _last_lines(text: str, count: int) -> str:
    return "\n".join(text.rstrip().splitlines()[-count:])


def empty_html(lang: str = SOURCE) -> str:
    """The Monitor's header when no run is picked, in ``lang`` (the catalog's markup, as written)."""
    return f'<div class="ts-empty">{text(EMPTY, lang)}</div>'
