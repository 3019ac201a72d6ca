"""The sweep file: a typed SweepConfig (pydantic, unknown keys refused) read from YAML, like RunConfig.

A sweep names a base RunConfig, a search space over its fields, the objective, how many trials to run and how
optuna samples and prunes them. Every problem is a ConfigError whose Problem names the key at fault; a space
entry is named ``space."train.learning_rate"`` (its key holds dots, so it is quoted as the config errors quote
such keys). The checks of the space against RunConfig's schema live in engine.sweeps.space.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import Field, ModelWrapValidatorHandler, ValidationError, field_validator, model_validator

from engine.config import ConfigError, Problem, RunConfig, load_config
from engine.config.names import NAME_MESSAGES, check_name
from engine.config.schema import Section
from engine.config.schema.errors import problems_from_validation
from engine.store.paths import find_local_path
from engine.sweeps.sections import (
    MAX_TRIALS,
    ExecutorSection,
    Objective,
    PrunerSection,
    SamplerSection,
    SpaceEntry,
)
from engine.sweeps.space import check_sweep

# A trial's run is named "<sweep>-trial-<number>"; a run name may take 120 characters (engine.config.names).
MAX_SWEEP_NAME_CHARS = 100
# What the sweep's own check across its base and executor says, and what reading a sweep file's text and its base
# says, by name (the studio says it again in the visitor's language: studio.i18n.problems, keys ``check.<name>``); a
# name's problems are engine.config.names', a base file's engine.config's, each said again inside ``base_problem``. A
# YAML error is as PyYAML wrote it.
SWEEP_MESSAGES = {
    "gpus_per_trial_below_processes": "{gpus} is fewer than the base's launch.num_processes ({processes}), one GPU "
    "each",
    "base_not_found": "run config not found: {path}",
    "base_problem": "{problem} (in {path})",
    "sweep_not_a_mapping": "a sweep file is a mapping: name, base, space, objective, trials, ...",
    "sweep_too_deep": "not a usable sweep file: values nested too deeply",
    "sweep_not_yaml_at": "not valid YAML (line {line}, column {column}): {error}",
    "sweep_not_yaml": "not valid YAML: {error}",
}


class SweepConfig(Section):
    """A hyperparameter sweep: trials of a base run with values from a search space, scored by one metric."""

    name: str = Field(
        ...,
        description="The sweep's name: its folder WORKSPACE/sweeps/<name>, and the start of its trials' run names.",
    )
    base: RunConfig = Field(
        ...,
        description=(
            "The run every trial starts from: a RunConfig written inline, or the path of a run YAML (relative to "
            "the sweep file's folder, else to the current directory or the project)."
        ),
    )
    space: dict[str, SpaceEntry] = Field(
        ...,
        min_length=1,
        description=(
            "The fields to vary, by their path in the run config (train.learning_rate, adapter.r, "
            "adapter.target_modules): a range {low, high, log} for a float field, {low, high, step} for a "
            "whole-number field, or {choices: [...]} for any field."
        ),
    )
    objective: Objective = Field(default_factory=Objective, description="The metric to optimize and its direction.")
    trials: int = Field(10, ge=1, le=MAX_TRIALS, description="How many trials to run (pruned and failed ones count).")
    sampler: SamplerSection = Field(default_factory=SamplerSection, description="How trial values are picked.")
    pruner: PrunerSection = Field(default_factory=PrunerSection, description="When a trial is stopped early.")
    time_budget_s: float | None = Field(
        None,
        gt=0,
        description="No new trial starts once this many seconds have passed since the sweep command started.",
    )
    seed: int = Field(42, ge=0, le=2**32 - 1, description="Seed of the sampler (the runs keep base's train.seed).")
    first_trials: list[dict[str, Any]] = Field(
        default_factory=list,
        description=(
            "Values to try first, in order (optuna's enqueue_trial), each a mapping of space entries to a value; "
            "an entry left out is sampled (grid: give every entry). E.g. the base's own values, as a baseline."
        ),
    )
    executor: ExecutorSection = Field(
        default_factory=ExecutorSection,
        description=(
            "Where the trials run: local (one at a time on this machine) or {kind: ray, address, gpus_per_trial, "
            "cpus_per_trial, max_concurrent_trials} (several at a time on a Ray cluster). Not part of what the "
            "study keeps: a sweep may be continued with another executor."
        ),
    )

    @field_validator("name")
    @classmethod
    def _usable_name(cls, value: str) -> str:
        """The name becomes a folder and part of every trial's run name."""
        name = check_name(value)
        if len(name) > MAX_SWEEP_NAME_CHARS:
            raise ValueError(NAME_MESSAGES["name_too_long"].format(length=len(name), limit=MAX_SWEEP_NAME_CHARS))
        return name

    @field_validator("base", mode="before")
    @classmethod
    def _base_from_path(cls, value: Any) -> Any:
        """A path is read as a run YAML (parse_sweep reads it first, naming each problem of that file)."""
        if not isinstance(value, str):
            return value
        try:
            return load_base(value, None)
        except ConfigError as exc:
            raise ValueError(str(exc).replace("\n", "; ")) from None

    @field_validator("sampler", "pruner", "executor", mode="before")
    @classmethod
    def _name_alone(cls, value: Any) -> Any:
        """``sampler: random`` is ``sampler: {kind: random}``."""
        return {"kind": value} if isinstance(value, str) else value

    @model_validator(mode="wrap")
    @classmethod
    def _check_space(cls, data: Any, handler: ModelWrapValidatorHandler[SweepConfig]) -> SweepConfig:
        """The space against RunConfig's schema, the objective against the base, the first trials against the
        space; each message starts with the key to fix."""
        config = handler(data)
        problems, changes = check_sweep(
            config.base, config.space, config.objective, config.sampler.kind, config.first_trials
        )
        if problems:
            raise ValueError("\n".join(str(problem) for problem in problems))
        executor, processes = config.executor, config.base.launch.num_processes
        if executor.kind == "ray" and 0 < executor.gpus_per_trial < processes:
            # Ray hides the other GPUs from the trial (CUDA_VISIBLE_DEVICES): its processes would share too few.
            words = SWEEP_MESSAGES["gpus_per_trial_below_processes"]
            fewer = words.format(gpus=f"{executor.gpus_per_trial:g}", processes=processes)
            raise ValueError(str(Problem("executor.gpus_per_trial", fewer)))
        # Values as the fields read them (YAML reads 3e-3 as text, the field as 0.003): one spelling per value,
        # so the study's parameters, and a later run of the same sweep, agree.
        return config.model_copy(update=changes)


