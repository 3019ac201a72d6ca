"""What the Sweeps tab's buttons do, as plain functions of plain values (tested without a browser): take a base
from the Train form or a file, start, stop and continue a sweep, and the Train form's values of the best trial.

Every action that would start or stop something is refused in demo mode (DemoPolicy.sweeps_refusal).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine import runs
from engine.config import ConfigError, RunConfig, load_config
from engine.store.rundir import CONFIG_FILE
from engine.sweeps import SweepError, continue_sweep, start_sweep, stop_sweep, sweep_status
from engine.sweeps.control import read_sweep_text
from studio.demo.policy import NORMAL, DemoPolicy
from studio.form.schema import config_to_values
from studio.markup import Html, message_html
from studio.path_guard import confine_file, form_config, resolve_run
from studio.sweeps.space_editor import SWEEP_PRESETS_DIR, check_text, first_sweep, unique_name, with_base
from studio.train.actions import PRESETS_DIR, config_files, read_config

FROM_FORM = "form"  # the "Start from" choice that takes the Train tab's form as the base


@dataclass(frozen=True)
class Outcome:
    """What an action did: a message and its kind (ok, warn, error), and the sweep it concerns (to watch it)."""

    message: str
    kind: str = "ok"
    name: str | None = None


def problems_text(problems: list[Any]) -> list[str]:
    """Each problem as a line that starts with the key to fix."""
    return [str(problem) for problem in problems]


def outcome_html(outcome: Outcome) -> str:
    """An outcome as the studio's coloured message box."""
    return message_html(outcome.message, outcome.kind)


def check_html(text: str, workspace: Path) -> str:
    """The YAML's problems next to it, each naming its key; a short ok when it is ready to start."""
    config, problems = check_text(text, workspace)
    if config is None:
        lines = problems_text(problems)
        pieces = [piece for line in lines for piece in (Html("<br>"), line)][1:]  # one problem a line
        return message_html(pieces, "error")
    return message_html(f"Ready: {len(config.space)} fields, up to {config.trials} trials.", "ok")


# --- the base -----------------------------------------------------------------------------------------------------


def base_choices(workspace: Path, policy: DemoPolicy = NORMAL) -> list[tuple[str, str]]:
    """The "Start from" picker: the Train tab's form, the bundled sweeps, then the run presets and saved configs."""
    sweeps = [(f"sweep: {path.stem}", str(path)) for path in sorted(SWEEP_PRESETS_DIR.glob("*.y*ml"))]
    return [("the Train tab's form", FROM_FORM), *sweeps, *config_files(workspace, policy)]


def yaml_from_form(text: str, values: Mapping[str, Any], workspace: Path) -> tuple[str | None, Outcome]:
    """The sweep YAML with the Train form's config as its base (the rest kept); None and why when the form has
    problems."""
    try:
        base = form_config(values, workspace)
    except ConfigError as exc:
        return None, Outcome("The Train form has problems: " + "; ".join(problems_text(exc.problems)), "error")
    return _with_base(text, base, workspace), Outcome("The base is now the Train tab's form.")


def yaml_from_file(text: str, path: str | None, workspace: Path) -> tuple[str | None, Outcome]:
    """A bundled sweep file as it is (its base written inline), or the sweep YAML with a preset's or saved config's
    run as its base; None and why when the file cannot be used."""
    if not path:
        return None, Outcome("Pick what to start from.", "warn")
    try:
        chosen = confine_file(path, workspace, "config file")
        if chosen.parent == SWEEP_PRESETS_DIR.resolve():
            _, sweep_text = read_sweep_text(chosen.read_text(encoding="utf-8"), chosen.parent)
            return sweep_text, Outcome(f"Loaded the sweep {chosen.stem}.")
        base = read_config(chosen)
    except (ValueError, OSError) as exc:  # ConfigError, PathNotAllowed
        return None, Outcome(f"Cannot use {Path(path).name}: {exc}", "error")
    return _with_base(text, base, workspace), Outcome(f"The base is now {chosen.name}.")


