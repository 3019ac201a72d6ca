"""What the Train tab's buttons do, as plain functions of plain values (tested without a browser).

Widget values travel as ``dict[path, value]`` (see studio.form.schema); results are small dataclasses that the tab
turns into component updates.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shlex
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml

from engine.api import (
    BUNDLED_MODELS,
    ConfigError,
    DataError,
    Problem,
    RunConfig,
    configs_dir,
    confine,
    decoded_bytes,
    init_from_problems,
    load_config,
    method_of,
    model_source_fields,
    name_problem,
    parse_config,
    pinned,
    recent_models_file,
    run_source_fields,
    runs_dir,
    runs_with_weights,
    save_config,
    write_text_atomic,
)
from studio.demo.caller import Caller
from studio.demo.policy import DATA_REFUSED, MB, NORMAL, VISITOR_DATA_FIELDS, DemoPolicy, widget_data_allowed
from studio.form.run_config import form_config
from studio.form.values import config_to_values, default_values, values_to_config
from studio.form.yaml_lists import map_dataset_paths
from studio.i18n.catalog import SOURCE, key, text
from studio.i18n.problems import translate_problem
from studio.i18n.widgets import marked
from studio.markup import text_block
from studio.path_guard import ASSETS_DIR, confine_file, gradio_upload_dir, named_paths
from studio.train import reward_files
from studio.train.dataset import (
    DatasetCheck,
    check_dataset,
    copy_upload,
    error_markdown,
    problem_text,
    problems_text,
)
from studio.train.run_length import warmup_warning

PRESETS_DIR = ASSETS_DIR / "presets"
DEMO_PRESET = "demo.yaml"
MAX_RECENT = 10
NO_INIT_SOURCE = marked("train.init_from.none")  # the page shows it in its language
NO_VALUE = marked("form.none_choice")
# The fields that name a model or a run (distill's teacher): a pick among the models and the workspace's runs.
MODEL_OR_RUN_FIELDS = tuple(path for path in model_source_fields() if path in run_source_fields())
PRESET_LABEL, SAVED_LABEL = marked("train.config.preset"), marked("train.config.saved_label")
FORM_PROBLEMS = key("train.preview.problems")
DEMO_NO_SAVE, NOT_SAVED_PROBLEMS, BAD_NAME, NO_NAME, NOT_SAVED, SAVED = (
    key(f"train.config.{name}")
    for name in ("demo_no_save", "not_saved_problems", "bad_name", "no_name", "not_saved", "saved")
)
UNREADABLE, TOO_DEEP, BAD_YAML, AT = (
    key(f"train.config.{name}") for name in ("unreadable", "too_deep", "bad_yaml", "at")
)
CANNOT_LOAD, LOADED, SET_BACK = (key(f"train.config.{name}") for name in ("cannot_load", "loaded", "set_back"))
NO_VISITOR_YET, NOT_UPLOADED = key("train.upload.no_visitor"), key("train.upload.refused")
R = TypeVar("R")


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
    """The model picker's list: the bundled demo models, then recent ones (only the bundled ones in demo mode)."""
    return list(BUNDLED_MODELS) if policy.enabled else list(dict.fromkeys([*BUNDLED_MODELS, *recent_models(workspace)]))


def init_from_choices(caller: Caller) -> list[tuple[str, str]]:
    """The start-from picker's list as (label, run id): starting from the base model first, then the workspace's
    finished runs that have weights, newest first (in demo mode only the caller's own)."""
    finished = [
        (f"{run.name} · {run.run_dir.name}", run.run_dir.name)
        for run in runs_with_weights(caller.workspace)
        if caller.owns(run.status.owner)
    ]
    return [(NO_INIT_SOURCE, ""), *finished]


def model_or_run_choices(caller: Caller) -> list[tuple[str, str]]:
    """The picker's list of a field that names a model or a run (MODEL_OR_RUN_FIELDS, all optional): none, the
    models of the base model's picker, then the workspace's finished runs with weights whose model writes text,
    newest first (in demo mode only the caller's own), each as its run id."""
    models = [(model, model) for model in model_choices(caller.workspace, caller.policy)]
    finished = [
        (f"{run.name} · {run.run_dir.name}", run.run_dir.name)
        for run in runs_with_weights(caller.workspace)
        if caller.owns(run.status.owner) and method_of(run.config).model.generates
    ]
    return [(NO_VALUE, ""), *models, *finished]


