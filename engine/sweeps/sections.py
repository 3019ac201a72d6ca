"""The sections of a sweep file (engine.sweeps.config.SweepConfig): a space entry, the objective, the sampler, the
pruner and the executor. Shapes only; what they mean against the run config is checked in engine.sweeps.space."""

from __future__ import annotations

import importlib.util
import json
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from engine.config.schema import Section

MAX_TRIALS = 10_000
# The objective that Evaluate scores once a trial's run completes (engine.sweeps.evaluated), not read from metrics
EXACT_MATCH = "exact_match"
# What the sections' own checks below say, by name: English with ``{placeholders}`` for what varies (field names,
# bounds), the one definition of each message (the studio says it again in the visitor's language:
# studio.i18n.problems, keys ``check.<name>``). The braces of {low, high} and {choices: [...]} are YAML to write, not
# placeholders.
SWEEP_SECTION_MESSAGES = {
    "range_and_choices": "give either choices or a range, not both (found choices and {fields})",
    "range_or_choices": "give a range {low, high} (with log or step) or {choices: [...]}",
    "range_low_not_below_high": "low ({low}) must be below high ({high})",
    "log_range_low": "a log range needs low above 0 (got {low})",
    "log_range_step": "a log range cannot have a step",
    "executor_address": "one word without spaces: HOST:PORT, ray://HOST:PORT or auto",
    "executor_ray_only": "{fields}: only for kind ray (local runs one trial at a time here)",
    "executor_ray_missing": "kind ray needs the ray package, which is not installed: pip install 'ray[default]'",
    "executor_no_resources": "a trial must hold some GPUs or CPUs (gpus_per_trial and cpus_per_trial are both 0)",
}


def entry_field(path: str) -> str:
    """The Problem field of a space entry: ``space."train.learning_rate"`` (quoted, as the config errors quote a
    key that holds dots)."""
    return f"space.{json.dumps(path)}"


class SpaceEntry(Section):
    """The values one RunConfig field takes in the sweep: a range (``low``, ``high``, and ``log`` for a float
    field or ``step`` for a whole-number field) or a list of ``choices``."""

    low: float | None = Field(None, description="Range: the lowest value (a number field only).")
    high: float | None = Field(None, description="Range: the highest value, included.")
    log: bool = Field(False, description="Range: sample on a log scale (both bounds above 0), as learning rates are.")
    step: int | None = Field(
        None, ge=1, description="Range of a whole-number field: take every step-th value from low (default 1)."
    )
    choices: list[Any] | None = Field(
        None,
        min_length=1,
        description="The values to try, each one the field accepts: for literals, booleans, lists and anything else.",
    )

    @model_validator(mode="after")
    def _range_or_choices(self) -> SpaceEntry:
        """Exactly one of the two forms; a range has both bounds, low below high."""
        ranged = [name for name in ("low", "high", "step") if getattr(self, name) is not None] + (
            ["log"] if self.log else []
        )
        if self.choices is not None and ranged:
            raise ValueError(SWEEP_SECTION_MESSAGES["range_and_choices"].format(fields=", ".join(ranged)))
        if self.choices is not None:
            return self
        if self.low is None or self.high is None:
            raise ValueError(SWEEP_SECTION_MESSAGES["range_or_choices"])
        if self.low >= self.high:
            words = SWEEP_SECTION_MESSAGES["range_low_not_below_high"]
            raise ValueError(words.format(low=f"{self.low:g}", high=f"{self.high:g}"))
        if self.log and self.low <= 0:
            raise ValueError(SWEEP_SECTION_MESSAGES["log_range_low"].format(low=f"{self.low:g}"))
        if self.log and (self.step or 1) != 1:
            raise ValueError(SWEEP_SECTION_MESSAGES["log_range_step"])
        return self

    @property
    def is_range(self) -> bool:
        """A {low, high} range (else a list of choices)."""
        return self.choices is None


class Objective(Section):
    """What the sweep optimizes: a metric each trial's run logs, and which way is better."""

    metric: str = Field(
        "eval_loss",
        min_length=1,
        description=(
            "eval_loss (the last evaluation's loss; the base config must evaluate), train_loss (the last logged "
            "training loss), exact_match (Evaluate's greedy exact match of the trained run on its eval set, scored "
            "once the run completes; maximize) or any other key the run logs in metrics.jsonl (e.g. reward): its "
            "last value."
        ),
    )
    direction: Literal["minimize", "maximize"] = Field(
        "minimize", description="minimize for losses, maximize for rewards and accuracies."
    )
    eval_rows: int | None = Field(
        None,
        ge=1,
        description="exact_match: score the first this many rows of the eval set (empty: all of them).",
    )


