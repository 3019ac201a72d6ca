"""The trackers a run reports to besides its own metrics.jsonl (``train.report_to``): TensorBoard, Weights & Biases
and trackio, through transformers' integrations.

trackio keeps its runs in SQLite files under ``TRACKIO_DIR`` (default ``~/.cache/huggingface/trackio``). A run
here writes them inside its workspace instead, ``WORKSPACE/trackio`` (``RUN_DIR/trackio`` for a run directory
outside a workspace), so a run's data stays with the studio's files; a ``TRACKIO_DIR`` set in the environment
wins. trackio reads that variable once, when it is imported, so the worker sets it before it builds the Trainer
(whose callback imports trackio). This module imports no tracker, except trackio to ask it whether it takes a
project name: the studio asks it before Start.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

from engine.config import Problem, RunConfig
from engine.store.workspace import TRACKIO_DIR, workspace_of
from engine.store.workspace import trackio_dir as workspace_trackio_dir
from engine.training.packages import installed

# The modules each tracker needs (either one will do), as transformers' integrations look for them.
TRACKER_MODULES: dict[str, tuple[str, ...]] = {
    "tensorboard": ("tensorboard", "tensorboardX"),
    "wandb": ("wandb",),
    "trackio": ("trackio",),
}
FALLBACK_PROJECT = "tuning-studio"
# TensorBoard's writers, which transformers' callback imports only when a run reports to TensorBoard.
TENSORBOARD_MODULES = ("torch.utils.tensorboard", "tensorboardX")
# What tracker_problems says of trackers not installed, by name, with ``{placeholders}`` for their names (the studio
# says it again in the visitor's language: studio.i18n.problems, keys ``rule.<name>``): one tracker, or several.
TRACKER_MESSAGES = {
    "tracker_not_installed": "{trackers} is not installed here (pip install {packages})",
    "trackers_not_installed": "{trackers} are not installed here (pip install {packages})",
}


def writers_open() -> bool:
    """Whether this process opened a tracker whose writes finish in exit hooks (a TensorBoard writer, a W&B run,
    a trackio run): it must then leave the usual way, and a warm worker that trained its run is not kept.

    A tracker module merely loaded does not count: TRL imports wandb whenever it is installed, and its model card
    (written with every checkpoint) imports trackio to look for a run, so a loaded module says nothing."""
    if any(name in sys.modules for name in TENSORBOARD_MODULES):
        return True
    wandb = sys.modules.get("wandb")
    if wandb is not None and getattr(wandb, "run", None) is not None:
        return True
    trackio = sys.modules.get("trackio")
    return bool(getattr(trackio, "_atexit_registered", False))  # set by trackio.init, with its exit hook


def tracker_problems(config: RunConfig) -> list[Problem]:
    """What keeps this machine from logging to the chosen trackers, at ``train.report_to`` (and at
    ``train.trackio_project`` for a name trackio refuses); [] when every one can log. The Trainer would only
    fail once the model has loaded."""
    missing = [
        tracker
        for tracker in config.train.report_to
        if not any(installed(module) for module in TRACKER_MODULES[tracker])
    ]
    if missing:
        words = TRACKER_MESSAGES["tracker_not_installed" if len(missing) == 1 else "trackers_not_installed"]
        return [Problem("train.report_to", words.format(trackers=" and ".join(missing), packages=" ".join(missing)))]
    project = config.train.trackio_project
    refusal = trackio_project_refusal(project) if project and "trackio" in config.train.report_to else None
    return [Problem("train.trackio_project", refusal)] if refusal else []


def trackio_project_refusal(project: str) -> str | None:
    """Why trackio refuses a project name (names it reserves for its registries and side files); None if fine.
    Asks trackio itself, which imports it (about 0.4 s, no gradio)."""
    from trackio.sqlite_storage import SQLiteStorage

    try:
        SQLiteStorage.validate_project_name(project)
    except ValueError as exc:
        return str(exc)
    return None


def trackio_dir(run_dir: Path) -> Path:
    """Where the run's trackio data goes: ``WORKSPACE/trackio``, or ``RUN_DIR/trackio`` outside a workspace."""
    workspace = workspace_of(run_dir)
    return workspace_trackio_dir(workspace) if workspace is not None else Path(run_dir).resolve() / TRACKIO_DIR


def trackio_project(config: RunConfig, run_dir: Path) -> str:
    """The trackio project: ``train.trackio_project``, else the workspace folder's name (the run's id outside a
    workspace), kept to the characters trackio keeps in its file names."""
    if config.train.trackio_project:
        return config.train.trackio_project
    workspace = workspace_of(run_dir)
    name = (workspace if workspace is not None else Path(run_dir).resolve()).name
    return re.sub(r"[^A-Za-z0-9_-]", "", name) or FALLBACK_PROJECT


def tracking_kwargs(config: RunConfig, run_dir: Path) -> dict[str, Any]:
    """The TrainingArguments that pick the trackers and name the run in them (pure: no library)."""
    train = config.train
    kwargs: dict[str, Any] = {"report_to": list(train.report_to), "run_name": Path(run_dir).name}
    if "trackio" in train.report_to:
        kwargs.update(
            project=trackio_project(config, run_dir),
            trackio_space_id=train.trackio_space,
            # After training transformers would copy the Space into a second, static one with a random name:
            # the user named one Space, and gets that one only.
            trackio_static_space_id=False,
        )
    return kwargs


def use_trackio_dir(config: RunConfig, run_dir: Path) -> None:
    """Point trackio at the run's workspace (``trackio_dir``) unless ``TRACKIO_DIR`` is set already; call it in
    the worker before trackio is imported (before the Trainer is built)."""
    if "trackio" in config.train.report_to:
        os.environ.setdefault("TRACKIO_DIR", str(trackio_dir(run_dir)))
