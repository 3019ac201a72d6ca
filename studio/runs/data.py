"""The Runs tab's data: the run list, compared curves, config differences, deletion. No Gradio here.

The list is refreshed every few seconds by every open page, so ``RunIndex`` keeps, per run, the byte offset
into metrics.jsonl and the last / best loss read so far: a refresh reads each run's status and only the
metrics lines written since the previous refresh (``engine.runs.list_runs`` re-reads every metrics file).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from engine.api import (
    COMPLETED,
    CONFIG_FILE,
    OPEN_STATES,
    PRUNED,
    ConfigError,
    RunConfig,
    RunStatus,
    RunSummary,
    evaluation_key,
    evaluations,
    iter_metrics,
    load_config,
    method_charts,
    method_of,
    runs,
    runs_dir,
    source_label,
)
from studio.charts import HELD_OUT, Point
from studio.i18n import catalog
from studio.i18n.catalog import SOURCE, text
from studio.markup import run_time_text
from studio.path_guard import resolve_run

# The table's columns: as the API names them (studio.runs.api), and their keys for the page (studio.i18n).
COLUMNS = [
    "Name",
    "Method",
    "State",
    "Step",
    "Last loss",
    "Best loss",
    "Started",
    "Duration",
    "Eval: base → tuned",
    "Run id",
]
COLUMN_WORDS = [
    catalog.key(f"runs.column.{name}")
    for name in ("name", "method", "state", "step", "last_loss", "best_loss", "started", "duration", "eval", "run_id")
]
STATE_COLUMN = COLUMNS.index("State")  # where the page puts the state's coloured badge
STARTED_FROM, STARTED_FORMAT = catalog.key("runs.from"), catalog.key("runs.started_format")


def columns(lang: str = SOURCE) -> list[str]:
    """The table's headers in ``lang`` (COLUMNS in English)."""
    return [text(name, lang) for name in COLUMN_WORDS]


@dataclass(frozen=True)
class RunRow(RunSummary):
    """One run as the list shows it: the engine's line of the run list and what the studio's list adds."""

    earlier_seconds: float | None = None  # how long the run trained before its latest resume
    evaluation: str = ""  # the newest evaluation's summary, base → tuned (engine.evaluate.summary_text)
    owner: str | None = None  # who started it, in demo mode (studio.demo.ownership.owner_tag)
    started_from: str = ""  # the run it started from (model.init_from), as engine.runs.lineage.source_label says
    # why it ended, when the state alone does not say: a pruned run's reason (its sweep's pruner), an early stop
    note: str = ""
    method: str = ""  # the method it trains with (its config's ``method``); empty for a config that cannot be read

    def cells(self, now: float | None = None, lang: str = SOURCE) -> list[Any]:
        """The table cells, in COLUMNS order, their words in ``lang`` (the state stays the value the badge is made
        from; the evaluation's summary is the engine's)."""
        # When the run first started, not its latest resume (runs made before first_started_at was kept: the
        # latest start).
        started = self.first_started_at or self.started_at or self.created_at
        return [
            text(STARTED_FROM, lang, name=self.name, source=self.started_from) if self.started_from else self.name,
            self.method,
            self.state,
            f"{self.step} / {self.max_steps}" if self.max_steps > 0 else str(self.step),
            _round(self.last_loss),
            _round(self.best_loss),
            time.strftime(text(STARTED_FORMAT, lang), time.localtime(started)) if started else "—",
            run_time_text(self.timing(), now, lang),
            self.evaluation,
            self.run_id,
        ]

    def timing(self) -> RunStatus:
        """The status fields the run's elapsed time is worked out from (one rule with the Monitor's)."""
        return RunStatus(
            state=self.state, started_at=self.started_at, ended_at=self.ended_at, earlier_seconds=self.earlier_seconds
        )


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


@dataclass
class _Tail:
    offset: int = 0
    last_loss: float | None = None
    best_loss: float | None = None
    evaluations_mtime: int | None = None  # of the run's evaluations/ directory when its summary was read
    evaluation: str = ""
    started_from: str | None = None  # read once: a run's config does not change after it is created
    method: str | None = None  # read once, likewise
    logged: set[tuple[str, str]] = field(default_factory=set)  # (event, key) of every number the run logged


