"""Which tasks a benchmark runs, checked before anything starts.

A task is asked for in one of three ways:

- ``heldout``: the run's own eval split, made into two lm-eval tasks in the run directory by the job
  (engine.evaluate.benchmarks.heldout): exact match of the greedy answer, and the answer's log-likelihood;
- a name lm-eval knows (``hellaswag``, ``mmlu``, ``gsm8k``, ...): a task, a group or a tag of the installed lm-eval;
- a task file (``--task-file PATH``): an lm-eval task YAML whose data files are local; relative data paths are
  read from the YAML's folder.

The names lm-eval knows come from its task index, which takes 10-20 s to build (it parses every YAML file it
ships), so it is built once per installed lm-eval in a child process (engine.evaluate.benchmarks.task_index) and
kept in the user's cache folder. Standard library (and PyYAML) only: the studio checks a request with it.
"""

from __future__ import annotations

import difflib
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import yaml

from engine.runs.artifacts import ArtifactError, FinishedRun
from engine.store.processes import engine_env

HELDOUT = "heldout"  # the run's own eval split
KIND_HELDOUT, KIND_LM_EVAL, KIND_FILE = "heldout", "lm-eval", "file"
LOCAL_BUILDERS = ("json", "csv", "parquet", "text", "arrow")  # dataset_path values that read local data_files
INDEX_TIMEOUT_S = 300


class BenchmarkError(ArtifactError):
    """A benchmark request that cannot run (an unknown task, a task file that cannot be read, no eval split),
    with a message meant for the person who asked for it."""


@dataclass(frozen=True)
class TaskSpec:
    """One task of a benchmark: what was asked for, how it is found, and (a task file) where it is."""

    name: str  # "heldout", an lm-eval name, or the ``task`` of a task file
    kind: str  # KIND_HELDOUT, KIND_LM_EVAL or KIND_FILE
    path: str | None = None  # the task file (KIND_FILE)
    datasets: tuple[str, ...] = ()  # the hub datasets an lm-eval task reads (for the offline check)


def lm_eval_version() -> str | None:
    """The installed lm-eval's version, or None when it is not installed."""
    try:
        return metadata.version("lm_eval")
    except metadata.PackageNotFoundError:
        return None


def _index_file(version: str) -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "tuning-studio" / f"lm-eval-{version}-tasks.json"


def known_tasks() -> dict[str, list[str]]:
    """Every task, group and tag name of the installed lm-eval, with the hub datasets each reads.

    Built once per lm-eval version by a child process (it imports lm-eval and datasets, which the studio does not),
    then read from the cache file. Raises BenchmarkError when lm-eval is missing or its index cannot be built.
    """
    version = lm_eval_version()
    if version is None:
        raise BenchmarkError("lm-eval is not installed: pip install 'lm-eval>=0.4.9,<0.5'")
    path = _index_file(version)
    if not path.is_file():
        command = [sys.executable, "-m", "engine.evaluate.benchmarks.task_index", str(path)]
        done = subprocess.run(command, capture_output=True, text=True, timeout=INDEX_TIMEOUT_S, env=engine_env())
        if done.returncode != 0:
            raise BenchmarkError(f"could not list lm-eval's tasks: {done.stderr.strip()[-500:]}")
    return json.loads(path.read_text(encoding="utf-8"))


def is_offline() -> bool:
    """Whether the hub is switched off for this process (HF_HUB_OFFLINE or HF_DATASETS_OFFLINE)."""
    values = (os.environ.get(name, "").strip().lower() for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))
    return any(value in ("1", "true", "yes", "on") for value in values)


def _dataset_cached(dataset: str) -> bool:
    """Whether a hub dataset has a copy in the local Hugging Face caches (hub download or datasets' own)."""
    home = Path(os.environ.get("HF_HOME") or Path.home() / ".cache" / "huggingface")
    hub = Path(os.environ.get("HF_HUB_CACHE") or home / "hub")
    datasets_cache = Path(os.environ.get("HF_DATASETS_CACHE") or home / "datasets")
    return (hub / f"datasets--{dataset.replace('/', '--')}").is_dir() or any(
        datasets_cache.glob(f"{dataset.replace('/', '___')}*")
    )


