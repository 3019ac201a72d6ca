"""The Sweeps tab's builder: which fields a sweep may vary, a first range for each, and the sweep YAML it edits.

The YAML is the source of truth. Each widget changes one key of it (an entry of the space, the objective, the
trials, ...) and leaves the rest as the person wrote it; the whole text is what gets validated and started
(engine.sweeps.control.read_sweep_text). No Gradio here.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from engine.api import (
    ConfigError,
    EntryProblem,
    Problem,
    RunConfig,
    SweepConfig,
    compact_base,
    default_objective,
    entry_field,
    find_field,
    known_metric,
    objective_metrics,
    parse_config,
    read_sweep_text,
    sweep_yaml,
    sweeps_dir,
)
from studio.form.schema import FieldSpec, leaf_specs
from studio.i18n.catalog import SaidError, key
from studio.path_guard import ASSETS_DIR, SERVER_PATH_FIELDS, allowed_roots, guard_config, path_problem

SWEEP_PRESETS_DIR = ASSETS_DIR / "presets" / "sweeps"
# What people tune first, in this order (those the schema has); the rest follow in schema order.
SUGGESTED = (
    "train.learning_rate",
    "adapter.r",
    "adapter.alpha",
    "adapter.dropout",
    "train.per_device_batch_size",
    "train.warmup",
    "train.weight_decay",
    "train.gradient_accumulation_steps",
    "train.lr_scheduler",
    "train.max_grad_norm",
)
# Fields that say how a run is run or recorded, not how it learns: not offered (the YAML still takes them).
NOT_OFFERED = {
    "model.trust_remote_code",
    "train.report_to",
    "train.logging_steps",
    "train.eval_strategy",
    "train.eval_steps",
    "train.eval_batch_size",
    "train.eval_on_start",
    "train.save_strategy",
    "train.save_steps",
    "train.save_total_limit",
    "launch.device",
    "launch.num_processes",
    "launch.threads_per_process",
}
# First ranges of fields whose base value says little (0 for dropout), or that want a log scale.
FIRST_RANGES: dict[str, dict[str, Any]] = {
    "train.learning_rate": {"log": True},
    "adapter.dropout": {"low": 0.0, "high": 0.2},
    "train.warmup": {"low": 0.0, "high": 0.1},
    "train.weight_decay": {"low": 0.0, "high": 0.1},
    "train.max_grad_norm": {"low": 0.3, "high": 1.0},
}
FIRST_CHOICES: dict[str, list[Any]] = {"adapter.r": [4, 8, 16, 32]}
SETTINGS = ("name", "metric", "direction", "trials", "sampler", "pruner", "budget_minutes")
LOW_HIGH, BAD_CHOICES, UNREADABLE, NOT_A_MAPPING = (
    key(f"sweeps.editor.{name}") for name in ("low_high", "bad_choices", "unreadable", "not_a_mapping")
)


class EditorProblem(SaidError):
    """Why an edit cannot apply to the YAML: its English as the message, and its key and values to say it in the
    page's language (``said``)."""


@dataclass(frozen=True)
class EntryRow:
    """One entry of the space as the editor shows it: a range (low, high, log; step for whole numbers) or, when
    ``choices`` holds text, that list of values."""

    path: str
    low: float | None = None
    high: float | None = None
    log: bool = False
    step: int | None = None
    choices: str = ""


# --- which fields -------------------------------------------------------------------------------------------------


@functools.cache
def _specs() -> dict[str, FieldSpec]:
    """RunConfig's leaf fields by path (the schema does not change while the studio runs)."""
    return {spec.path: spec for spec in leaf_specs()}


def field_choices(method: str | None = None) -> list[tuple[str, str]]:
    """(label, path) of the fields a sweep may vary from the picker: the suggestions first, then the chosen method's
    own knobs (dpo.beta), then every other number, choice and switch of RunConfig in schema order."""
    specs = {path: spec for path, spec in _specs().items() if path not in NOT_OFFERED and _sweepable(path)}
    first = [path for path in SUGGESTED if path in specs]
    own = [path for path in specs if method and path.startswith(f"{method}.") and path not in first]
    rest = [path for path in specs if path not in first and path not in own]
    return [(f"{path} · {specs[path].label}", path) for path in [*first, *own, *rest]]