class RunIndex:
    """Summaries of a workspace's runs, kept up to date by reading only new metrics lines. Thread-safe."""

    def __init__(self, workspace: Path):
        self.workspace = Path(workspace)
        self._tails: dict[Path, _Tail] = {}
        self._lock = threading.Lock()

    def rows(self) -> list[RunRow]:
        """Every run, newest first."""
        dirs = runs.run_dirs(self.workspace)
        with self._lock:
            for gone in set(self._tails) - set(dirs):
                del self._tails[gone]
            rows = [self._row(run_dir) for run_dir in dirs]
        return sorted(rows, key=lambda row: (row.created_at or 0, row.run_id), reverse=True)

    def metric_choices(self, run_dirs: Iterable[Path]) -> list[tuple[str, str]]:
        """The Compare chart's Metric choices for these runs, as ``compare_curves`` gives them (the two losses and
        each method metric one of them logged), from what the list has read of their metrics: no file is read
        again, so the picker can follow the runs as they are picked."""
        metrics = compare_metrics()
        listed = [runs_dir(self.workspace) / Path(run_dir).name for run_dir in run_dirs]  # as the list names them
        with self._lock:
            tails = [self._tails.get(run_dir) or self._read(run_dir) for run_dir in listed]
        logged = set().union(*(tail.logged for tail in tails))
        return metric_choices(metrics, [value for value, m in metrics.items() if (m.event, m.key) in logged])

    def _read(self, run_dir: Path) -> _Tail:
        """The tail of a run the list has not read yet (call with the lock held)."""
        self._row(run_dir)
        return self._tails[run_dir]

    def _row(self, run_dir: Path) -> RunRow:
        status = runs.status(run_dir)
        tail = self._tails.setdefault(run_dir, _Tail())
        events, tail.offset = runs.read_metrics(run_dir, tail.offset)
        for event in events:
            kind = event.get("event", "train")
            tail.logged.update((kind, key) for key, value in event.items() if _finite(value))
            loss = event.get("loss")
            if event.get("event") == "train" and isinstance(loss, (int, float)):
                tail.last_loss = loss
                tail.best_loss = loss if tail.best_loss is None else min(tail.best_loss, loss)
        _refresh_evaluation(run_dir, tail)
        if tail.started_from is None:
            init_from = (read_config(run_dir).get("model") or {}).get("init_from")
            tail.started_from = source_label(init_from, self.workspace) if isinstance(init_from, str) else ""
        if tail.method is None:
            config = run_config(run_dir)
            tail.method = method_of(config).name if config is not None else ""
        return RunRow.from_status(
            run_dir,
            status,
            tail.last_loss,
            tail.best_loss,
            earlier_seconds=status.earlier_seconds,
            evaluation=tail.evaluation,
            owner=status.owner,
            started_from=tail.started_from,
            note=run_note(status),
            method=tail.method,
        )


def _refresh_evaluation(run_dir: Path, tail: _Tail) -> None:
    """Re-read the newest evaluation only when the evaluations directory changed (a result is renamed into it)."""
    try:
        mtime = evaluations.evaluations_dir(run_dir).stat().st_mtime_ns
    except FileNotFoundError:
        mtime = None
    if mtime != tail.evaluations_mtime:
        tail.evaluations_mtime = mtime
        tail.evaluation = evaluations.summary_text(evaluations.latest_evaluation(run_dir)) if mtime else ""


def pick_initial_run(workspace: Path, visible: Callable[[RunStatus], bool] | None = None) -> str | None:
    """The run a freshly loaded page shows: the newest active run, else the newest run, else None; only runs
    whose status ``visible`` accepts (in demo mode, the visitor's own).

    Reads statuses only (no metrics), so a page load costs the same however long the runs are.
    """
    statuses = [(run_dir, runs.status(run_dir)) for run_dir in runs.run_dirs(workspace)]
    statuses = [(run_dir, status) for run_dir, status in statuses if visible is None or visible(status)]
    statuses.sort(key=lambda item: (item[1].created_at or 0, item[0].name), reverse=True)
    active = [run_dir for run_dir, status in statuses if status.state in OPEN_STATES]
    newest = active or [run_dir for run_dir, _ in statuses]
    return str(newest[0].resolve()) if newest else None


