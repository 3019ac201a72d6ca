"""What the Train tab's buttons do, as plain functions of plain values (tested without a browser).

Widget values travel as ``dict[path, value]`` (see studio.form.schema); results are small dataclasses that the tab
turns into component updates.
"""

from __future__ import annotations

import contextlib
import json
import re
import shlex
import tempfile
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from engine import runs
from engine.config import ConfigError, Problem, RunConfig, parse_config, save_config
from engine.config.names import name_problem
from engine.config.sections import DEMO_MODEL
from engine.store.paths import confine
from engine.store.rundir import write_text_atomic
from engine.store.workspace import configs_dir, recent_models_file, runs_dir
from studio.demo.policy import DATA_REFUSAL, NORMAL, PATH_FIELDS, DemoPolicy, data_allowed, visitor_uploads
from studio.demo.queue import enqueue_run
from studio.form.schema import config_to_values, default_values, values_to_config
from studio.markup import text_block
from studio.path_guard import ASSETS_DIR, confine_file, form_config, gradio_upload_dir
from studio.train.dataset import cached_tokenizer
from studio.train.estimate import target_module_problems

PRESETS_DIR = ASSETS_DIR / "presets"
DEMO_PRESET = "demo.yaml"
MAX_RECENT = 10

# One Start at a time in this process (and, through engine.runs.start_lock, across studios on one workspace):
# with the active-run check inside both, a double click starts one run.
_start_lock = threading.Lock()


# --- recently used models ---------------------------------------------------------------------------------


