"""The Sweeps tab's view of one sweep: its trials ranked, the parallel-coordinates and progress charts, the best
trial and the driver's state. No Gradio.

A poll costs one read of the sweep's study (engine.sweeps.sweep_status: SQLite, no metrics file), the driver's
lock, and the status.json of each trial that is running (its step and whether the sweep's Stop stopped it).
Its words are said in the page's language (``lang``, studio.i18n); parameter paths, metric names and values stay
as they are.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.api import (
    SWEEP_FILE,
    RunStatus,
    SpaceEntry,
    SweepError,
    SweepSummary,
    TrialSummary,
    choice_labels,
    driver_pid,
    format_params,
    format_value,
    is_run_dir,
    outcome_text,
    read_sweep_text,
    runs,
    runs_dir,
    sweep_dir,
    sweep_status,
    sweeps_dir,
)
from studio.charts import COLORS, Figure
from studio.i18n.catalog import SOURCE, key, prune_keys, say_again, text
from studio.markup import badge_html, message_html

# The trial states of optuna as the run states whose badges (assets/studio.css) the studio already shows.
BADGE_STATE = {"complete": "completed", "fail": "failed", "pruned": "pruned", "running": "running", "waiting": "queued"}
CHART_HEIGHT = 320
LOG_AXIS_RATIO = 30  # a positive parameter whose values span this factor or more gets a log axis
_FONT = {"family": "Inter, ui-sans-serif, system-ui, sans-serif", "size": 12, "color": "#374151"}
# The tab's words (studio.i18n).
COLUMNS = {name: key(f"sweeps.col.{name}") for name in ("rank", "trial", "state", "params", "run_id")}
PARALLEL, PARALLEL_EMPTY, PROGRESS, PROGRESS_EMPTY, TRIAL_AXIS, TRIALS, BEST_SO_FAR, HOVER, LOG_AXIS = (
    key(f"sweeps.chart.{name}")
    for name in (
        "parallel",
        "parallel_empty",
        "progress",
        "progress_empty",
        "trial_axis",
        "trials",
        "best",
        "hover",
        "log",
    )
)
BEST_EMPTY, BEST_HEAD, BEST_RUN = (key(f"sweeps.best.{name}") for name in ("empty", "head", "run"))
NO_STUDY, CONTINUE_HINT, DRIVER_LOG = (key(f"sweeps.status.{name}") for name in ("no_study", "hint", "log"))
TRIAL_COUNT, BEST_LINE, NONE_COMPLETED = (key(f"sweeps.progress.{name}") for name in ("trials", "best", "none"))
# A sweep's trials by state, as the line counts them (the engine's states; the words are the studio's).
PRUNE_KEYS = prune_keys()
STATE_COUNTS = {state: key(f"sweeps.progress.{state}") for state in ("complete", "pruned", "fail", "running")}


@dataclass(frozen=True)
class SweepView:
    """What a poll read: the sweep's summary (None before its driver made the study), its driver's pid (None when
    none runs) and the status of each running trial's run, by run id."""

    name: str
    summary: SweepSummary | None
    driver: int | None
    running: dict[str, RunStatus] = field(default_factory=dict)

    def key(self) -> tuple[Any, ...]:
        """Equal for two polls that would show the same, so an unchanged sweep redraws nothing."""
        trials = tuple((t.number, t.state, t.value, t.note) for t in self.summary.trials) if self.summary else None
        steps = tuple(sorted((run_id, s.state, s.step) for run_id, s in self.running.items()))
        return (self.name, trials, self.driver is not None, steps)


def load_view(workspace: Path, name: str) -> SweepView:
    """Read the sweep ``name`` of a workspace as the tab shows it."""
    pid = driver_pid(workspace, name)
    try:
        summary: SweepSummary | None = sweep_status(workspace, name)
    except SweepError:
        summary = None  # the driver has not made the study yet, or the folder holds none
    running = {}
    for trial in summary.trials if summary else []:
        run_dir = runs_dir(workspace) / trial.run_id if trial.run_id else None
        if trial.state == "running" and run_dir is not None and is_run_dir(run_dir):
            running[trial.run_id] = runs.status(run_dir)
    return SweepView(name, summary, pid, running)