def delete_run(workspace: Path, run_id: str) -> None:
    """Remove a run directory with its checkpoints; refuses (RunError) while the run is going."""
    runs.delete(resolve_run(workspace, run_id))


TRAIN_LOSS, EVAL_LOSS = "train loss", "eval loss"  # the Compare chart's two choices that every run may have


@dataclass(frozen=True)
class CompareMetric:
    """One choice of the Compare chart's Metric picker: the metrics.jsonl key of which events it draws, and the
    chart's title and y-axis label."""

    event: str  # "train" or "eval"
    key: str
    title: str
    unit: str

    @property
    def sparse(self) -> bool:
        """Logged at evaluations only (every eval_steps): drawn with markers, not smoothed."""
        return self.event == "eval"


def compare_metrics() -> dict[str, CompareMetric]:
    """Every metric the Compare chart can draw, by the picker's value: train and eval loss, then each method's
    own charts (from the method registry), as the trainer logs them on train events, then what evaluations log of
    them (eval_reward: GRPO runs compared on their held-out reward)."""
    found = {
        TRAIN_LOSS: CompareMetric("train", "loss", "Train loss", "loss"),
        EVAL_LOSS: CompareMetric("eval", "eval_loss", "Eval loss", "loss"),
    }
    for key, chart in method_charts().items():
        found.setdefault(key, CompareMetric("train", key, chart.title, chart.unit))
    for key, chart in method_charts().items():
        held_out = evaluation_key(key)
        found.setdefault(held_out, CompareMetric("eval", held_out, f"{chart.title} · eval", chart.unit))
    return found


# The Compare chart's words (studio.i18n): the titles of the two losses (a method's metric is titled by its own
# chart's key, chart.<metric>), and the picker's names of them, as the Monitor's loss chart names them.
TITLE_WORDS = {TRAIN_LOSS: catalog.key("runs.compare.train_loss"), EVAL_LOSS: catalog.key("runs.compare.eval_loss")}
CHOICE_WORDS = {TRAIN_LOSS: catalog.key("chart.train_loss"), EVAL_LOSS: catalog.key("chart.eval_loss")}


def _said(name: str, english: str, lang: str) -> str:
    """``name``'s text in ``lang``; ``english`` itself for a metric the catalog does not know."""
    return text(name, lang) if name in catalog.english() else english


def metric_words(value: str, metric: CompareMetric, lang: str = SOURCE) -> tuple[str, str]:
    """The Compare chart's title and y-axis label for the picker's ``value``, in ``lang``."""
    return _title(value, metric.title, TITLE_WORDS, lang), _said(f"unit.{metric.unit}", metric.unit, lang)


def choice_labels(choices: list[tuple[str, str]], lang: str = SOURCE) -> list[tuple[str, str]]:
    """The Metric picker's (title, value) choices with their titles in ``lang``."""
    return [(_title(value, title, CHOICE_WORDS, lang), value) for title, value in choices]


def _title(value: str, english: str, words: Mapping[str, str], lang: str) -> str:
    """A choice's title in ``lang``: the losses' own words, a method chart's title, or what evaluations log of a
    method's metric as that chart's title marked "eval"."""
    if value in words:
        return _said(words[value], english, lang)
    trained = next((key for key in method_charts() if evaluation_key(key) == value), None)
    if trained is not None:
        return f"{_said(f'chart.{trained}', method_charts()[trained].title, lang)} · {text(HELD_OUT, lang)}"
    return _said(f"chart.{value}", english, lang)


@dataclass
class Comparison:
    """What the Compare chart draws: one metric's curve per run, and the Metric picker's choices."""

    metric: str  # the picker's value drawn
    chart: CompareMetric
    curves: dict[str, list[Point]]  # by run label
    choices: list[tuple[str, str]]  # (title, value)


