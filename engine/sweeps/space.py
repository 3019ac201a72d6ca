"""A sweep's search space against RunConfig's schema, and a trial's values applied to the base config.

Each space entry names a RunConfig field by its dotted path. The checks read the field's type and bounds from the
schema (pydantic's ``ge``/``gt``/``le``/``lt`` metadata) and build a RunConfig with each choice and each end of
each range, so a value the field (or a rule across fields) refuses is refused here, before any trial runs, with
the entry's name. No optuna here: the study turns entries into distributions (engine.sweeps.study).
"""

from __future__ import annotations

import copy
import difflib
import json
import types
from dataclasses import dataclass
from typing import Any, Literal, Union, get_args, get_origin

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from engine.config import ConfigError, Problem, RunConfig, parse_config
from engine.config.schema.errors import MESSAGES
from engine.sweeps.metrics import evaluates, known_metric, objective_metrics
from engine.sweeps.sections import EXACT_MATCH, Objective, SpaceEntry, entry_field
from engine.training.methods.base import QualityMetric, logged_by_evaluations

FieldKind = Literal["float", "int", "bool", "literal", "other"]
Label = None | bool | int | float | str  # what optuna's categorical distributions hold
TRIAL_NAMED = "name"  # set by the sweep: each trial's run is named after the sweep and the trial's number
# What the checks below say, by name: English with ``{placeholders}`` for what varies (a field's path, a value, a
# bound), the one definition of each message (the studio says it again in the visitor's language:
# studio.i18n.problems, keys ``check.<name>``). Every template here is filled in, so a brace of YAML to write is
# doubled ({{choices: [...]}}); a ``{problem}`` is another of the engine's messages, said again in turn. A field the
# run config lacks has a template with a close name and one without, in a section and in the whole config (whose
# words are said again too, not given as a value).
SPACE_MESSAGES = {
    "entry_not_a_section": "{section} is a value, not a section: the run config has no {path}",
    "entry_not_a_top_field_close": "not a field of the run config: the run config has no {name} (did you mean "
    "{close}?)",
    "entry_not_a_top_field": "not a field of the run config: the run config has no {name}",
    "entry_not_a_field_close": "not a field of the run config: {section} has no {name} (did you mean {close}?)",
    "entry_not_a_field": "not a field of the run config: {section} has no {name}",
    "entry_named_by_sweep": "set by the sweep: each trial's run is named after the sweep and the trial's number",
    "choice_twice": "the choice {value} is listed twice",
    "range_on_bool": "{path} is true or false, not a number: use {{choices: [true, false]}}",
    "range_on_literal": "{path} takes one of {values}: use {{choices: [...]}}",
    "range_on_other": "{path} is not a number field: a range needs one; use {{choices: [...]}}",
    "step_on_float": "step is for whole-number fields; {path} is a float: give {{low, high, log}}",
    "range_not_whole": "{path} is a whole number: low and high must be whole numbers",
    "range_off_step": "high - low ({span}) must be a multiple of step ({step})",
    "low_beyond": "low {value} is outside the field's bounds: {path} {problem}",
    "high_beyond": "high {value} is outside the field's bounds: {path} {problem}",
    # Before a choice's refusal, which reads "low 0 is refused: ..." too (a choice is shown as JSON: never "low ...").
    "low_refused": "low {value} is refused: {field}: {problem}",
    "high_refused": "high {value} is refused: {field}: {problem}",
    "value_refused": "{value} is refused: {field}: {problem}",
    "objective_not_of_method": "{metric} does not tell how well a {method} run does: choose {metrics}, or another "
    "key its runs log",
    "objective_needs_eval": "{metric} needs runs that evaluate: set base's train.eval_strategy to steps or epoch "
    "(with eval data), or choose {other}",
    "objective_choice_no_eval": "the choice no logs no {metric}, the objective",
    "exact_match_eval_set": "exact_match is scored on the eval set: give base a data.eval_path or a data.eval_size",
    "objective_maximize": "{metric} is better when higher: set direction to maximize",
    "objective_minimize": "{metric} is better when lower: set direction to minimize",
    "grid_float_range": "the grid sampler needs choices or a whole-number range; give choices",
    "first_not_in_space": "{path} is not an entry of the space ({entries})",
    "first_grid_missing": "the grid sampler needs a value for every entry; {path} has none",
    "first_not_a_choice": "{path}: {value} is not one of its choices",
    "first_outside_range": "{path}: {value} is outside its range [{low}, {high}]",
    "first_off_steps": "{path}: {value} is not on its steps (low {low}, step {step})",
}