def sweep_names(workspace: Path) -> list[str]:
    """The workspace's sweeps, by name (the status line says which one runs: a label would go stale)."""
    root = sweeps_dir(workspace)
    return sorted(folder.name for folder in root.iterdir() if folder.is_dir()) if root.is_dir() else []


def picked(workspace: Path, current: str | None) -> tuple[list[str], str | None]:
    """The sweep picker's choices, and the sweep to show: the current one while it exists, else a running one,
    else the first."""
    names = sweep_names(workspace)
    if current in names:
        return names, current
    running = [name for name in names if driver_pid(workspace, name) is not None]
    return names, (running or names or [None])[0]


# --- the trials table -------------------------------------------------------------------------------------------


def table_columns(metric: str, lang: str = SOURCE) -> list[str]:
    """The trials table's header in ``lang``: the objective's column is named after its metric."""
    words = {name: text(column, lang) for name, column in COLUMNS.items()}
    return [words["rank"], words["trial"], words["state"], metric, words["params"], words["run_id"]]


def trial_rows(view: SweepView, lang: str = SOURCE) -> list[list[Any]]:
    """The trials, best first (completed ones by the objective, then the rest by number): rank, number, the
    coloured badge (a running trial's step beside it; why a trial was pruned or failed on hover), the objective,
    the parameters and the run id (a click on the row opens that run in the Monitor). The states in ``lang``."""
    summary = view.summary
    if summary is None:
        return []
    rows = []
    for rank, trial in enumerate(summary.trials, start=1):
        rows.append(
            [
                rank if trial.value is not None else "-",
                trial.number,
                _state_cell(trial, view.running.get(trial.run_id or ""), summary.metric, lang),
                format_value(trial.value),
                format_params(trial.params),
                trial.run_id or "-",
            ]
        )
    return rows


def _state_cell(trial: TrialSummary, run: RunStatus | None, metric: str, lang: str = SOURCE) -> str:
    """The trial's badge; for a running trial its run's own state (stopped when the sweep was stopped) and step."""
    if trial.state == "running" and run is not None:
        step = f' <span class="ts-hint">{run.step or 0}/{run.max_steps}</span>' if run.max_steps else ""
        return badge_html(run.state, lang=lang) + step
    # Why, as the run or the pruner said it (a pruner's reason in the page's language).
    note = None if trial.value is not None else say_again(outcome_text(trial, metric), PRUNE_KEYS, lang)
    return badge_html(BADGE_STATE.get(trial.state, trial.state), note, lang)


# --- charts -----------------------------------------------------------------------------------------------------


def _layout(title: str, height: int = CHART_HEIGHT) -> dict[str, Any]:
    return {
        "title": {"text": title, "x": 0.01, "xanchor": "left", "y": 0.97, "font": {"size": 14}},
        "height": height,
        "paper_bgcolor": "white",
        "plot_bgcolor": "white",
        "font": _FONT,
        "uirevision": title,  # keeps a brushed range across live updates
    }


def _empty(layout: dict[str, Any], text: str) -> Figure:
    note = {"text": text, "showarrow": False, "xref": "paper", "yref": "paper", "x": 0.5, "y": 0.5}
    layout = {**layout, "annotations": [{**note, "font": {"size": 13, "color": "#9ca3af"}}]}
    layout["xaxis"] = layout["yaxis"] = {"visible": False}
    return {"data": [], "layout": layout, "config": {"displaylogo": False}}


def sweep_space(workspace: Path, name: str) -> dict[str, SpaceEntry]:
    """The space of a sweep as its sweep.yaml holds it, validated (choices spelt as the trials record them); {}
    when the file cannot be read. Read when the charts are redrawn, not at every poll."""
    folder = sweep_dir(workspace, name)
    try:
        config, _ = read_sweep_text((folder / SWEEP_FILE).read_text(encoding="utf-8"), folder)
    except (OSError, ValueError):  # ConfigError is a ValueError
        return {}
    return dict(config.space)