def compare_curves(run_dirs: Mapping[str, Path], metric: str = TRAIN_LOSS) -> Comparison:
    """The curves of ``metric`` of the runs (by label; one read of each metrics file) and the picker's choices:
    the two losses and each method metric at least one of the runs logged. A metric that is not a choice falls
    back to train loss."""
    metrics = compare_metrics()
    per_run = {label: run_curves(run_dir, metrics) for label, run_dir in run_dirs.items()}
    logged = {value for curves in per_run.values() for value, points in curves.items() if points}
    choices = metric_choices(metrics, logged)
    chosen = metric if metric in {value for _, value in choices} else TRAIN_LOSS
    curves = {label: run[chosen] for label, run in per_run.items()}
    return Comparison(metric=chosen, chart=metrics[chosen], curves=curves, choices=choices)


def metric_choices(metrics: Mapping[str, CompareMetric], logged: Iterable[str]) -> list[tuple[str, str]]:
    """The picker's (title, value) choices: train and eval loss always, then the method metrics in ``logged``."""
    losses, logged = (TRAIN_LOSS, EVAL_LOSS), set(logged)
    own = [(metric.title, value) for value, metric in metrics.items() if value in logged and value not in losses]
    return [(loss, loss) for loss in losses] + own


def run_curves(run_dir: Path, metrics: Mapping[str, CompareMetric]) -> dict[str, list[Point]]:
    """Each metric's (step, value) points of one run, by the picker's value, from one read of metrics.jsonl
    (an empty list for a metric the run never logged)."""
    events = list(iter_metrics(run_dir))
    return {value: _points(events, metric.event, metric.key) for value, metric in metrics.items()}


def metric_curve(run_dir: Path, event: str, key: str) -> list[Point]:
    """(step, value) of every ``event`` event ("train", "eval") that logged a finite number under ``key``."""
    return _points(iter_metrics(run_dir), event, key)


def loss_curve(run_dir: Path) -> list[Point]:
    """(step, loss) of every train event (read once per comparison, not per poll)."""
    return metric_curve(run_dir, "train", "loss")


def _points(events: Iterable[dict[str, Any]], event: str, key: str) -> list[Point]:
    return [(e.get("step", 0), e[key]) for e in events if e.get("event") == event and _finite(e.get(key))]


def _finite(value: Any) -> bool:
    """A number a chart can draw (not a bool, NaN or infinity)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def flatten(mapping: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """{"train": {"learning_rate": 1e-4}} -> {"train.learning_rate": 1e-4}."""
    flat: dict[str, Any] = {}
    for key, value in mapping.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            flat.update(flatten(value, f"{path}."))
        else:
            flat[path] = value
    return flat


def config_diff(configs: dict[str, dict[str, Any]]) -> tuple[list[str], list[list[Any]]]:
    """The config fields whose values differ between runs: headers ["field", run...] and one row per field."""
    flat = {name: flatten(config or {}) for name, config in configs.items()}
    keys = sorted({key for values in flat.values() for key in values})
    rows = []
    for key in keys:
        values = [values.get(key) for values in flat.values()]
        if any(value != values[0] for value in values[1:]):
            rows.append([key, *(_cell(value) for value in values)])
    return ["field", *configs], rows


def _cell(value: Any) -> str:
    """A config value as short text for the table (lists and None included)."""
    if value is None:
        return "—"
    if isinstance(value, (list, dict)):
        return yaml.safe_dump(value, default_flow_style=True).strip()
    return str(value)


def run_config(run_dir: Path) -> RunConfig | None:
    """A run's config, checked (None when it cannot be read)."""
    try:
        return load_config(run_dir / CONFIG_FILE)
    except (ConfigError, OSError):
        return None


def read_config(run_dir: Path) -> dict[str, Any]:
    """A run's config.yaml as a mapping ({} when unreadable)."""
    try:
        return yaml.safe_load((run_dir / CONFIG_FILE).read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        return {}


def run_note(status: RunStatus) -> str:
    """The badge's hover text: why a pruned run was pruned, or how a completed one stopped early."""
    if status.state == PRUNED:
        return status.error or ""
    if status.state == COMPLETED:
        return status.reason or ""
    return ""
