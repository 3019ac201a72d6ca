"""What the Sweeps tab's buttons do, as plain functions of plain values (tested without a browser): take a base
from the Train form or a file, start, stop and continue a sweep, and the Train form's values of the best trial.

Every action that would start or stop something is refused in demo mode (DemoPolicy.sweeps_refusal). Each takes the
event's caller (studio.context.Caller: the workspace, the policy, the page's language); the messages are said in the
caller's language (studio.i18n), an engine's error inside one stays as it was written.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.api import (
    CONFIG_FILE,
    ConfigError,
    RunConfig,
    SweepError,
    continue_sweep,
    load_config,
    read_sweep_text,
    runs,
    start_sweep,
    stop_sweep,
    sweep_status,
)
from studio.demo.caller import Caller
from studio.demo.policy import NORMAL, DemoPolicy
from studio.form.run_config import form_config
from studio.form.values import config_to_values
from studio.i18n.catalog import SOURCE, key, text
from studio.i18n.widgets import marked
from studio.markup import Html, message_html
from studio.path_guard import confine_file, resolve_run
from studio.sweeps.space_editor import (
    SWEEP_PRESETS_DIR,
    check_text,
    first_sweep,
    unique_name,
    with_base,
)
from studio.train.actions import PRESETS_DIR, config_files, problem_text, read_config

FROM_FORM = "form"  # the "Start from" choice that takes the Train tab's form as the base
FORM_LABEL, SWEEP_LABEL = marked("sweeps.base.form"), marked("sweeps.base.sweep")  # the page translates them
READY, FORM_PROBLEMS, BASE_FORM, PICK_BASE, LOADED, CANNOT_USE, BASE_FILE = (
    key(f"sweeps.{name}")
    for name in ("ready", "form_problems", "base_form", "pick_base", "loaded", "cannot_use", "base_file")
)
NOT_STARTED, STARTED, PICK, NOT_RUNNING, STOPPING, ALL_DONE, NOT_CONTINUED, CONTINUING = (
    key(f"sweeps.{name}")
    for name in (
        "not_started",
        "started",
        "pick",
        "not_running",
        "stopping",
        "all_done",
        "not_continued",
        "continuing",
    )
)
NO_BEST, CANNOT_LOAD_BEST, BEST_LOADED = (
    key(f"sweeps.{name}") for name in ("no_best", "cannot_load_best", "best_loaded")
)


@dataclass(frozen=True)
class Outcome:
    """What an action did: a message and its kind (ok, warn, error), and the sweep it concerns (to watch it)."""

    message: str
    kind: str = "ok"
    name: str | None = None


def problems_text(problems: list[Any], lang: str = SOURCE) -> list[str]:
    """Each problem as a line that starts with the key to fix (its message in ``lang`` where the studio can)."""
    return [problem_text(problem, lang) for problem in problems]


def outcome_html(outcome: Outcome) -> str:
    """An outcome as the studio's coloured message box."""
    return message_html(outcome.message, outcome.kind)


def check_html(caller: Caller, sweep: str) -> str:
    """The YAML's problems next to it, each naming its key; a short ok when it is ready to start. In the caller's
    language."""
    config, problems = check_text(sweep, caller.workspace)
    if config is None:
        lines = problems_text(problems, caller.language)
        pieces = [piece for line in lines for piece in (Html("<br>"), line)][1:]  # one problem a line
        return message_html(pieces, "error")
    return message_html(caller.say(READY, fields=len(config.space), trials=config.trials), "ok")


# --- the base -----------------------------------------------------------------------------------------------------


def base_choices(workspace: Path, policy: DemoPolicy = NORMAL) -> list[tuple[str, str]]:
    """The "Start from" picker: the Train tab's form, the bundled sweeps, then the run presets and saved configs
    (labels the page translates)."""
    sweeps = [(f"{SWEEP_LABEL} {path.stem}", str(path)) for path in sorted(SWEEP_PRESETS_DIR.glob("*.y*ml"))]
    return [(FORM_LABEL, FROM_FORM), *sweeps, *config_files(workspace, policy)]


def yaml_from_form(caller: Caller, sweep: str, values: Mapping[str, Any]) -> tuple[str | None, Outcome]:
    """The sweep YAML with the Train form's config as its base (the rest kept); None and why when the form has
    problems (in the caller's language)."""
    workspace, lang = caller.workspace, caller.language
    try:
        base = form_config(values, workspace)
    except ConfigError as exc:
        problems = "; ".join(problems_text(exc.problems, lang))
        return None, Outcome(text(FORM_PROBLEMS, lang, problems=problems), "error")
    return _with_base(sweep, base, workspace), Outcome(text(BASE_FORM, lang))