def parallel_figure(
    summary: SweepSummary | None, space: Mapping[str, SpaceEntry] | None = None, lang: str = SOURCE
) -> Figure:
    """Parallel coordinates of the completed trials: an axis per parameter (every choice of a choices entry as a
    tick, a log axis for a log range or a wide positive one, words and switches as ticks) and the objective last,
    each line coloured by the objective. Its words in ``lang``."""
    space = space or {}
    layout = _layout(text(PARALLEL, lang))
    done = [trial for trial in (summary.trials if summary else []) if trial.value is not None]
    if summary is None or not done:
        return _empty(layout, text(PARALLEL_EMPTY, lang))
    paths = list(dict.fromkeys(path for trial in done for path in trial.params))
    values_of = {path: [trial.params.get(path) for trial in done] for path in paths}
    dimensions = [_dimension(path, values_of[path], space.get(path), lang) for path in paths]
    values = [trial.value for trial in done]
    dimensions.append({"label": summary.metric, "values": values, "range": _span(values)})
    line = {
        "color": values,
        "colorscale": "Viridis",
        "reversescale": summary.direction == "minimize",  # the best trials in the bright colour either way
        "showscale": True,
        "colorbar": {"title": {"text": summary.metric, "side": "right"}, "thickness": 12},
    }
    layout["margin"] = {"l": 90, "r": 40, "t": 70, "b": 24}  # room for the first axis's label
    return {
        "data": [{"type": "parcoords", "line": line, "dimensions": dimensions, "labelfont": {"size": 12}}],
        "layout": layout,
        "config": {"displaylogo": False},
    }


def _dimension(path: str, values: list[Any], entry: SpaceEntry | None = None, lang: str = SOURCE) -> dict[str, Any]:
    """One axis: a choices entry's choices in order; numbers as they are, or their log10 with the real values as
    ticks; anything else as the values seen."""
    labels = choice_labels(entry) if entry is not None and not entry.is_range else []
    if labels and all(value in labels for value in values):
        return _categories(path, values, labels)
    numbers = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if len(numbers) != len(values):
        return _categories(path, values, sorted({_label(v) for v in values}))
    low, high = min(numbers), max(numbers)
    if low > 0 and ((entry is not None and entry.log) or high / low >= LOG_AXIS_RATIO):
        logs = [math.log10(v) for v in numbers]
        ticks = list(range(math.floor(min(logs)), math.ceil(max(logs)) + 1))
        return {
            "label": text(LOG_AXIS, lang, path=path),
            "values": logs,
            "range": [ticks[0], ticks[-1]],
            "tickvals": ticks,
            "ticktext": [f"{10.0**tick:g}" for tick in ticks],
        }
    return {"label": path, "values": numbers, "range": _span(numbers)}


def _categories(path: str, values: list[Any], labels: list[Any]) -> dict[str, Any]:
    """An axis with one tick per label, each value at its label's place."""
    texts = [_label(label) for label in labels]
    return {
        "label": path,
        "values": [texts.index(_label(value)) for value in values],
        "range": [0, max(1, len(texts) - 1)],
        "tickvals": list(range(len(texts))),
        "ticktext": texts,
    }


def _label(value: Any) -> str:
    return "true" if value is True else "false" if value is False else "none" if value is None else str(value)


def _span(values: list[float]) -> list[float]:
    """An axis range around the values (a little room when they are all the same)."""
    low, high = min(values), max(values)
    if low != high:
        return [low, high]
    pad = abs(low) * 0.05 or 0.5
    return [low - pad, high + pad]


def progress_figure(summary: SweepSummary | None, lang: str = SOURCE) -> Figure:
    """The objective of each completed trial against its number, with the best so far as a step line; its words
    in ``lang``."""
    layout = _layout(text(PROGRESS, lang))
    done = sorted((t for t in (summary.trials if summary else []) if t.value is not None), key=lambda t: t.number)
    if summary is None or not done:
        return _empty(layout, text(PROGRESS_EMPTY, lang))
    xs, ys = [t.number for t in done], [t.value for t in done]
    better = min if summary.direction == "minimize" else max
    best, running_best = [], None
    for value in ys:
        running_best = value if running_best is None else better(running_best, value)
        best.append(running_best)
    axis = {"gridcolor": "#eef0f4", "zeroline": False, "linecolor": "#d4d7de"}
    layout.update(
        margin={"l": 60, "r": 16, "t": 40, "b": 44},
        xaxis={**axis, "title": {"text": text(TRIAL_AXIS, lang)}, **({"dtick": 1} if xs[-1] - xs[0] < 12 else {})},
        yaxis={**axis, "title": {"text": summary.metric}},
        legend={"orientation": "h", "x": 1, "xanchor": "right", "y": 1.02, "yanchor": "bottom"},
        hovermode="closest",
    )
    hover = [
        f"{html.escape(text(HOVER, lang, number=t.number))}<br>{html.escape(format_params(t.params))}" for t in done
    ]
    trials = {"type": "scatter", "mode": "markers", "name": text(TRIALS, lang), "x": xs, "y": ys, "text": hover}
    trials["marker"] = {"size": 9, "color": COLORS[0]}
    line = {"type": "scatter", "mode": "lines", "name": text(BEST_SO_FAR, lang), "x": xs, "y": best}
    line["line"] = {"shape": "hv", "color": COLORS[1], "width": 2}
    return {"data": [trials, line], "layout": layout, "config": {"displaylogo": False}}