def _lm_eval_task(name: str, index: dict[str, list[str]]) -> TaskSpec:
    if name not in index:
        close = difflib.get_close_matches(name, list(index), n=3, cutoff=0.75)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise BenchmarkError(
            f"unknown task {name!r}: it is not one of lm-eval's {len(index):,} tasks and groups{hint}, nor "
            f"{HELDOUT!r}; a task of your own goes in a YAML file given as a task file"
        )
    missing = [dataset for dataset in index[name] if not _dataset_cached(dataset)]
    if missing and is_offline():
        raise BenchmarkError(
            f"task {name!r} reads {', '.join(missing[:3])} from the Hugging Face hub, which is switched off here "
            "(HF_HUB_OFFLINE) and has no local copy; run it where the hub is reachable, or use a local task"
        )
    return TaskSpec(name, KIND_LM_EVAL, datasets=tuple(index[name]))


class _TaskFileLoader(yaml.SafeLoader):
    """Reads an lm-eval task YAML: its ``!function`` tags name Python code, kept here as their text."""


_TaskFileLoader.add_multi_constructor("!", lambda loader, _suffix, node: loader.construct_scalar(node))


def _data_files(config: dict[str, Any]) -> list[str]:
    files = (config.get("dataset_kwargs") or {}).get("data_files") or []
    if isinstance(files, dict):
        files = list(files.values())
    flat = files if isinstance(files, list) else [files]
    return [item for value in flat for item in (value if isinstance(value, list) else [value])]


def _read_task_file(file: Path) -> dict[str, Any]:
    try:
        config = yaml.load(file.read_text(encoding="utf-8"), Loader=_TaskFileLoader)  # noqa: S506 - safe subclass
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise BenchmarkError(f"{file} is not a readable YAML file: {exc}") from None
    if not isinstance(config, dict) or not isinstance(config.get("task"), str):
        raise BenchmarkError(f"{file} is not an lm-eval task: it has no 'task: NAME' line")
    return config


def task_file_data(path: str | Path) -> list[Path]:
    """The local data files a task file reads (relative paths from its folder; an absolute path stays itself)."""
    file = Path(path)
    config = _read_task_file(file)
    if config.get("dataset_path") not in LOCAL_BUILDERS:
        return []
    return [file.parent / Path(str(data)).expanduser() for data in _data_files(config)]


def task_file(path: str | Path) -> TaskSpec:
    """A user's lm-eval task YAML, checked: readable, names its task, its local data files exist."""
    file = Path(path).expanduser()
    if not file.is_file():
        raise BenchmarkError(f"task file not found: {path}")
    config = _read_task_file(file)
    for data in task_file_data(file):
        if not data.exists():
            raise BenchmarkError(f"{file}: data file {data} not found (relative paths are read from its folder)")
    return TaskSpec(config["task"], KIND_FILE, str(file.resolve()))


def resolve_tasks(run: FinishedRun, names: list[str] | None, files: list[str] | None) -> list[TaskSpec]:
    """The tasks of a request, each checked; ``heldout`` alone when none is named.

    Raises BenchmarkError naming the first task that cannot run: an unknown name, a hub task while offline without
    a local copy, a task file that cannot be read or lacks its data, ``heldout`` for a run without an eval split, or
    the same task twice.
    """
    names = list(names or []) or ([] if files else [HELDOUT])
    specs = [task_file(path) for path in files or []]
    other = [name for name in names if name != HELDOUT]
    index = known_tasks() if other else {}
    if HELDOUT in names:
        if not run.config.has_eval_data:
            raise BenchmarkError(
                f"{run.name} has no eval split (data.eval_path / data.eval_size), so it has no {HELDOUT!r} task"
            )
        specs.insert(0, TaskSpec(HELDOUT, KIND_HELDOUT))
    specs += [_lm_eval_task(name, index) for name in other]
    seen = [spec.name for spec in specs]
    twice = sorted({name for name in seen if seen.count(name) > 1})
    if twice:
        raise BenchmarkError(f"task {twice[0]!r} is asked for twice")
    return specs