def yaml_from_file(caller: Caller, sweep: str, path: str | None) -> tuple[str | None, Outcome]:
    """A bundled sweep file as it is (its base written inline), or the sweep YAML with a preset's or saved config's
    run as its base; None and why (in the caller's language) when the file cannot be used."""
    workspace, lang = caller.workspace, caller.language
    if not path:
        return None, Outcome(text(PICK_BASE, lang), "warn")
    try:
        chosen = confine_file(path, workspace, "config file")
        if chosen.parent == SWEEP_PRESETS_DIR.resolve():
            _, kept = read_sweep_text(chosen.read_text(encoding="utf-8"), chosen.parent)
            return kept, Outcome(text(LOADED, lang, name=chosen.stem))
        base = read_config(chosen, lang)
    except ConfigError as exc:
        problems = "\n".join(problems_text(exc.problems, lang))
        return None, Outcome(text(CANNOT_USE, lang, name=Path(path).name, error=problems), "error")
    except (ValueError, OSError) as exc:  # PathNotAllowed
        return None, Outcome(text(CANNOT_USE, lang, name=Path(path).name, error=exc), "error")
    return _with_base(sweep, base, workspace), Outcome(text(BASE_FILE, lang, name=chosen.name))


def _with_base(text: str, base: RunConfig, workspace: Path) -> str:
    """``text`` with a new base; a first sweep of it when ``text`` holds no space yet."""
    if "space:" not in (text or ""):
        return first_sweep(base, unique_name(workspace))
    return with_base(text, base)


def starting_yaml(workspace: Path) -> str:
    """The YAML a fresh page shows: a first sweep of the demo preset, under a name no sweep has yet."""
    return first_sweep(load_config(PRESETS_DIR / "demo.yaml"), unique_name(workspace))


# --- start, stop, continue ------------------------------------------------------------------------------------------


def _refused(caller: Caller) -> Outcome | None:
    """Why this studio takes no sweep action (demo mode), in the caller's language; None when it may."""
    refusal = caller.policy.sweeps_refusal_in(caller.language)
    return Outcome(refusal, "warn") if refusal else None


def start(caller: Caller, sweep: str) -> Outcome:
    """Validate the YAML and start its sweep in the background; nothing starts on any problem (each named by its
    key). The same sweep again continues it. The message is in the caller's language."""
    refused = _refused(caller)
    if refused:
        return refused
    workspace, lang = caller.workspace, caller.language
    config, problems = check_text(sweep, workspace)
    if config is None:
        return Outcome(text(NOT_STARTED, lang, error="; ".join(problems_text(problems, lang))), "error")
    try:
        # The text as written becomes its sweep.yaml (a base named by its path written in: the folder stands alone).
        launch = start_sweep(workspace, sweep, SWEEP_PRESETS_DIR)
    except (ConfigError, SweepError, OSError) as exc:
        return Outcome(text(NOT_STARTED, lang, error=exc), "error")
    return Outcome(text(STARTED, lang, name=launch.name, pid=launch.pid), "ok", launch.name)


def stop(caller: Caller, name: str | None) -> Outcome:
    """Ask the sweep's driver to stop: the current trial's run saves a checkpoint, Continue picks it up. The
    message is in the caller's language."""
    refused = _refused(caller)
    if refused:
        return refused
    workspace, lang = caller.workspace, caller.language
    if not name:
        return Outcome(text(PICK, lang), "warn")
    if not stop_sweep(workspace, name):
        return Outcome(text(NOT_RUNNING, lang, name=name), "warn", name)
    return Outcome(text(STOPPING, lang, name=name), "warn", name)


def resume(caller: Caller, name: str | None) -> Outcome:
    """Continue a stopped (or finished with trials to spare) sweep with the sweep file it keeps. The message is in
    the caller's language."""
    refused = _refused(caller)
    if refused:
        return refused
    workspace, lang = caller.workspace, caller.language
    if not name:
        return Outcome(text(PICK, lang), "warn")
    with contextlib.suppress(SweepError):  # no study yet (its first driver ended early): continuing makes it
        summary = sweep_status(workspace, name)
        if summary.done >= summary.target:
            return Outcome(text(ALL_DONE, lang, name=name, target=summary.target), "warn", name)
    try:
        launch = continue_sweep(workspace, name)
    except (ConfigError, SweepError, OSError) as exc:
        return Outcome(text(NOT_CONTINUED, lang, error=exc), "error", name)
    return Outcome(text(CONTINUING, lang, name=name, pid=launch.pid), "ok", name)


# --- a new run from the best trial ----------------------------------------------------------------------------------


def best_values(caller: Caller, name: str | None) -> tuple[dict[str, Any] | None, Outcome]:
    """The Train form's values of the sweep's best trial (its run's config, named ``<sweep>-best``), to train it
    longer or on more data; None and why when there is none yet. The message is in the caller's language."""
    refused = _refused(caller)
    if refused:
        return None, refused
    workspace, lang = caller.workspace, caller.language
    if not name:
        return None, Outcome(text(PICK, lang), "warn")
    try:
        best = sweep_status(workspace, name).best
        if best is None or not best.run_id:
            return None, Outcome(text(NO_BEST, lang, name=name), "warn", name)
        config = load_config(resolve_run(workspace, best.run_id) / CONFIG_FILE)
    except (SweepError, ConfigError, runs.RunError) as exc:  # RunError: its run was deleted meanwhile
        return None, Outcome(text(CANNOT_LOAD_BEST, lang, name=name, error=exc), "error", name)
    values = config_to_values(config.model_copy(update={"name": f"{name}-best"}))
    message = text(BEST_LOADED, lang, number=best.number, name=name, run_id=best.run_id)
    return values, Outcome(message, "ok", name)