def own_runs_named(caller: Caller, config: RunConfig) -> list[str]:
    """In demo mode, the run ids (not paths) of the caller's own runs among ``config``'s fields that name a run
    (model.init_from, distill's teacher: run_source_fields): the runs it may use; [] outside demo mode, where the
    policy asks nothing of them. Reads a status file each, since the preview asks on every change; whether such a
    run has weights is lineage's check (continued_config) and the method's."""
    if not caller.policy.enabled:
        return []
    named = [value for _, value in named_paths(config, run_source_fields())]
    return [run_id for run_id in dict.fromkeys(named) if Path(run_id).name == run_id and caller.owns_run_id(run_id)]


def starting_values() -> dict[str, Any]:
    """What the form shows on a fresh page: the demo preset, so that Start trains something at once."""
    values, _ = load_config_values(None, PRESETS_DIR / DEMO_PRESET)
    return values if values is not None else default_values()


# --- preview ------------------------------------------------------------------------------------------------


@dataclass
class Preview:
    """The YAML and CLI the form stands for, or the problems that stop it."""

    yaml: str
    command: str
    errors: dict[str, str] = field(default_factory=dict)  # path -> message, empty when the form is valid
    config: RunConfig | None = None
    warnings: list[str] = field(default_factory=list)  # what a valid form may not mean (studio.train.run_length)


def run_dir_hint(config: RunConfig, workspace: Path) -> str:
    """Where the CLI command would write: WORKSPACE/runs/<name>."""
    slug = re.sub(r"[^a-zA-Z0-9._-]+", "-", config.name or "my-run").strip("-") or "my-run"
    return str(runs_dir(workspace) / slug)


def checked_config(caller: Caller, values: Mapping[str, Any]) -> RunConfig:
    """The form's config with its paths confined to the caller's workspace and the demo's limits applied (the
    caller's upload folder, whose files the demo's form names by their names; the caller's runs, which it may start
    from), and a custom reward's relative file read from the workspace (studio.train.reward_files); raises
    ConfigError naming each field at fault (the demo's refusals and a missing reward file said in the caller's
    language)."""
    uploads = caller.uploads
    config = form_config(upload_paths(caller, values), caller.workspace)
    problems = caller.policy.problems(config, uploads, own_runs_named(caller, config), caller.language)
    if problems:
        raise ConfigError(problems)
    return reward_files.resolved(continued_config(config, caller.workspace), caller.workspace, caller.language)


def continued_config(config: RunConfig, workspace: Path) -> RunConfig:
    """``config`` with its ``model.init_from`` checked against the workspace's runs (engine.runs.lineage: the run
    exists, has weights, the same base and adapter) and written as the directory it names, as the run will save
    it; ConfigError naming each field to fix. Reads a few small files, no torch: the preview can ask on every
    change."""
    problems = init_from_problems(config, workspace)
    if problems:
        raise ConfigError(problems)
    return pinned(config, workspace)


def upload_paths(caller: Caller, values: Mapping[str, Any]) -> dict[str, Any]:
    """The form's values with a data path that is the name of a file the caller uploaded (how the demo's form
    shows an upload: no server folder) as that file's path; unchanged outside demo mode."""
    values, uploads = dict(values), caller.uploads
    if caller.policy.enabled and uploads is not None:

        def to_path(name: str) -> str:
            return str(uploads / name) if name and Path(name).name == name and (uploads / name).is_file() else name

        for path in VISITOR_DATA_FIELDS:
            values[path] = _each_path(path, values.get(path), to_path)
    return values


def _each_path(field: str, value: Any, change: Callable[[str], str]) -> Any:
    """A data path widget's value with ``change`` applied to its path: for data.path to each dataset of a YAML list
    too (studio.form.yaml_lists.map_dataset_paths). An empty value stays as it is."""
    if not value:
        return value
    return map_dataset_paths(value, change) if field == "data.path" else change(str(value))


def upload_names(caller: Caller, values: Mapping[str, Any]) -> dict[str, Any]:
    """The reverse of ``upload_paths``: in demo mode, a data path in the caller's upload folder as its file name."""
    values, uploads = dict(values), caller.uploads
    if caller.policy.enabled and uploads is not None:

        def to_name(value: str) -> str:
            return Path(value).name if value and _in_folder(value, uploads) else value

        for path in VISITOR_DATA_FIELDS:
            values[path] = _each_path(path, values.get(path), to_name)
    return values


def _in_folder(value: str, folder: Path) -> bool:
    """Whether the path ``value`` names a file right inside ``folder`` (symlinks resolved)."""
    try:
        return Path(value).expanduser().resolve().parent == folder.resolve()
    except (OSError, RuntimeError, ValueError):  # a name no file system takes
        return False