def recent_models(workspace: Path) -> list[str]:
    """Models used in this workspace, most recent first ([] when none or the file is unreadable)."""
    try:
        names = json.loads(recent_models_file(workspace).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return [name for name in names if isinstance(name, str)] if isinstance(names, list) else []


def remember_model(workspace: Path, name: str) -> list[str]:
    """Put ``name`` first in the recent models list; returns the new list."""
    names = [name] + [other for other in recent_models(workspace) if other != name]
    write_text_atomic(recent_models_file(workspace), json.dumps(names[:MAX_RECENT], indent=1))
    return names[:MAX_RECENT]


def model_choices(workspace: Path, policy: DemoPolicy = NORMAL) -> list[str]:
    """The model picker's list: the bundled demo model, then recent ones (only the demo model in demo mode)."""
    return [DEMO_MODEL] if policy.enabled else list(dict.fromkeys([DEMO_MODEL, *recent_models(workspace)]))


def starting_values() -> dict[str, Any]:
    """What the form shows on a fresh page: the demo preset, so that Start trains something at once."""
    values, _ = load_config_values(PRESETS_DIR / DEMO_PRESET)
    return values if values is not None else default_values()


# --- preview ------------------------------------------------------------------------------------------------


@dataclass
class Preview:
    """The YAML and CLI the form stands for, or the problems that stop it."""

    yaml: str
    command: str
    errors: dict[str, str] = field(default_factory=dict)  # path -> message, empty when the form is valid
    config: RunConfig | None = None


def run_dir_hint(config: RunConfig, workspace: Path) -> str:
    """Where the CLI command would write: WORKSPACE/runs/<name>."""
    slug = re.sub(r"[^a-zA-Z0-9._-]+", "-", config.name or "my-run").strip("-") or "my-run"
    return str(runs_dir(workspace) / slug)


def checked_config(
    values: Mapping[str, Any], workspace: Path, policy: DemoPolicy = NORMAL, uploads: Path | None = None
) -> RunConfig:
    """The form's config with its paths confined and the demo's limits applied (``uploads``: the visitor's
    upload folder); raises ConfigError naming each field at fault."""
    config = form_config(values, workspace)
    problems = policy.problems(config, uploads)
    if problems:
        raise ConfigError(problems)
    return config


def demo_data_problems(values: Mapping[str, Any], policy: DemoPolicy, uploads: Path | None) -> dict[str, str]:
    """In demo mode: path -> why a dataset path of the form may not be read (a bundled set or an upload only)."""
    if not policy.enabled:
        return {}
    named = {path: str(values.get(path) or "") for path in PATH_FIELDS}
    return {path: DATA_REFUSAL for path, value in named.items() if value and not data_allowed(value, uploads)}


def preview(
    values: Mapping[str, Any], workspace: Path, policy: DemoPolicy = NORMAL, uploads: Path | None = None
) -> Preview:
    """The config as YAML and the equivalent command line; on invalid input the per-field problems."""
    try:
        config = checked_config(values, workspace, policy, uploads)
    except ConfigError as exc:
        listing = "\n".join(f"# {problem}" for problem in exc.problems)
        return Preview(f"# The form has problems; fix them to see the config:\n{listing}", "", exc.by_field())
    command = f"python -m engine train config.yaml --run-dir {shlex.quote(run_dir_hint(config, workspace))}"
    return Preview(config.to_yaml(), command, {}, config)


# --- save / load ----------------------------------------------------------------------------------------------


def config_name(name: str) -> str:
    """A safe file stem from what the user typed ('' when nothing usable is left)."""
    return re.sub(r"[^a-zA-Z0-9._-]+", "-", name.strip()).strip("-.")


def save_config_as(
    values: Mapping[str, Any], name: str, workspace: Path, policy: DemoPolicy = NORMAL
) -> tuple[Path | None, Path | None, str]:
    """Save the form as ``WORKSPACE/configs/NAME.yaml``; returns (saved, download copy, message).

    Not in demo mode: visitors share the workspace, and the YAML tab shows the config to copy.
    """
    if policy.enabled:
        return None, None, "❌ The demo saves no configs on the server; copy the YAML tab instead."
    try:
        config = values_to_config(values)
    except ConfigError as exc:
        return None, None, f"❌ Not saved: the form has problems.\n\n{text_block(str(exc))}"
    typed = name or config.name or ""
    problem = name_problem(typed) if typed.strip() else None  # the rule every name that becomes a file obeys
    if problem:
        return None, None, f"❌ Not saved: the name is not usable: {problem}."
    stem = config_name(typed)
    if not stem:
        return None, None, "❌ Give the config a name first."
    target = configs_dir(workspace) / f"{stem}.yaml"
    try:
        save_config(config, target)
        # Gradio serves downloads from the temp dir; the workspace may lie outside the paths it allows.
        download = Path(tempfile.mkdtemp(prefix="ts-config-")) / target.name
        download.write_text(config.to_yaml(), encoding="utf-8")
    except OSError as exc:
        return None, None, f"❌ Not saved: {exc}"
    return target, download, f"✅ Saved `{target}`"


def read_config(path: str | Path) -> RunConfig:
    """Read a YAML config file; raises ConfigError with a clear message for bad YAML or bad fields."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError([Problem("", f"cannot read {path.name}: {exc}")]) from None
    except RecursionError:  # PyYAML composes nested lists and mappings recursively
        raise ConfigError([Problem("", f"{path.name} is not a usable config: values nested too deeply")]) from None
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        at = f" (line {where.line + 1}, column {where.column + 1})" if where else ""
        message = f"{path.name} is not valid YAML{at}: {getattr(exc, 'problem', None) or exc}"
        raise ConfigError([Problem("", message)]) from None
    return parse_config(data)


def load_config_values(
    path: str | Path | None,
    workspace: Path | None = None,
    policy: DemoPolicy = NORMAL,
    uploads: Path | None = None,
) -> tuple[dict[str, Any] | None, str]:
    """Widget values for a config file, or None and a message saying what is wrong with it.

    The file must lie in the folders the studio may read (studio.path_guard; the workspace when given). In demo
    mode only a preset or an upload loads, and the fields the demo fixes are set back (the message says which).
    """
    if not path:
        return None, ""
    try:
        if policy.enabled:
            confine(path, [PRESETS_DIR, gradio_upload_dir()])
        config = read_config(confine_file(path, workspace, "config file"))
    except ValueError as exc:  # ConfigError or PathNotAllowed
        return None, f"❌ Cannot load `{Path(path).name}`:\n\n{text_block(str(exc))}"
    values, changed = policy.restrict_values(config_to_values(config), uploads)
    note = f" (set back to the demo's values: {', '.join(changed)})" if changed else ""
    return values, f"✅ Loaded `{Path(path).name}`{note}"


def config_files(workspace: Path, policy: DemoPolicy = NORMAL) -> list[tuple[str, str]]:
    """(label, path) of the bundled presets and the workspace's saved configs (presets only in demo mode)."""
    presets = [(f"preset: {p.stem}", str(p)) for p in sorted(PRESETS_DIR.glob("*.y*ml"))]
    if policy.enabled:
        return presets
    saved = [(f"saved: {p.stem}", str(p)) for p in sorted(configs_dir(workspace).glob("*.y*ml"))]
    return presets + saved


# --- start ------------------------------------------------------------------------------------------------------


@dataclass
class StartResult:
    """What Start did: a run directory, or why not (field errors, a dataset error, or a general message)."""

    message: str
    run_dir: Path | None = None
    errors: dict[str, str] = field(default_factory=dict)
    data_error: str = ""


def busy_runs(workspace: Path) -> list[runs.RunSummary]:
    """Runs of the workspace that are starting, running or stopping (status reconciled with the processes)."""
    return [runs.summarize(run_dir) for run_dir in runs.active_runs(Path(workspace))]


def start_run(
    values: Mapping[str, Any],
    workspace: Path,
    launcher: Callable[[Path], Any] | None = None,
    policy: DemoPolicy = NORMAL,
    visitor: str | None = None,
) -> StartResult:
    """Validate the form and its dataset, then create and start one run; nothing starts on any problem.

    ``launcher`` starts the run directory's process (default ``engine.runs.start``; tests pass a stand-in).
    In demo mode the run joins the queue instead (studio.demo.queue): it starts when the machine is free.
    """
    from engine.data import DataError, inspect_dataset

    try:
        config = checked_config(values, workspace, policy, visitor_uploads(workspace, policy, visitor))
    except ConfigError as exc:
        return StartResult("❌ Not started: fix the fields marked in the form.", errors=exc.by_field())
    module_errors = target_module_problems(config)  # a misspelt module would end the run seconds after Start
    if module_errors:
        return StartResult("❌ Not started: fix the fields marked in the form.", errors=module_errors)
    try:
        # Rows are checked always (fast); tokens too when the dataset panel already loaded the tokenizer.
        inspect_dataset(config.data, cached_tokenizer(config), config.train.max_length, config.train.seed)
    except DataError as exc:
        return StartResult("❌ Not started: the dataset cannot be used (see the dataset panel).", data_error=str(exc))
    if policy.enabled:
        return _enqueue(config, workspace, policy, visitor, launcher)
    with _start_lock, runs.start_lock(Path(workspace)):
        busy = busy_runs(workspace)
        if busy:
            names = ", ".join(f"{run.name} ({run.state})" for run in busy)
            return StartResult(
                f"⏳ Not started: another run is active: {names}. Stop it first, or start this one when it has ended."
            )
        try:
            run_dir = runs.create_run(config, workspace=Path(workspace))
            (launcher or runs.start)(run_dir)
        except (runs.RunError, OSError) as exc:
            return StartResult(f"❌ Could not start the run: {exc}")
    # The run has started: a recent-models list that cannot be written is no reason to report a failure.
    with contextlib.suppress(OSError):
        remember_model(workspace, config.model.name_or_path)
    return StartResult(f"🚀 Started `{run_dir.name}`", run_dir=run_dir)


def _enqueue(
    config: RunConfig, workspace: Path, policy: DemoPolicy, visitor: str | None, launcher: Callable[[Path], Any] | None
) -> StartResult:
    """Demo mode's Start: the run waits in line (a busy machine is no reason to refuse)."""
    queue_launcher = (lambda run_dir, _checkpoint: launcher(run_dir)) if launcher else None
    run_dir, message = enqueue_run(config, Path(workspace), policy, visitor, queue_launcher)
    return StartResult(message, run_dir=run_dir)