def _sweepable(path: str) -> bool:
    """A number, a literal or a switch (a list or a text has no range, and rarely a short list of choices)."""
    try:
        return find_field(path).kind != "other"
    except EntryProblem:
        return False


def suggested_row(path: str, base: RunConfig) -> EntryRow:
    """A first entry for ``path`` around the base's value: a range for a float (log for the learning rate), a few
    choices for a whole number, every value of a short literal (else the base's and two more), true and false."""
    spot = find_field(path)
    value = _value(base, path)
    if spot.kind == "bool":
        return EntryRow(path, choices="true, false")
    if spot.kind == "literal":
        options = list(_specs()[path].choices)
        picked = options if len(options) <= 4 else [value, *[o for o in options if o != value][:2]]
        return EntryRow(path, choices=", ".join(str(option) for option in picked))
    low_bound, high_bound = _bounds(path)
    if spot.kind == "int":
        around = (value // 2, value, value * 2) if isinstance(value, int) else ()
        choices = FIRST_CHOICES.get(path) or sorted({n for n in around if low_bound <= n <= high_bound})
        return EntryRow(path, choices=", ".join(map(str, choices)))
    preset = FIRST_RANGES.get(path, {})
    center = value if isinstance(value, (int, float)) and value > 0 else None
    low = preset.get("low", _round(center / 3) if center else low_bound)
    high = preset.get("high", _round(center * 3) if center else min(high_bound, 1.0))
    return EntryRow(path, low=max(low, low_bound), high=min(high, high_bound), log=preset.get("log", False))


def _value(base: RunConfig, path: str) -> Any:
    value: Any = base
    for part in path.split("."):
        value = getattr(value, part)
    return value


def _bounds(path: str) -> tuple[float, float]:
    """The field's own bounds (its ge/gt/le/lt), or the whole line."""
    spec = _specs()[path]
    low = spec.minimum if spec.minimum is not None else -math.inf
    high = spec.maximum if spec.maximum is not None else math.inf
    return low, high


def _round(value: float) -> float:
    """Two significant digits: a range reads 0.001 to 0.009, not 0.0010000000000000002."""
    return float(f"{value:.2g}")


# --- entry rows <-> the YAML's space --------------------------------------------------------------------------------


def row_entry(row: EntryRow) -> dict[str, Any]:
    """The space entry of an editor row: ``{choices: [...]}`` when it has choices, else ``{low, high}`` with log or
    step. ValueError saying what is missing; the sweep's own checks judge the values."""
    if row.choices.strip():
        return {"choices": parse_choices(row.choices)}
    if row.low is None or row.high is None:
        raise EditorProblem(LOW_HIGH, path=row.path)
    entry: dict[str, Any] = {"low": _number(row.low), "high": _number(row.high)}
    if row.log:
        entry["log"] = True
    if row.step and row.step != 1:
        entry["step"] = int(row.step)
    return entry


def _number(value: float) -> int | float:
    """A whole number as an int (the browser sends 4.0 for 4), so a whole-number field's range reads as one."""
    return int(value) if float(value).is_integer() and abs(value) < 2**53 else float(value)


def parse_choices(written: str) -> list[Any]:
    """``4, 8, 16`` or ``[cosine, linear]`` as a list of YAML values (numbers, true/false, words)."""
    stripped = written.strip()
    try:
        values = yaml.safe_load(stripped if stripped.startswith("[") else f"[{stripped}]")
    except yaml.YAMLError:
        raise EditorProblem(BAD_CHOICES, choices=repr(written)) from None
    if not isinstance(values, list) or not values:
        raise EditorProblem(BAD_CHOICES, choices=repr(written))
    return values


def entry_row(path: str, entry: Any) -> EntryRow:
    """An entry of the YAML's space as an editor row (so picking a field already in the space shows its values)."""
    if not isinstance(entry, dict):
        return EntryRow(path)
    if isinstance(entry.get("choices"), list):
        return EntryRow(path, choices=", ".join(_flow(choice) for choice in entry["choices"]))
    return EntryRow(path, entry.get("low"), entry.get("high"), bool(entry.get("log")), entry.get("step"))


def _flow(value: Any) -> str:
    return yaml.safe_dump(value, default_flow_style=True, width=2**31 - 1).strip().removesuffix("...").strip()


def row_values(row: EntryRow) -> list[Any]:
    """The editor's inputs (low, high, log, step, choices) showing ``row``."""
    return [row.low, row.high, row.log, row.step or 1, row.choices]


def field_row(text: str, path: str) -> list[Any]:
    """The editor's inputs for a picked field: its entry as the YAML has it, else a first range around the value
    of the YAML's base (the defaults', when the YAML or its base cannot be read)."""
    try:
        data = read_mapping(text)
        space = data.get("space") if isinstance(data.get("space"), dict) else {}
        if path in space:
            return row_values(entry_row(path, space[path]))
    except ValueError:
        pass
    return row_values(suggested_row(path, _base(text)))


def _base(text: str) -> RunConfig:
    """The YAML's base when written inline; the defaults' when the YAML or its base cannot be read (or the base is
    a file: only a bundled sweep names one, and the editor reads no file the YAML names)."""
    try:
        base = read_mapping(text).get("base")
        return parse_config(base if isinstance(base, dict) else {})
    except ValueError:  # ConfigError is one
        return parse_config({})


def metric_choices(text: str) -> list[str]:
    """The objectives the editor offers for the YAML's base: its method's metrics (engine.sweeps.metrics)."""
    return [metric.key for metric in objective_metrics(_base(text))]


# --- editing the YAML ---------------------------------------------------------------------------------------------


def read_mapping(text: str) -> dict[str, Any]:
    """The sweep YAML as a mapping, for a widget to change one key of it; ValueError when it is not one."""
    try:
        data = yaml.safe_load(text or "") or {}
    except (yaml.YAMLError, RecursionError):
        raise EditorProblem(UNREADABLE) from None
    if not isinstance(data, dict):
        raise EditorProblem(NOT_A_MAPPING)
    return data


def with_entry(text: str, row: EntryRow) -> str:
    """The YAML with ``row`` as its space entry (added at the end, or replacing the one of the same field)."""
    data = read_mapping(text)
    space = data.get("space") if isinstance(data.get("space"), dict) else {}
    data["space"] = {**space, row.path: row_entry(row)}
    return sweep_yaml(data)


def without_entry(text: str, path: str) -> str:
    """The YAML without the space entry of ``path``."""
    data = read_mapping(text)
    space = data.get("space") if isinstance(data.get("space"), dict) else {}
    data["space"] = {key: value for key, value in space.items() if key != path}
    return sweep_yaml(data)


def with_setting(text: str, setting: str, value: Any) -> str:
    """The YAML with one of the editor's settings (SETTINGS) changed: the name, the objective's metric or direction,
    the number of trials, the sampler's or pruner's kind (their other knobs kept), the time budget in minutes (0 or
    empty: none)."""
    data = read_mapping(text)
    if setting in ("metric", "direction"):
        objective = data.get("objective") if isinstance(data.get("objective"), dict) else {}
        known = known_metric(value) if setting == "metric" else None  # a metric the methods list: its direction too
        data["objective"] = {**objective, setting: value, **({"direction": known.direction} if known else {})}
    elif setting in ("sampler", "pruner"):
        section = data.get(setting)
        data[setting] = {**section, "kind": value} if isinstance(section, dict) else {"kind": value}
    elif setting == "budget_minutes":
        data.pop("time_budget_s", None)
        if value:
            data["time_budget_s"] = _number(float(value) * 60)
    elif setting == "trials":
        data["trials"] = _number(float(value)) if value not in (None, "") else value
    elif setting == "name":
        data["name"] = value
    else:
        raise ValueError(f"not a setting of the editor: {setting}")
    return sweep_yaml(data)


def settings_of(text: str) -> dict[str, Any] | None:
    """The editor's settings as the YAML holds them (to show a hand edit in the widgets); None when unreadable."""
    try:
        data = read_mapping(text)
    except ValueError:
        return None
    objective = data.get("objective") if isinstance(data.get("objective"), dict) else {}
    budget = data.get("time_budget_s")
    return {
        "name": data.get("name"),
        "metric": objective.get("metric", "eval_loss"),
        "direction": objective.get("direction", "minimize"),
        "trials": data.get("trials", 10),
        "sampler": _kind(data.get("sampler"), "tpe"),
        "pruner": _kind(data.get("pruner"), "median"),
        "budget_minutes": round(budget / 60, 2) if isinstance(budget, (int, float)) else 0,
    }


def _kind(section: Any, default: str) -> str:
    if isinstance(section, str):
        return section
    return section.get("kind", default) if isinstance(section, dict) else default


def with_base(text: str, base: RunConfig) -> str:
    """The YAML with ``base`` as its base run (inline, written compactly); the rest as it was, but for an objective
    that the methods list and the base's method does not (a GRPO base after an SFT one: eval_loss), which becomes
    the base's own first."""
    try:
        data = read_mapping(text)
    except ValueError:
        data = {}
    data["base"] = compact_base(base)
    objective = data.get("objective") if isinstance(data.get("objective"), dict) else {}
    known = known_metric(str(objective.get("metric", "eval_loss")))
    if known is not None and known not in objective_metrics(base):
        data["objective"] = {**objective, **_objective(base)}
    return sweep_yaml(data)


def _objective(base: RunConfig) -> dict[str, str]:
    """A new sweep's objective for ``base`` as the YAML writes it."""
    metric = default_objective(base)
    return {"metric": metric.key, "direction": metric.direction}


def first_sweep(base: RunConfig, name: str) -> str:
    """A sweep to start from: the learning rate (log range) and the LoRA rank of ``base``, 6 trials, TPE, the
    median pruner after 2 finished trials."""
    space = {path: row_entry(suggested_row(path, base)) for path in ("train.learning_rate", "adapter.r")}
    data = {
        "name": name,
        "base": compact_base(base),
        "space": space,
        "objective": _objective(base),
        "trials": 6,
        "sampler": {"kind": "tpe", "startup_trials": 3},
        "pruner": {"kind": "median", "startup_trials": 2},
    }
    return sweep_yaml(data)


def unique_name(workspace: Path, stem: str = "sweep") -> str:
    """``stem-1``, ``stem-2``, ...: the first that names no sweep of the workspace yet."""
    taken = {folder.name for folder in sweeps_dir(workspace).glob("*")}
    number = 1
    while f"{stem}-{number}" in taken:
        number += 1
    return f"{stem}-{number}"


# --- checking -------------------------------------------------------------------------------------------------------


def check_text(text: str, workspace: Path | None) -> tuple[SweepConfig | None, list[Problem]]:
    """The sweep the YAML stands for, or the problems that stop it (each naming its key: ``space."adapter.r"``,
    ``base.data.path``). A base given as a path and the base's files must lie where the studio may read
    (studio.path_guard); a bundled sweep's ``base: ../demo.yaml`` is found from the bundled sweeps' folder."""
    roots = allowed_roots(workspace)
    try:
        data = yaml.safe_load(text or "")
    except (yaml.YAMLError, RecursionError):
        data = None  # read_sweep_text says where
    if isinstance(data, dict) and isinstance(data.get("base"), str):
        beside = SWEEP_PRESETS_DIR / data["base"]
        problem = path_problem(str(beside) if beside.is_file() else data["base"], roots)
        if problem:
            return None, [Problem("base", problem)]
    try:
        config, _ = read_sweep_text(text or "", SWEEP_PRESETS_DIR)
        guard_config(config.base, workspace)
    except ConfigError as exc:
        return None, [_in_base(problem) for problem in exc.problems]
    problems = []
    for path, entry in config.space.items():  # a trial may take its data or model from a choice
        choices = (entry.choices or []) if path in SERVER_PATH_FIELDS else []
        found = [path_problem(str(choice), roots) for choice in choices]
        problems += [Problem(entry_field(path), problem) for problem in found if problem]
    return (None, problems) if problems else (config, [])


def _in_base(problem: Problem) -> Problem:
    """A path problem of the base config (guard_config names the run's field) as a key of the sweep file."""
    if problem.field in SERVER_PATH_FIELDS or problem.field.startswith("data.path."):
        return Problem(f"base.{problem.field}", problem.message)
    return problem
