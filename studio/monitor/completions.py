"""The Monitor's "Sample completions" panel, without Gradio: which runs have it, the samples it shows, the table.

A GRPO run writes what it generated at its logging steps to ``completions.jsonl`` (engine.store.completions). The
panel shows the newest of them, or the best, the worst or the unrewarded ones by one reward or the total, as an
HTML table in which every text is escaped. It refreshes on a timer only while its section is open, and cheaply:

- ``SampleCache``: the samples of a run, read again only when the files' size, modification time or inode
  changed, once for the whole studio however many pages watch the run;
- ``CompletionsPanel``: one per browser tab (in a ``gr.State``); it remembers what it sent and returns None for
  every output that would not change, which the Gradio layer turns into gr.skip().

The run is the Monitor's own (the session's current run, which only the studio sets); in demo mode the panel
also shows nothing of a run whose status names another owner.
"""

from __future__ import annotations

import html
import math
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.api import (
    COMPLETIONS_FILE,
    CONFIG_FILE,
    METHODS,
    OLDER_COMPLETIONS_FILE,
    ConfigError,
    latest_completions,
    load_config,
    read_status,
)
from studio.demo.caller import Caller
from studio.i18n.catalog import SOURCE, key, text
from studio.monitor.live import file_stamp

TOTAL = "total"  # the weighted sum of the rewards (a sample's ``reward``)
NEWEST, BEST, WORST, ZERO = "newest", "best", "worst", "zero reward"
SHOW_CHOICES = (NEWEST, BEST, WORST, ZERO)
# What the page shows for the values above, and the table's words (studio.i18n): a reward's own name stays as is.
TOTAL_WORD = key("monitor.completions.total")
SHOW_WORDS = {
    show: key(f"monitor.completions.{name}")
    for show, name in zip(SHOW_CHOICES, ("newest", "best", "worst", "zero"), strict=True)
}
COLUMN_WORDS = {name: key(f"monitor.completions.{name}") for name in ("step", "prompt", "completion")}
EMPTY_WORDS = key("monitor.completions.empty")
DEFAULT_SAMPLES = 24
READ_LIMIT = 400  # the newest samples the panel picks from: 25 logging steps of GRPO's 16
MAX_TEXT_CHARS = 2_000  # of a prompt or completion in a cell; longer ones end in an ellipsis


# --- which runs --------------------------------------------------------------------------------------------------


def run_samples_completions(run_dir: Path) -> bool:
    """Whether the run's method writes completions.jsonl (Method.writes_samples)."""
    method = METHODS.get(_METHODS.method(Path(run_dir)) or "")
    return method is not None and method.writes_samples


class _MethodCache:
    """The method of each run's config.yaml, parsed again only when the file changes (a stat call per ask)."""

    def __init__(self, size: int = 64) -> None:
        self.lock = threading.Lock()
        self.size = size
        self._methods: OrderedDict[Path, tuple[tuple[int, int, int], str | None]] = OrderedDict()

    def method(self, run_dir: Path) -> str | None:
        path = run_dir / CONFIG_FILE
        stamp = file_stamp(path)
        with self.lock:
            held = self._methods.get(run_dir)
            if held is not None and held[0] == stamp:
                return held[1]
        try:
            method: str | None = load_config(path).method
        except (ConfigError, OSError, ValueError):
            method = None
        with self.lock:
            self._methods[run_dir] = (stamp, method)
            self._methods.move_to_end(run_dir)
            while len(self._methods) > self.size:
                self._methods.popitem(last=False)
        return method


_METHODS = _MethodCache()


# --- reading ----------------------------------------------------------------------------------------------------


def samples_stamp(run_dir: Path) -> tuple[int, ...]:
    """Changes whenever the trainer appends samples or rotates the file (size, mtime, inode of both files)."""
    return (*file_stamp(run_dir / COMPLETIONS_FILE), *file_stamp(run_dir / OLDER_COMPLETIONS_FILE))