# --- best trial and the driver's state --------------------------------------------------------------------------


def best_html(summary: SweepSummary | None, lang: str = SOURCE) -> str:
    """The best trial so far: its objective, values and run; a placeholder before one completed. In ``lang``."""
    best = summary.best if summary else None
    if summary is None or best is None:
        return f'<div class="ts-empty">{html.escape(text(BEST_EMPTY, lang))}</div>'
    params = "".join(
        f"<li><code>{html.escape(path)}</code> = <b>{html.escape(_shown(value))}</b></li>"
        for path, value in best.params.items()
    )
    head = text(BEST_HEAD, lang, number=best.number, metric=html.escape(summary.metric), value=format_value(best.value))
    run = html.escape(text(BEST_RUN, lang, run_id=best.run_id or "-"))
    return (
        f'<div class="ts-sweep-best"><div class="ts-sweep-best-head">{head}</div>'
        f'<ul>{params}</ul><div class="ts-hint">{run}</div></div>'
    )


def _shown(value: Any) -> str:
    return format_value(value) if isinstance(value, float) else _label(value)


def progress_line(summary: SweepSummary, lang: str = SOURCE) -> str:
    """One sweep in a line, as engine.sweeps.summary.progress_line writes it for the CLI, in ``lang``: trials done
    of its target, by state, and the best objective so far."""
    by_state = ", ".join(
        text(words, lang, count=summary.count(state)) for state, words in STATE_COUNTS.items() if summary.count(state)
    )
    best = summary.best
    if best:
        found = text(BEST_LINE, lang, metric=summary.metric, value=format_value(best.value), number=best.number)
    else:
        found = text(NONE_COMPLETED, lang)
    counted = text(TRIAL_COUNT, lang, done=summary.done, target=summary.target) + (f" ({by_state})" if by_state else "")
    return f"{summary.name}  {counted}  {found}"


def status_html(view: SweepView, log_tail: str = "", lang: str = SOURCE) -> str:
    """One line on the sweep: running (or starting) with its progress, finished, or stopped with what Continue
    does; when no driver runs, the end of its log (why it stopped, an error; as the driver wrote it). In
    ``lang``."""
    summary = view.summary
    progress = html.escape(progress_line(summary, lang)) if summary else html.escape(view.name)
    if view.driver is not None:
        doing = "running" if summary else "starting"
        return f'<div class="ts-summary">{badge_html(doing, lang=lang)} {progress}</div>'
    if summary is None:
        return message_html(text(NO_STUDY, lang, name=view.name), "warn") + _log_block(log_tail, lang)
    if summary.done >= summary.target:
        return f'<div class="ts-summary">{badge_html("completed", lang=lang)} {progress}</div>'
    hint = f'<span class="ts-hint">{html.escape(text(CONTINUE_HINT, lang))}</span>'
    stopped = badge_html("stopped", lang=lang)
    return f'<div class="ts-summary">{stopped} {progress} {hint}</div>' + _log_block(log_tail, lang)


def _log_block(log: str, lang: str = SOURCE) -> str:
    if not log.strip():
        return ""
    summary = html.escape(text(DRIVER_LOG, lang))
    return f'<details class="ts-sweep-log"><summary>{summary}</summary><pre>{html.escape(log)}</pre></details>'
