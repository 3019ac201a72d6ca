"""A sweep's folder and its optuna study: SQLite storage, sampler, pruner, distributions, and the sweep it holds.

```
WORKSPACE/sweeps/<name>/
  sweep.yaml      the sweep file as it was given the first time
  study.db        optuna's RDBStorage (SQLite): the trials, their parameters, reports and states; the study's
                  user attribute "sweep" holds the validated sweep (base inlined), which a later start must match
  .driver.lock    flock'd by the one driver of the sweep (engine.sweeps.local)
```
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import optuna
import yaml

from engine.store.rundir import write_text_atomic
from engine.sweeps.config import SweepConfig
from engine.sweeps.space import choice_label, choice_labels, find_field

SWEEPS_DIR = "sweeps"
SWEEP_FILE = "sweep.yaml"
STUDY_FILE = "study.db"
DRIVER_LOCK_FILE = ".driver.lock"
SWEEP_ATTR = "sweep"  # the study's user attribute that holds the validated sweep (SweepConfig, as JSON)
TARGET_ATTR = "target_trials"  # the study's user attribute: how many trials the sweep runs (target_trials)
SQLITE_WAIT_S = 30  # a reader (sweep-status) waits this long for the driver's write to end, not 5 s


class SweepError(RuntimeError):
    """A sweep that cannot start or be read: a different sweep under the same name, a second driver, no such
    sweep."""


def sweeps_dir(workspace: Path) -> Path:
    """Where a workspace's sweeps live."""
    return Path(workspace) / SWEEPS_DIR


def sweep_dir(workspace: Path, name: str) -> Path:
    """The folder of one sweep."""
    return sweeps_dir(workspace) / name


def storage_for(folder: Path) -> optuna.storages.RDBStorage:
    """The optuna storage of a sweep folder (SQLite in ``study.db``)."""
    url = f"sqlite:///{(Path(folder) / STUDY_FILE).resolve()}"
    return optuna.storages.RDBStorage(url, engine_kwargs={"connect_args": {"timeout": SQLITE_WAIT_S}})


def distributions(config: SweepConfig) -> dict[str, optuna.distributions.BaseDistribution]:
    """One optuna distribution per space entry, named by its field path."""
    found: dict[str, optuna.distributions.BaseDistribution] = {}
    for path, entry in config.space.items():
        if not entry.is_range:
            found[path] = optuna.distributions.CategoricalDistribution(choice_labels(entry))
        elif find_field(path).kind == "int":
            found[path] = optuna.distributions.IntDistribution(
                int(entry.low or 0), int(entry.high or 0), log=entry.log, step=entry.step or 1
            )
        else:
            found[path] = optuna.distributions.FloatDistribution(
                float(entry.low or 0), float(entry.high or 0), log=entry.log
            )
    return found


def grid(config: SweepConfig) -> dict[str, list[Any]]:
    """Every value of every entry, for the grid sampler (choices and whole-number ranges only: the sweep file's
    checks refuse a float range with grid)."""
    values = {}
    for path, entry in config.space.items():
        if entry.is_range:
            values[path] = list(range(int(entry.low or 0), int(entry.high or 0) + 1, entry.step or 1))
        else:
            values[path] = choice_labels(entry)
    return values


def target_trials(config: SweepConfig) -> int:
    """How many trials the sweep runs: ``trials``, or fewer when a grid has fewer points."""
    if config.sampler.kind != "grid":
        return config.trials
    return min(config.trials, math.prod(len(values) for values in grid(config).values()))


class AskTellGrid(optuna.samplers.GridSampler):
    """optuna's grid sampler, told trials from outside ``study.optimize``.

    GridSampler stops the study (``Study.stop``) once the last point of its grid has been told, and optuna 5 allows
    that only inside ``optimize``: the sweep drivers ask and tell, so a grid sweep's last trial raised RuntimeError
    in the driver. They stop by themselves after ``target_trials`` (the grid's size at most), so the stop is left
    out; picking the points is GridSampler's own."""

    def after_trial(self, study: Any, trial: Any, state: Any, values: Any) -> None:
        return


def make_sampler(config: SweepConfig, seed: int) -> optuna.samplers.BaseSampler:
    """The sweep's sampler, seeded with ``seed``."""
    if config.sampler.kind == "grid":
        return AskTellGrid(grid(config), seed=seed)
    if config.sampler.kind == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    return optuna.samplers.TPESampler(seed=seed, n_startup_trials=config.sampler.startup_trials)