def demo_data_problems(caller: Caller, values: Mapping[str, Any]) -> dict[str, str]:
    """In demo mode: path -> why (in the caller's language) a dataset path of the form may not be read (a bundled
    set or one of the caller's uploads only)."""
    if not caller.policy.enabled:
        return {}
    values, uploads = upload_paths(caller, values), caller.uploads
    refusal = caller.say(DATA_REFUSED)
    return {path: refusal for path in VISITOR_DATA_FIELDS if not widget_data_allowed(path, values.get(path), uploads)}


def preview(caller: Caller, values: Mapping[str, Any]) -> Preview:
    """The config as YAML and the equivalent command line, with warnings of a valid config (a warm-up longer than the
    run); on invalid input the per-field problems (the YAML's
    list of them in the caller's language; the errors by field as the engine and the demo wrote them, said again
    where they are shown). In demo mode they name the caller's upload as ``mine.jsonl`` and the run folder as
    ``workspace/runs/...`` (``config`` keeps the real paths)."""
    workspace, lang = caller.workspace, caller.language
    try:
        config = checked_config(caller, values)
    except ConfigError as exc:
        listing = "\n".join(f"# {problem_text(problem, lang)}" for problem in exc.problems)
        result = Preview(f"# {text(FORM_PROBLEMS, lang)}\n{listing}", "", exc.by_field())
    else:
        command = f"python -m engine train config.yaml --run-dir {shlex.quote(run_dir_hint(config, workspace))}"
        warnings = [warning for warning in [warmup_warning(config, lang=lang)] if warning]
        result = Preview(config.to_yaml(), command, {}, config, warnings)
    return shown_fields(caller, result, "yaml", "command", "errors")


def shown_fields(caller: Caller, result: R, *names: str) -> R:
    """A handler's result (a dataclass) with the text of the fields ``names`` as the caller's page may show it: in
    demo mode without server paths (Caller.shown), unchanged otherwise."""
    if not caller.policy.enabled:
        return result
    return dataclasses.replace(result, **{name: caller.shown(getattr(result, name)) for name in names})


# --- save / load ----------------------------------------------------------------------------------------------


def config_name(name: str) -> str:
    """A safe file stem from what the user typed ('' when nothing usable is left)."""
    return re.sub(r"[^a-zA-Z0-9._-]+", "-", name.strip()).strip("-.")


def save_config_as(caller: Caller, values: Mapping[str, Any], name: str) -> tuple[Path | None, Path | None, str]:
    """Save the form as ``WORKSPACE/configs/NAME.yaml``; returns (saved, download copy, message in the caller's
    language).

    Not in demo mode: visitors share the workspace, and the YAML tab shows the config to copy.
    """
    lang = caller.language
    if caller.policy.enabled:
        return None, None, text(DEMO_NO_SAVE, lang)
    try:
        config = values_to_config(values)
    except ConfigError as exc:
        return None, None, f"{text(NOT_SAVED_PROBLEMS, lang)}\n\n{text_block(problems_text(exc, lang))}"
    typed = name or config.name or ""
    problem = name_problem(typed) if typed.strip() else None  # the rule every name that becomes a file obeys
    if problem:
        return None, None, text(BAD_NAME, lang, problem=translate_problem(problem, lang))
    stem = config_name(typed)
    if not stem:
        return None, None, text(NO_NAME, lang)
    target = configs_dir(caller.workspace) / f"{stem}.yaml"
    try:
        save_config(config, target)
        # Gradio serves downloads from the temp dir; the workspace may lie outside the paths it allows.
        download = Path(tempfile.mkdtemp(prefix="ts-config-")) / target.name
        download.write_text(config.to_yaml(), encoding="utf-8")
    except OSError as exc:
        return None, None, text(NOT_SAVED, lang, error=exc)
    return target, download, text(SAVED, lang, path=target)


