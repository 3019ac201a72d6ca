"""``python -m engine.evaluate.benchmarks.task_index FILE``: write every task, group and tag name the installed
lm-eval knows, each with the hub datasets it reads, as JSON (read by engine.evaluate.benchmarks.tasks).

A child process of its own: building lm-eval's index imports lm-eval and datasets, which the studio never loads."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from engine.evaluate.benchmarks.tasks import LOCAL_BUILDERS
from engine.store.rundir import write_text_atomic


def _hub_dataset(config: dict[str, Any]) -> set[str]:
    path = config.get("dataset_path")
    if not isinstance(path, str) or path in LOCAL_BUILDERS or Path(path).exists():
        return set()
    return {path}


def task_datasets() -> dict[str, list[str]]:
    """name -> the hub datasets its tasks read (a group's and a tag's: those of every task under it)."""
    from lm_eval.tasks import TaskManager
    from lm_eval.tasks._index import Kind

    index = TaskManager().task_index
    tagged: dict[str, list[str]] = {}
    for name, entry in index.items():
        for tag in entry.tags:
            tagged.setdefault(tag, []).append(name)

    def datasets(name: str, seen: set[str]) -> set[str]:
        entry = index.get(name)
        if entry is None or name in seen:
            return set()
        seen.add(name)
        config = entry.cfg or {}
        if entry.kind == Kind.TAG:
            children: list[Any] = tagged.get(name, [])
        elif entry.kind == Kind.GROUP:
            children = config.get("task") or []
            children = children if isinstance(children, list) else [children]
        else:
            return _hub_dataset(config)
        found: set[str] = set()
        for child in children:
            if isinstance(child, dict):  # a task written inline in the group
                found |= _hub_dataset(child) or datasets(str(child.get("task")), seen)
            else:
                found |= datasets(str(child), seen)
        return found

    return {name: sorted(datasets(name, set())) for name in index}


if __name__ == "__main__":
    write_text_atomic(Path(sys.argv[1]), json.dumps(task_datasets()))