class SampleCache:
    """The newest READ_LIMIT samples of each run, by the stamp of its files; ``reads`` counts the file reads."""

    def __init__(self, size: int = 8) -> None:
        self.lock = threading.Lock()
        self.size = size
        self.reads = 0
        self._held: OrderedDict[Path, tuple[tuple[int, ...], list[dict[str, Any]]]] = OrderedDict()

    def samples(self, run_dir: Path, stamp: tuple[int, ...] | None = None) -> list[dict[str, Any]]:
        """The run's samples, oldest first: the held ones while the files are unchanged, else read again."""
        run_dir = Path(run_dir)
        stamp = samples_stamp(run_dir) if stamp is None else stamp
        with self.lock:
            held = self._held.get(run_dir)
            if held is not None and held[0] == stamp:
                self._held.move_to_end(run_dir)
                return held[1]
            samples = latest_completions(run_dir, READ_LIMIT) if any(stamp) else []
            self.reads += 1
            self._held[run_dir] = (stamp, samples)
            self._held.move_to_end(run_dir)
            while len(self._held) > self.size:
                self._held.popitem(last=False)
            return samples


SAMPLES = SampleCache()  # the studio's one cache


# --- picking and the table --------------------------------------------------------------------------------------


def reward_names(samples: list[dict[str, Any]]) -> list[str]:
    """Every reward named in the samples, in the order they first appear."""
    names: dict[str, None] = {}
    for sample in samples:
        rewards = sample.get("rewards")
        if isinstance(rewards, dict):
            names.update(dict.fromkeys(str(name) for name in rewards))
    return list(names)


def reward_choices(samples: list[dict[str, Any]]) -> list[str]:
    """The Reward dropdown's choices: the total, then each reward."""
    return [TOTAL, *(name for name in reward_names(samples) if name != TOTAL)]


def reward_labels(choices: list[str], lang: str = SOURCE) -> list[tuple[str, str]]:
    """The Reward dropdown's (label, value) pairs: the total named in ``lang``, each reward by its own name."""
    return [(text(TOTAL_WORD, lang) if choice == TOTAL else choice, choice) for choice in choices]


def score(sample: dict[str, Any], reward: str) -> float | None:
    """The sample's score by ``reward`` (TOTAL: the weighted sum); None when it has none or it is not finite."""
    if reward == TOTAL:
        value = sample.get("reward")
    else:
        rewards = sample.get("rewards")
        value = rewards.get(reward) if isinstance(rewards, dict) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def pick(samples: list[dict[str, Any]], reward: str, show: str, count: int) -> list[dict[str, Any]]:
    """The ``count`` samples to show, from samples given oldest first: the newest first (``newest``, and
    ``zero reward``: those whose ``reward`` is 0 or missing), or sorted by ``reward`` (``best`` highest first,
    ``worst`` lowest first; unscored ones last, ties newest first)."""
    count = max(1, int(count))
    newest = list(reversed(samples))
    if show == ZERO:
        return [sample for sample in newest if score(sample, reward) in (0.0, None)][:count]
    if show in (BEST, WORST):
        scored = [sample for sample in newest if score(sample, reward) is not None]
        unscored = [sample for sample in newest if score(sample, reward) is None]
        scored.sort(key=lambda sample: score(sample, reward), reverse=show == BEST)  # stable: newest first in ties
        return (scored + unscored)[:count]
    return newest[:count]


def table_rows(samples: list[dict[str, Any]], names: list[str]) -> list[list[Any]]:
    """One row per sample: step, prompt, completion, and where there are rewards (``names``) each of them and the
    total (None where unscored); a method that learns from no reward (distill) has no such columns."""
    return [
        [
            sample.get("step"),
            str(sample.get("prompt") or ""),
            str(sample.get("completion") or ""),
            *((*(score(sample, name) for name in names), score(sample, TOTAL)) if names else ()),
        ]
        for sample in samples
    ]


def table_html(rows: list[list[Any]], names: list[str], lang: str = SOURCE) -> str:
    """The rows as an HTML table (its headers in ``lang``, the rewards by their names, then the total where there
    are rewards); every text is escaped, long texts are cut."""
    if not rows:
        return f'<div class="ts-empty">{html.escape(text(EMPTY_WORDS, lang))}</div>'
    columns = [text(words, lang) for words in COLUMN_WORDS.values()]
    headers = [*columns, *names, *([text(TOTAL_WORD, lang)] if names else [])]
    head = "".join(f'<th style="text-align:left;padding:4px 8px">{html.escape(name)}</th>' for name in headers)
    body = "".join(f"<tr>{''.join(_cell(value, column) for column, value in enumerate(row))}</tr>" for row in rows)
    return (
        '<div class="ts-completions" style="max-height:36em;overflow:auto">'
        f'<table style="width:100%;border-collapse:collapse;font-size:13px"><thead><tr>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table></div>"
    )