def _said(message: str, /, **values: object) -> str:
    """The message ``message`` of SPACE_MESSAGES with its values filled in."""
    return SPACE_MESSAGES[message].format(**values)


class EntryProblem(ValueError):
    """Why a space entry (or a value of it) cannot be used; the caller names the entry."""


@dataclass(frozen=True)
class FieldSpot:
    """A RunConfig field found by its dotted path: what kind of value it holds and its pydantic field info."""

    path: str
    kind: FieldKind
    info: FieldInfo


def find_field(path: str) -> FieldSpot:
    """The RunConfig field at ``path`` (``train.learning_rate``), or EntryProblem saying where the path goes wrong."""
    model: type[BaseModel] | None = RunConfig
    parts = path.split(".")
    info: FieldInfo | None = None
    for index, part in enumerate(parts):
        if model is None:
            raise EntryProblem(_said("entry_not_a_section", section=".".join(parts[:index]), path=path))
        info = model.model_fields.get(part)
        if info is None:
            close = difflib.get_close_matches(part, list(model.model_fields), n=1)
            message = ("entry_not_a_field" if index else "entry_not_a_top_field") + ("_close" if close else "")
            section, nearest = ".".join(parts[:index]), ".".join([*parts[:index], *close[:1]])
            raise EntryProblem(_said(message, section=section, name=part, close=nearest))
        annotation = info.annotation
        model = annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None
    assert info is not None
    return FieldSpot(path, _kind(info.annotation), info)


def _kind(annotation: Any) -> FieldKind:
    """float, int, bool, literal, or other (text, lists, sections: choices only); ``X | None`` is X."""
    if get_origin(annotation) in (Union, types.UnionType):
        members = [arg for arg in get_args(annotation) if arg is not type(None)]
        annotation = members[0] if len(members) == 1 else annotation
    if annotation is bool:
        return "bool"
    if annotation is int:
        return "int"
    if annotation is float:
        return "float"
    return "literal" if get_origin(annotation) is Literal else "other"


def value_at(data: dict[str, Any], path: str) -> Any:
    """The value at a dotted path of a config's mapping."""
    for part in path.split("."):
        data = data[part]
    return data