def make_pruner(config: SweepConfig) -> optuna.pruners.BasePruner:
    """The sweep's pruner."""
    pruner = config.pruner
    if pruner.kind == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=pruner.startup_trials, n_warmup_steps=pruner.warmup_steps)
    if pruner.kind == "successive_halving":
        return optuna.pruners.SuccessiveHalvingPruner(
            min_resource=pruner.min_resource or "auto", reduction_factor=pruner.reduction_factor
        )
    return optuna.pruners.NopPruner()


def sweep_record(config: SweepConfig) -> dict[str, Any]:
    """The sweep as the study keeps it: every field but the executor, the base inlined, as JSON values. Where the
    trials run does not change what is searched (a sweep begun here may go on on a cluster), and studies made
    before executors existed hold no such key."""
    return config.model_dump(mode="json", exclude={"executor"})


def stored_record(folder: Path, name: str) -> dict[str, Any] | None:
    """The sweep a folder's study holds; None when it has no study, or one whose making was cut short."""
    if not (Path(folder) / STUDY_FILE).is_file():
        return None
    try:
        study = optuna.load_study(study_name=name, storage=storage_for(folder))
    except KeyError:  # optuna's word for "no study of that name"
        return None
    return study.user_attrs.get(SWEEP_ATTR)


_ABSENT = object()


def differences(old: Any, new: Any, prefix: str = "") -> list[str]:
    """What changed between two JSON values, one ``key: old -> new`` line per changed leaf (mappings walked)."""
    if not (isinstance(old, dict) and isinstance(new, dict)):
        return [] if old == new else [f"{prefix or 'the sweep'}: {_shown(old)} -> {_shown(new)}"]
    found = []
    for key in [*old, *(key for key in new if key not in old)]:
        path = f"{prefix}.{key}" if prefix else str(key)
        found += differences(old.get(key, _ABSENT), new.get(key, _ABSENT), path)
    return found


def _shown(value: Any) -> str:
    return "(none)" if value is _ABSENT else json.dumps(value)


def open_study(config: SweepConfig, workspace: Path, sweep_text: str | None = None) -> optuna.Study:
    """The sweep's study, made on first use (folder, sweep.yaml, study.db, first trials); a later start with the
    same sweep continues it. SweepError when the folder holds a different sweep, saying what differs.

    The sampler is seeded with the sweep's seed plus the number of trials already made: a continued sweep must not
    draw the same random values again from the start of the seed's sequence.
    """
    folder = sweep_dir(workspace, config.name)
    folder.mkdir(parents=True, exist_ok=True)
    record, stored = sweep_record(config), stored_record(folder, config.name)
    if stored is not None and stored != record:
        changes = differences(stored, record)
        shown = "; ".join(changes[:5]) + (f"; and {len(changes) - 5} more" if len(changes) > 5 else "")
        raise SweepError(
            f"{folder} holds a different sweep named {config.name} ({shown}). Keep the sweep file as it was to "
            "continue it, or give the sweep another name."
        )
    if stored is None:
        _make_study(config, folder, record, sweep_text)
    study = optuna.load_study(study_name=config.name, storage=storage_for(folder), pruner=make_pruner(config))
    study.sampler = make_sampler(config, config.seed + len(study.get_trials(deepcopy=False)))
    return study


def _make_study(config: SweepConfig, folder: Path, record: dict[str, Any], sweep_text: str | None) -> None:
    """Write sweep.yaml and make the study with its first trials; the sweep attribute goes last, so a study whose
    making was cut short (no attribute) is made again from scratch."""
    text = sweep_text if sweep_text is not None else yaml.safe_dump(record, sort_keys=False, allow_unicode=True)
    write_text_atomic(folder / SWEEP_FILE, text)
    storage = storage_for(folder)
    if config.name in optuna.get_all_study_names(storage):
        optuna.delete_study(study_name=config.name, storage=storage)
    study = optuna.create_study(study_name=config.name, storage=storage, direction=config.objective.direction)
    for values in config.first_trials:
        study.enqueue_trial({path: _param(config, path, value) for path, value in values.items()})
    study.set_user_attr(TARGET_ATTR, target_trials(config))
    study.set_user_attr(SWEEP_ATTR, record)


def _param(config: SweepConfig, path: str, value: Any) -> Any:
    """A config value as optuna records the parameter: a choice's label, a range's number."""
    return choice_label(value) if not config.space[path].is_range else value