def load_base(value: str, folder: Path | None) -> RunConfig:
    """The run YAML a sweep's ``base`` names: beside the sweep file first, else from the current directory or the
    project. ConfigError (field ``base``) when it is missing or not a valid run config."""
    beside = Path(folder) / value if folder is not None else None
    path = beside if beside is not None and beside.is_file() else find_local_path(value)
    if path is None or not path.is_file():
        raise ConfigError([Problem("base", SWEEP_MESSAGES["base_not_found"].format(path=value))])
    try:
        return load_config(path)
    except ConfigError as exc:
        in_base = SWEEP_MESSAGES["base_problem"]
        raise ConfigError(
            [
                Problem(f"base.{p.field}" if p.field else "base", in_base.format(problem=p.message, path=path))
                for p in exc.problems
            ]
        ) from None


def parse_sweep(data: Any, folder: Path | None = None) -> SweepConfig:
    """Validate a mapping (from YAML or a test) into a SweepConfig, or raise ConfigError naming every key at
    fault. A ``base`` given as a path is looked up from ``folder`` (the sweep file's) first."""
    if not isinstance(data, dict):
        raise ConfigError([Problem("", SWEEP_MESSAGES["sweep_not_a_mapping"])])
    if isinstance(data.get("base"), str):
        data = {**data, "base": load_base(data["base"], folder)}
    try:
        return SweepConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(problems_from_validation(exc, SweepConfig)) from None


def load_sweep(path: str | Path) -> SweepConfig:
    """Read and validate a sweep YAML file, or raise ConfigError saying what is wrong with it."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError([Problem("", f"sweep file not found: {path}")]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError([Problem("", f"cannot read sweep file {path}: {exc}")]) from None
    except yaml.YAMLError as exc:
        raise ConfigError([Problem("", f"{path} is not valid YAML: {exc}")]) from None
    return parse_sweep(data, path.parent)