class SamplerSection(Section):
    """How optuna picks each trial's values (written as a name alone, or as a section with its knobs)."""

    kind: Literal["tpe", "random", "grid"] = Field(
        "tpe",
        description=(
            "tpe: learn from the finished trials (optuna's TPESampler); random: independent draws; grid: every "
            "combination in turn (only choices and whole-number ranges; trials beyond the grid's size are not run)."
        ),
    )
    startup_trials: int = Field(
        10,
        ge=0,
        le=MAX_TRIALS,
        description="tpe: trials drawn at random before TPE models the results (optuna's n_startup_trials).",
    )


class PrunerSection(Section):
    """When optuna stops a trial early (written as a name alone, or as a section with its knobs)."""

    kind: Literal["median", "successive_halving", "none"] = Field(
        "median",
        description=(
            "median: stop a trial whose objective is worse than the median of earlier trials at the same step; "
            "successive_halving: keep the best fraction at each rung; none: every trial runs to its end."
        ),
    )
    startup_trials: int = Field(
        5, ge=0, le=MAX_TRIALS, description="median: trials that finish before any trial is pruned."
    )
    warmup_steps: int = Field(0, ge=0, description="median: training steps of a trial before it may be pruned.")
    min_resource: int | None = Field(
        None,
        ge=1,
        description="successive_halving: training steps before the first rung; empty: optuna works it out (auto).",
    )
    reduction_factor: int = Field(
        4, ge=2, le=100, description="successive_halving: 1 in this many trials goes on to the next rung."
    )


MAX_CONCURRENT_TRIALS = 1_000


class ExecutorSection(Section):
    """Where the trials run (written as a name alone, or as a section with its knobs): one at a time on this
    machine, or several at a time as tasks on an existing Ray cluster."""

    kind: Literal["local", "ray"] = Field(
        "local",
        description=(
            "local: one trial at a time on this machine; ray: trials as tasks on a running Ray cluster (ray start), "
            "each on the node Ray picks. The workspace must then be on storage every node mounts at the same path."
        ),
    )
    address: str = Field(
        "auto",
        min_length=1,
        max_length=500,
        description=(
            "ray: the cluster's address as ray.init takes it: HOST:PORT of the head (ray start --head --port), or "
            "auto for the cluster started on this machine."
        ),
    )
    gpus_per_trial: float = Field(
        1.0,
        ge=0,
        le=64,
        description=(
            "ray: GPUs each trial holds (Ray's num_gpus; it sets CUDA_VISIBLE_DEVICES for the trial). At least the "
            "base's launch.num_processes on GPUs; 0 on a CPU-only cluster."
        ),
    )
    cpus_per_trial: float = Field(
        1.0,
        ge=0,
        le=1024,
        description="ray: CPU cores each trial holds (Ray's num_cpus); set launch.threads_per_process to match.",
    )
    max_concurrent_trials: int = Field(
        4,
        ge=1,
        le=MAX_CONCURRENT_TRIALS,
        description=(
            "ray: trials at work at once, at most (fewer while the cluster lacks free resources). TPE learns only "
            "from finished trials, so many at once draw more like random search."
        ),
    )

    @field_validator("address")
    @classmethod
    def _one_word(cls, value: str) -> str:
        """An address is one word (ray.init would fail later, with a less clear message)."""
        if value != value.strip() or any(char.isspace() for char in value):
            raise ValueError(SWEEP_SECTION_MESSAGES["executor_address"])
        return value

    @model_validator(mode="after")
    def _fits_kind(self) -> ExecutorSection:
        """Ray's knobs only with kind ray; ray installed; a trial holds some resource."""
        if self.kind == "local":
            knobs = sorted(self.model_fields_set - {"kind"})
            if knobs:
                raise ValueError(SWEEP_SECTION_MESSAGES["executor_ray_only"].format(fields=", ".join(knobs)))
            return self
        if importlib.util.find_spec("ray") is None:
            raise ValueError(SWEEP_SECTION_MESSAGES["executor_ray_missing"])
        if self.gpus_per_trial == 0 and self.cpus_per_trial == 0:
            raise ValueError(SWEEP_SECTION_MESSAGES["executor_no_resources"])
        return self