def _with_base(text: str, base: RunConfig, workspace: Path) -> str:
    """``text`` with a new base; a first sweep of it when ``text`` holds no space yet."""
    if "space:" not in (text or ""):
        return first_sweep(base, unique_name(workspace))
    return with_base(text, base)


def starting_yaml(workspace: Path) -> str:
    """The YAML a fresh page shows: a first sweep of the demo preset, under a name no sweep has yet."""
    return first_sweep(load_config(PRESETS_DIR / "demo.yaml"), unique_name(workspace))


# --- start, stop, continue ------------------------------------------------------------------------------------------


def start(workspace: Path, text: str, policy: DemoPolicy = NORMAL) -> Outcome:
    """Validate the YAML and start its sweep in the background; nothing starts on any problem (each named by its
    key). The same sweep again continues it."""
    if policy.sweeps_refusal:
        return Outcome(policy.sweeps_refusal, "warn")
    config, problems = check_text(text, workspace)
    if config is None:
        return Outcome("Not started: " + "; ".join(problems_text(problems)), "error")
    try:
        launch = start_sweep(workspace, text, SWEEP_PRESETS_DIR)  # the text as written becomes its sweep.yaml
    except (ConfigError, SweepError, OSError) as exc:
        return Outcome(f"Not started: {exc}", "error")
    return Outcome(f"Started the sweep {launch.name} (driver pid {launch.pid}).", "ok", launch.name)


def stop(workspace: Path, name: str | None, policy: DemoPolicy = NORMAL) -> Outcome:
    """Ask the sweep's driver to stop: the current trial's run saves a checkpoint, Continue picks it up."""
    if policy.sweeps_refusal:
        return Outcome(policy.sweeps_refusal, "warn")
    if not name:
        return Outcome("Pick a sweep first.", "warn")
    if not stop_sweep(workspace, name):
        return Outcome(f"The sweep {name} is not running.", "warn", name)
    return Outcome(f"Stopping {name}: its current trial saves a checkpoint, then the driver ends.", "warn", name)


def resume(workspace: Path, name: str | None, policy: DemoPolicy = NORMAL) -> Outcome:
    """Continue a stopped (or finished with trials to spare) sweep with the sweep file it keeps."""
    if policy.sweeps_refusal:
        return Outcome(policy.sweeps_refusal, "warn")
    if not name:
        return Outcome("Pick a sweep first.", "warn")
    with contextlib.suppress(SweepError):  # no study yet (its first driver ended early): continuing makes it
        summary = sweep_status(workspace, name)
        if summary.done >= summary.target:
            return Outcome(f"The sweep {name} has run all its {summary.target} trials.", "warn", name)
    try:
        launch = continue_sweep(workspace, name)
    except (ConfigError, SweepError, OSError) as exc:
        return Outcome(f"Not continued: {exc}", "error", name)
    return Outcome(f"Continuing the sweep {name} (driver pid {launch.pid}).", "ok", name)


# --- a new run from the best trial ----------------------------------------------------------------------------------


def best_values(
    workspace: Path, name: str | None, policy: DemoPolicy = NORMAL
) -> tuple[dict[str, Any] | None, Outcome]:
    """The Train form's values of the sweep's best trial (its run's config, named ``<sweep>-best``), to train it
    longer or on more data; None and why when there is none yet."""
    if policy.sweeps_refusal:
        return None, Outcome(policy.sweeps_refusal, "warn")
    if not name:
        return None, Outcome("Pick a sweep first.", "warn")
    try:
        best = sweep_status(workspace, name).best
        if best is None or not best.run_id:
            return None, Outcome(f"No trial of {name} has completed yet.", "warn", name)
        config = load_config(resolve_run(workspace, best.run_id) / CONFIG_FILE)
    except (SweepError, ConfigError, runs.RunError) as exc:  # RunError: its run was deleted meanwhile
        return None, Outcome(f"Cannot load the best trial of {name}: {exc}", "error", name)
    values = config_to_values(config.model_copy(update={"name": f"{name}-best"}))
    text = f"The Train form now holds trial {best.number} of {name} (its run {best.run_id}): check it, then Start."
    return values, Outcome(text, "ok", name)