def _cell(value: Any, column: int) -> str:
    style = "padding:4px 8px;border-top:1px solid var(--border-color-primary);vertical-align:top"
    if column in (1, 2):  # prompt, completion: as written, line breaks kept
        text = value if len(value) <= MAX_TEXT_CHARS else value[:MAX_TEXT_CHARS] + "…"
        return f'<td style="{style};white-space:pre-wrap;word-break:break-word">{html.escape(text)}</td>'
    return f'<td style="{style};font-variant-numeric:tabular-nums">{html.escape(_number(value))}</td>'


def _number(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


# --- one browser tab's panel -------------------------------------------------------------------------------------


@dataclass
class PanelUpdate:
    """New values for the panel's outputs; None means unchanged (send nothing)."""

    visible: bool | None = None  # the accordion
    choices: list[str] | None = None  # the Reward dropdown's choices, with ``reward`` as its value (shown only
    # where the samples have rewards to choose among: a distill run's have none)
    reward: str = TOTAL
    table: str | None = None
    polling: bool | None = None  # whether the panel's timer ticks: while it is open and shown


class CompletionsPanel:
    """What one browser tab's panel has shown: whether it is open, and a key per output of what was sent."""

    def __init__(self) -> None:
        self.lock = threading.Lock()  # a tick and a filter change may run at the same time
        self.open = False
        self._sent: dict[str, Any] = {}

    def update(
        self,
        caller: Caller,
        run_dir: str | None,
        reward: str | None = TOTAL,
        show: str | None = NEWEST,
        count: Any = DEFAULT_SAMPLES,
        force: bool = False,
        opened: bool | None = None,
    ) -> PanelUpdate:
        """The outputs that changed since the last call (all of them with ``force``, and the words after a change
        of the caller's language); ``opened``: the section was just opened (True) or closed (False). The samples
        are read only while the panel is open and only when their files changed (SAMPLES); in demo mode only of
        the caller's own run, their paths as the visitor knows them."""
        lang = caller.language
        with self.lock:
            if opened is not None:
                self.open = opened
            if force:
                self._sent = {}
            run = Path(run_dir) if run_dir else None
            visible = run is not None and _visible_to(run, caller) and run_samples_completions(run)
            update = PanelUpdate()
            self._put(update, "visible", visible, visible)
            self._put(update, "polling", self.open and visible, self.open and visible)
            if not (visible and self.open):
                return update
            stamp = samples_stamp(run)
            samples = SAMPLES.samples(run, stamp)
            choices = reward_choices(samples)
            reward = reward if reward in choices else TOTAL
            update.reward = reward
            self._put(update, "choices", (str(run), tuple(choices), lang), choices)  # labelled in ``lang``
            show = show if show in SHOW_CHOICES else NEWEST
            count = _count(count)
            key = (str(run), stamp, reward, show, count, lang)
            if self._sent.get("table", object()) != key:
                self._sent["table"] = key
                names = reward_names(samples)
                rows = caller.shown(table_rows(pick(samples, reward, show, count), names))
                update.table = table_html(rows, names, lang)
            return update

    def _put(self, update: PanelUpdate, name: str, key: Any, value: Any) -> None:
        if self._sent.get(name, object()) != key:
            self._sent[name] = key
            setattr(update, name, value)


def _visible_to(run_dir: Path, caller: Caller) -> bool:
    """Whether the caller may see the run's samples: always outside demo mode; in demo mode only their own run's
    (the Monitor's current run is already one of theirs: this refuses any other all the same)."""
    return not caller.policy.enabled or caller.owns(read_status(run_dir).owner)


def _count(value: Any) -> int:
    """The Samples box as a count from 1 to READ_LIMIT (the default when empty or not a number)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return DEFAULT_SAMPLES
    if not math.isfinite(number):
        return DEFAULT_SAMPLES
    return max(1, min(READ_LIMIT, int(number)))