def read_config(path: str | Path, lang: str = SOURCE) -> RunConfig:
    """Read a YAML config file; raises ConfigError with a clear message (in ``lang`` where the file cannot be
    read as YAML) for bad YAML or bad fields."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError([Problem("", text(UNREADABLE, lang, name=path.name, error=exc))]) from None
    except RecursionError:  # PyYAML composes nested lists and mappings recursively
        raise ConfigError([Problem("", text(TOO_DEEP, lang, name=path.name))]) from None
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        at = text(AT, lang, line=where.line + 1, column=where.column + 1) if where else ""
        problem = getattr(exc, "problem", None) or exc
        raise ConfigError([Problem("", text(BAD_YAML, lang, name=path.name, at=at, problem=problem))]) from None
    return parse_config(data)


def load_config_values(caller: Caller | None, path: str | Path | None) -> tuple[dict[str, Any] | None, str]:
    """Widget values for a config file, or None and a message (in the caller's language) saying what is wrong
    with it.

    The file must lie in the folders the studio may read (studio.path_guard; the caller's workspace among them). In
    demo mode only a preset or an upload loads, and the fields the demo fixes are set back (the message says which).
    Without a caller (the fresh page's preset, read for no one): no workspace, no demo limits, in English.
    """
    if not path:
        return None, ""
    workspace, lang = (caller.workspace, caller.language) if caller is not None else (None, SOURCE)
    try:
        if caller is not None and caller.policy.enabled:
            confine(path, [PRESETS_DIR, gradio_upload_dir()])
        config = read_config(confine_file(path, workspace, "config file"), lang)
    except ValueError as exc:  # ConfigError or PathNotAllowed
        problems = problems_text(exc, lang)
        why = text_block(caller.shown(problems) if caller is not None else problems)
        return None, f"{text(CANNOT_LOAD, lang, name=Path(path).name)}\n\n{why}"
    values, changed = config_to_values(config), []
    if caller is not None:
        # An upload reads as its name in the demo's YAML (Caller.shown): a config copied from there loads back.
        values, changed = caller.policy.restrict_values(
            upload_paths(caller, values), caller.uploads, caller.owns_run_id
        )
        values = upload_names(caller, values)
    note = text(SET_BACK, lang, fields=", ".join(changed)) if changed else ""
    return values, text(LOADED, lang, name=Path(path).name, note=note)


def config_files(workspace: Path, policy: DemoPolicy = NORMAL) -> list[tuple[str, str]]:
    """(label, path) of the bundled presets and the workspace's saved configs (presets only in demo mode); the
    labels' words are translated by the page."""
    presets = [(f"{PRESET_LABEL} {p.stem}", str(p)) for p in sorted(PRESETS_DIR.glob("*.y*ml"))]
    if policy.enabled:  # those a visitor can start as they are
        return [(label, path) for label, path in presets if not policy.problems(load_config(path))]
    saved = [(f"{SAVED_LABEL} {p.stem}", str(p)) for p in sorted(configs_dir(workspace).glob("*.y*ml"))]
    return presets + saved


# --- dataset ----------------------------------------------------------------------------------------------------


def upload_dataset(caller: Caller, path: str | Path) -> tuple[str | None, str]:
    """Copy a dataset the page uploaded where the form can name it (studio.train.dataset.copy_upload): its path for
    data.path (None when refused) and a Markdown error for the dataset panel ("" when none).

    In demo mode each visitor's uploads have a folder of their own (no one else's run can name them), within their
    disk quota; the form names the copy by its file name (``upload_paths`` finds it again) and an error names files
    as the visitor knows them. The error is in the caller's language, as far as the studio writes it.
    """
    lang, demo = caller.language, caller.policy.enabled
    folder = caller.uploads if demo else None
    if demo and folder is None:
        return None, error_markdown(text(NO_VISITOR_YET, lang), lang)
    stored = Path(path).stat().st_size
    try:  # in the demo, what the file holds once read counts (a 523-byte Parquet file held 1.5 GB)
        held = decoded_bytes(Path(path), max_bytes=int(caller.policy.upload_limit_mb * MB)) if demo else stored
    except DataError as exc:
        return None, error_markdown(text(NOT_UPLOADED, lang, reason=caller.shown(str(exc))), lang)
    refusal = caller.upload_refusal(held, stored)
    if refusal:
        return None, error_markdown(text(NOT_UPLOADED, lang, reason=refusal), lang)
    try:
        # A visitor may upload again a file of their own folder, never one elsewhere in the shared workspace.
        copied = copy_upload(path, folder or caller.workspace, folder, lang)
        return copied.name if folder is not None else str(copied), ""
    except (ValueError, OSError) as exc:
        return None, error_markdown(caller.shown(str(exc)), lang)


def check_data(caller: Caller, values: Mapping[str, Any], with_tokens: bool = True) -> DatasetCheck:
    """The dataset panel's check (studio.train.dataset.check_dataset), its words in the caller's language. In demo
    mode a data path that is neither a bundled set nor the caller's upload is refused unread, the suggested
    max_length stays within the demo's, and the summary and error name files as the visitor knows them
    (``mine.jsonl``), not by their server paths."""
    policy, lang = caller.policy, caller.language
    values = upload_paths(caller, values)
    problems = demo_data_problems(caller, values)
    if problems:
        listing = "\n".join(f"{path}: {why}" for path, why in problems.items())
        return DatasetCheck("", "", error_markdown(listing, lang))
    cap = policy.max_length if policy.enabled else None
    result = check_dataset(values, with_tokens, workspace=caller.workspace, max_length_cap=cap, lang=lang)
    return shown_fields(caller, result, "summary", "error")
