"""Start on the Train tab, as a plain function of the form's values (tested without a browser): validate the form,
its dataset and the method's own checks, then create one run and start it, or put it in line while its devices
are busy (engine.runs.queue; in demo mode with the visitor rules of studio.demo.queue).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.api import ConfigError, RunConfig, run_queue, runs
from studio.demo.caller import Caller
from studio.demo.queue import enqueue_run
from studio.i18n.catalog import key, text
from studio.queue.words import queue_message
from studio.train.actions import checked_config, remember_model, shown_fields
from studio.train.dataset import cached_tokenizer, get_tokenizer
from studio.train.estimate import target_module_problems

# One Start at a time in this process (and, through engine.runs.start_lock, across studios on one workspace):
# of two Starts at once, one run starts and the other waits for its devices.
_start_lock = threading.Lock()
FIX_FIELDS, DATASET_UNUSABLE, CREATE_FAILED = (
    key(f"start.{name}") for name in ("fix_fields", "dataset_unusable", "create_failed")
)


@dataclass
class StartResult:
    """What Start did: a run directory, or why not (field errors, a dataset error, or a general message)."""

    message: str
    run_dir: Path | None = None
    errors: dict[str, str] = field(default_factory=dict)
    data_error: str = ""


def start_run(caller: Caller, values: Mapping[str, Any], launcher: Callable[[Path], Any] | None = None) -> StartResult:
    """Validate the form and its dataset, then create one run in the caller's workspace and start it, or queue it
    while its devices are busy (it starts by itself when they free up); nothing is created on any problem. The
    message is in the caller's language.

    ``launcher`` starts the run directory's process (default ``engine.runs.start``; tests pass a stand-in).
    In demo mode the visitor rules apply too (studio.demo.queue), and the messages name files as the visitor knows
    them (errors of the dataset or the disk quote server paths).
    """
    result = _start_run(caller, values, launcher)
    return shown_fields(caller, result, "message", "errors", "data_error")


def _start_run(caller: Caller, values: Mapping[str, Any], launcher: Callable[[Path], Any] | None) -> StartResult:
    from engine.api import DataError, inspect_run_data, tracker_problems

    workspace, policy, lang = Path(caller.workspace), caller.policy, caller.language
    try:
        config = checked_config(caller, values)
    except ConfigError as exc:
        return StartResult(text(FIX_FIELDS, lang), errors=exc.by_field())
    # A misspelt module, or a tracker this machine lacks, would end the run seconds after Start.
    field_errors = {**target_module_problems(config, lang), **ConfigError(tracker_problems(config)).by_field()}
    if field_errors:
        return StartResult(text(FIX_FIELDS, lang), errors=field_errors)
    try:
        # Rows are checked always (fast); tokens too when the dataset panel already loaded the tokenizer.
        inspect_run_data(config, cached_tokenizer(config))
        check_method_data(config)
    except ConfigError as exc:  # data that the chosen method does not train on: said next to the method field
        return StartResult(text(FIX_FIELDS, lang), errors=exc.by_field())
    except DataError as exc:
        return StartResult(text(DATASET_UNUSABLE, lang), data_error=str(exc))
    queue_launcher = (lambda run_dir, _checkpoint: launcher(run_dir)) if launcher else None
    if policy.enabled:
        run_dir, message = enqueue_run(config, workspace, policy, caller.token, queue_launcher, lang)
        return StartResult(message, run_dir=run_dir)
    with _start_lock:
        try:
            with runs.start_lock(workspace):  # created whole before a scheduler can see it queued
                run_dir = runs.create_run(config, workspace=workspace)
        except (runs.RunError, OSError) as exc:
            return StartResult(text(CREATE_FAILED, lang, error=exc))
        run_queue.start_next_queued(workspace, queue_launcher)
    # The run exists: a recent-models list that cannot be written is no reason to report a failure.
    with contextlib.suppress(OSError):
        remember_model(workspace, config.model.name_or_path)
    return StartResult(queue_message(run_dir, lang), run_dir=run_dir)


def check_method_data(config: RunConfig) -> None:
    """The method's own checks before launch (GRPO: each reward loads and scores the first rows; Method.data_check),
    raising ConfigError at the field at fault. A custom reward's code runs in this process: the demo refuses custom
    files before this (DemoPolicy.problems), and in one's own studio it is one's own code."""
    from engine.api import method_of

    check = method_of(config).data_check()
    if check is not None:
        check(config, get_tokenizer(config))