def with_value(data: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A deep copy of a config's mapping with the dotted path set to ``value``."""
    changed = copy.deepcopy(data)
    *sections, leaf = path.split(".")
    target = changed
    for part in sections:
        target = target.setdefault(part, {})
    target[leaf] = value
    return changed


def build(base: dict[str, Any], path: str, value: Any) -> RunConfig:
    """The base config's mapping with one field changed, validated (ConfigError when refused)."""
    return parse_config(with_value(base, path, value))


def canonical(base: dict[str, Any], path: str, value: Any) -> Any:
    """``value`` as the field reads it (``"3e-3"`` -> 0.003, ``"q_proj, v_proj"`` -> a list), or EntryProblem
    with the field's (or a cross-field rule's) reason to refuse it."""
    try:
        config = build(base, path, value)
    except ConfigError as exc:
        problem = exc.problems[0]  # a config built from a mapping names the field of each of its problems
        words = _said("value_refused", value=_shown(value), field=problem.field, problem=problem.message)
        raise EntryProblem(words) from None
    return value_at(config.model_dump(mode="json"), path)


def choice_label(value: Any) -> Label:
    """The value optuna records for a choice: the value itself when it is a plain scalar, else its JSON text (a
    list of module names, a mapping)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return json.dumps(value, sort_keys=True)


def choice_labels(entry: SpaceEntry) -> list[Label]:
    """The labels of an entry's choices, in order."""
    return [choice_label(choice) for choice in entry.choices or []]


def value_of(entry: SpaceEntry, spot_kind: FieldKind, param: Any) -> Any:
    """The config value of an optuna parameter: a choice from its label, a whole number for an int range."""
    if not entry.is_range:
        return (entry.choices or [])[choice_labels(entry).index(param)]
    return int(param) if spot_kind == "int" else float(param)


def apply(base: RunConfig, params: dict[str, Any], space: dict[str, SpaceEntry], name: str) -> RunConfig:
    """The trial's RunConfig: the base with each parameter's value, named ``name``; ConfigError when the values
    together break a rule across fields (each alone was checked when the sweep was read)."""
    data = base.model_dump(mode="json")
    for path, param in params.items():
        data = with_value(data, path, value_of(space[path], find_field(path).kind, param))
    return parse_config({**data, TRIAL_NAMED: name})


def _shown(value: Any) -> str:
    return json.dumps(value) if not isinstance(value, float) else f"{value:g}"


def check_entry(path: str, entry: SpaceEntry, base: dict[str, Any]) -> SpaceEntry:
    """The entry with its choices as the field reads them, or EntryProblem: a path the run config does not have, a
    range on a field that is not a number, a bound beyond the field's own, a value the field refuses."""
    if path == TRIAL_NAMED:
        raise EntryProblem(_said("entry_named_by_sweep"))
    spot = find_field(path)
    if entry.is_range:
        _check_range(spot, entry, base)
        return entry
    choices = [canonical(base, path, choice) for choice in entry.choices or []]
    labels = [choice_label(choice) for choice in choices]
    repeated = next((choice for choice, label in zip(choices, labels, strict=True) if labels.count(label) > 1), None)
    if repeated is not None:
        raise EntryProblem(_said("choice_twice", value=_shown(repeated)))
    return entry.model_copy(update={"choices": choices})


def _check_range(spot: FieldSpot, entry: SpaceEntry, base: dict[str, Any]) -> None:
    low, high = float(entry.low or 0), float(entry.high or 0)
    if spot.kind == "bool":
        raise EntryProblem(_said("range_on_bool", path=spot.path))
    if spot.kind == "literal":
        raise EntryProblem(_said("range_on_literal", path=spot.path, values=list(get_args(spot.info.annotation))))
    if spot.kind == "other":
        raise EntryProblem(_said("range_on_other", path=spot.path))
    if spot.kind == "float" and entry.step is not None:
        raise EntryProblem(_said("step_on_float", path=spot.path))
    if spot.kind == "int":
        if not (low.is_integer() and high.is_integer()):
            raise EntryProblem(_said("range_not_whole", path=spot.path))
        step = entry.step or 1
        if (high - low) % step:
            raise EntryProblem(_said("range_off_step", span=f"{high - low:g}", step=step))
    beyond = _beyond_bounds(spot, low, high)
    if beyond:
        raise EntryProblem(beyond[0])
    for end, value in (("low", low), ("high", high)):
        typed = int(value) if spot.kind == "int" else value
        try:
            build(base, spot.path, typed)
        except ConfigError as exc:
            problem = exc.problems[0]
            words = _said(f"{end}_refused", value=f"{typed:g}", field=problem.field, problem=problem.message)
            raise EntryProblem(words) from None


def _beyond_bounds(spot: FieldSpot, low: float, high: float) -> list[str]:
    """A range end outside the field's own bounds, in the words of the config errors (``must be > 0``)."""
    found = []
    for rule in spot.info.metadata:
        if isinstance(rule, annotated_types.Ge) and low < rule.ge:
            bound = MESSAGES["greater_than_equal"].format(ge=f"{rule.ge:g}")
        elif isinstance(rule, annotated_types.Gt) and low <= rule.gt:
            bound = MESSAGES["greater_than"].format(gt=f"{rule.gt:g}")
        elif isinstance(rule, annotated_types.Le) and high > rule.le:
            bound = MESSAGES["less_than_equal"].format(le=f"{rule.le:g}")
        elif isinstance(rule, annotated_types.Lt) and high >= rule.lt:
            bound = MESSAGES["less_than"].format(lt=f"{rule.lt:g}")
        else:
            continue
        end, value = ("low", low) if isinstance(rule, (annotated_types.Ge, annotated_types.Gt)) else ("high", high)
        found.append(_said(f"{end}_beyond", value=f"{value:g}", path=spot.path, problem=bound))
    return found


def check_sweep(
    base: RunConfig,
    space: dict[str, SpaceEntry],
    objective: Objective,
    sampler: str,
    first_trials: list[dict[str, Any]],
) -> tuple[list[Problem], dict[str, Any]]:
    """Every problem of a sweep beyond the shape of its keys (each naming the key at fault), and the changes that
    spell its values as the fields read them (for SweepConfig's ``model_copy(update=...)``)."""
    data = base.model_dump(mode="json")
    problems: list[Problem] = []
    checked: dict[str, SpaceEntry] = {}
    for path, entry in space.items():
        try:
            checked[path] = check_entry(path, entry, data)
        except EntryProblem as exc:
            problems.append(Problem(entry_field(path), str(exc)))
    problems += _objective_problems(base, objective, checked)
    problems += _grid_problems(sampler, checked)
    first, first_problems = _first_trials(space, checked, data, first_trials, sampler)
    return problems + first_problems, {"space": checked, "first_trials": first}


def _objective_problems(base: RunConfig, objective: Objective, space: dict[str, SpaceEntry]) -> list[Problem]:
    """A metric the methods list must be one of the base's method (engine.sweeps.metrics), and is optimized its
    way; an eval_ metric is logged only by runs that evaluate, and exact_match needs an eval set."""
    metric, offered = objective.metric, objective_metrics(base)
    known = known_metric(metric)
    if known is not None and known not in offered:
        listed = ", ".join(each.key for each in offered)
        return [
            Problem(
                "objective.metric", _said("objective_not_of_method", metric=metric, method=base.method, metrics=listed)
            )
        ]
    problems = _eval_problems(base, metric, offered, space)
    if known is not None and objective.direction != known.direction:
        problems.append(Problem("objective.direction", _said(f"objective_{known.direction}", metric=metric)))
    return problems


def _eval_problems(
    base: RunConfig, metric: str, offered: tuple[QualityMetric, ...], space: dict[str, SpaceEntry]
) -> list[Problem]:
    """Where the objective needs eval data or evaluations that ``base`` (or a choice of the space) lacks."""
    if metric == EXACT_MATCH:
        return [] if base.has_eval_data else [Problem("objective.metric", _said("exact_match_eval_set"))]
    if not logged_by_evaluations(metric):
        return []
    if not evaluates(base):
        other = next((each.key for each in offered if not each.needs_eval and each.key != EXACT_MATCH), "train_loss")
        return [Problem("objective.metric", _said("objective_needs_eval", metric=metric, other=other))]
    strategy = space.get("train.eval_strategy")
    if strategy is not None and "no" in (strategy.choices or []):
        return [Problem(entry_field("train.eval_strategy"), _said("objective_choice_no_eval", metric=metric))]
    return []


def _grid_problems(sampler: str, space: dict[str, SpaceEntry]) -> list[Problem]:
    """A grid holds choices and whole-number ranges only: a float range has no grid points."""
    if sampler != "grid":
        return []
    return [
        Problem(entry_field(path), _said("grid_float_range"))
        for path, entry in space.items()
        if entry.is_range and find_field(path).kind == "float"
    ]


def _first_trials(
    space: dict[str, SpaceEntry],
    checked: dict[str, SpaceEntry],
    base: dict[str, Any],
    first_trials: list[dict[str, Any]],
    sampler: str,
) -> tuple[list[dict[str, Any]], list[Problem]]:
    """The first trials with their values as the fields read them, and their problems (``first_trials.N``)."""
    normalized, problems = [], []
    for index, values in enumerate(first_trials):
        try:
            unknown = [path for path in values if path not in space]
            if unknown:
                raise EntryProblem(_said("first_not_in_space", path=unknown[0], entries=", ".join(space)))
            missing = [path for path in space if path not in values]
            if sampler == "grid" and missing:
                raise EntryProblem(_said("first_grid_missing", path=missing[0]))
            # An entry refused itself is skipped: its problem is said at the entry.
            given = {path: value for path, value in values.items() if path in checked}
            normalized.append({path: _first_value(path, checked[path], base, value) for path, value in given.items()})
        except EntryProblem as exc:
            problems.append(Problem(f"first_trials.{index}", str(exc)))
    return normalized, problems


def _first_value(path: str, entry: SpaceEntry, base: dict[str, Any], value: Any) -> Any:
    """A first trial's value of one entry: among its choices, or within its range (on its steps)."""
    typed = canonical(base, path, value)
    if not entry.is_range:
        if typed not in (entry.choices or []):
            raise EntryProblem(_said("first_not_a_choice", path=path, value=_shown(typed)))
        return typed
    low, high = float(entry.low or 0), float(entry.high or 0)
    if not isinstance(typed, (int, float)) or not low <= typed <= high:
        raise EntryProblem(
            _said("first_outside_range", path=path, value=_shown(typed), low=f"{low:g}", high=f"{high:g}")
        )
    if find_field(path).kind == "int" and (typed - low) % (entry.step or 1):
        raise EntryProblem(_said("first_off_steps", path=path, value=typed, low=f"{low:g}", step=entry.step or 1))
    return typed
