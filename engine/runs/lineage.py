"""Where a run starts from: ``model.init_from`` resolved to another run's weights, and the rules it must meet.

A run can start from another run (its final adapter or model) or from one of that run's checkpoints; the usual
pipeline is an SFT run, then a DPO run that starts from the SFT adapter. What the new run does with the weights
depends on both runs' ``adapter.method``:

- LoRA source, LoRA run: the same adapter trains further (loaded with peft's ``is_trainable``). The run keeps the
  source's base and adapter settings (r, alpha, targets, ...): different ones are refused, so that the run's config
  says what was trained. DPO and KTO copy the adapter they are given as their reference model, so the reference is
  the source, as it should be.
- LoRA source, full or freeze run: the adapter is merged into the base, then the model trains as the config says.
- Full (or freeze) source, full or freeze run: the source's whole model is loaded as the starting weights.
- Full source, LoRA run: refused. Chat, evaluate and export put an adapter on the run's ``model.name_or_path``,
  so a LoRA run on top of a full fine-tune names that model as its base instead (no ``init_from``).

In every case the run's ``model.name_or_path`` (and revision) must be the source's: it names the tokenizer and
the architecture the weights belong to, and the root of the lineage. A checkpoint gives only its weights: the new
run starts at step 0 with a fresh optimizer and schedule.

``create_run`` records ``init_from`` as the absolute directory it names (a run or a checkpoint), so the worker
finds it whatever its working directory and workspace. Resuming such a run loads the source again before the
Trainer restores the run's own weights from the checkpoint (DPO and KTO need the source as their reference), so
the source must still exist to resume.

Standard library and the config only (no torch): the check, the studio and the worker share these rules.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.config import ConfigError, Problem, RunConfig, run_source_fields
from engine.runs.artifacts import ArtifactError, FinishedRun, TrainedWeights, open_run, trained_weights
from engine.runs.status import run_dirs
from engine.store.paths import find_local_path, resolve_model_source
from engine.store.rundir import CHECKPOINTS_DIR, CONFIG_FILE, checkpoint_path, final_weights, read_status
from engine.store.workspace import runs_dir

FIELD = "model.init_from"
_CHECKPOINT_NAME = re.compile(r"checkpoint-(\d+)")
# The settings a continued LoRA adapter keeps: peft reads them from the adapter's own files, not from the config.
ADAPTER_SETTINGS = ("r", "alpha", "dropout", "target_modules", "bias", "use_rslora", "use_dora", "modules_to_save")
ACCEPTED = "a run id of the workspace, a run directory, or a checkpoint of a run (RUN/checkpoints/checkpoint-N)"


@dataclass(frozen=True)
class InitSource:
    """The run a new run starts from, and which of its weights."""

    run: FinishedRun
    weights: TrainedWeights
    checkpoint: int | None  # the checkpoint's step, None for the run's final result

    @property
    def directory(self) -> Path:
        """The source as ``model.init_from`` records it: the run directory, or the checkpoint directory."""
        return self.run.run_dir if self.checkpoint is None else checkpoint_path(self.run.run_dir, self.checkpoint)

    def plan(self, config: RunConfig) -> str:
        """How ``config``'s run uses these weights, in words (the check prints it)."""
        where = f"{self.run.name}'s {self.weights.label} ({self.weights.path})"
        if self.weights.is_adapter and config.adapter.is_lora:
            return f"{where}: its LoRA adapter trains further, with the settings it has"
        if self.weights.is_adapter:
            return f"{where}: its LoRA adapter is merged into the base, then trained ({config.adapter.method})"
        return f"{where}: its whole model trains further ({config.adapter.method})"


def locate(value: str, workspace: Path | None) -> tuple[Path, int | None]:
    """The run directory ``value`` names (a run id of ``workspace``, a run directory or a checkpoint of a run) and
    the checkpoint step, if it names one; ArtifactError when it names no run."""
    path = Path(value.strip()).expanduser()
    step = None
    match = _CHECKPOINT_NAME.fullmatch(path.name)
    if match and path.parent.name == CHECKPOINTS_DIR:
        path, step = path.parent.parent, int(match.group(1))
    for candidate in _candidates(path, workspace):
        if (candidate / CONFIG_FILE).is_file():
            return candidate, step
    where = f"no run {value!r} in {runs_dir(workspace)}" if workspace is not None else f"no run at {value!r}"
    raise ArtifactError(f"{where}; give {ACCEPTED}")


def _candidates(path: Path, workspace: Path | None) -> list[Path]:
    """Where ``path`` may point: a run of the workspace first (never outside its runs folder), then a local path."""
    found = []
    if workspace is not None and not path.is_absolute():
        root = runs_dir(workspace).resolve()
        inside = (root / path).resolve()
        if inside.is_relative_to(root) and inside != root:
            found.append(inside)
    local = find_local_path(str(path))
    if local is not None:
        found.append(local)
    return found


def resolve_init_from(value: str, workspace: Path | None) -> InitSource:
    """The run and weights ``value`` names; ArtifactError saying what is wrong (no such run, still running, no
    weights, no such checkpoint) and what to give instead."""
    run_dir, step = locate(value, workspace)
    run = open_run(run_dir)
    try:
        weights = trained_weights(run, step)
    except ArtifactError as exc:
        if step is not None:
            raise
        raise ArtifactError(f"{exc}. Start from a run that has completed, or from one of its checkpoints") from None
    return InitSource(run, weights, step)


def source_problems(config: RunConfig, source: InitSource) -> list[Problem]:
    """Why ``config``'s run cannot start from ``source`` (see the module's docstring); [] when it can."""
    problems = _base_problems(config, source)
    if source.weights.is_adapter and config.adapter.is_lora:
        problems += _adapter_problems(config, source)
    elif source.weights.is_adapter:
        problems += _reference_problems(config, source)
    elif config.adapter.is_lora:
        problems.append(
            Problem(
                FIELD,
                f"{source.run.name}'s result is a whole model ({source.run.config.adapter.method}), and chat, evaluate "
                "and export put a LoRA adapter on the run's model.name_or_path: to train an adapter on it, set "
                f"model.name_or_path to {source.weights.path} and clear model.init_from (or train it with "
                "adapter.method full or freeze)",
            )
        )
    return problems


def _base_problems(config: RunConfig, source: InitSource) -> list[Problem]:
    """The run must train on the base its source was trained on."""
    theirs, ours = source.run.config.model, config.model
    same_path = resolve_model_source(theirs.name_or_path) == resolve_model_source(ours.name_or_path)
    if same_path and (theirs.revision or None) == (ours.revision or None):
        return []
    base = theirs.name_or_path + (f" at revision {theirs.revision}" if theirs.revision else "")
    fix = f"set model.name_or_path to {theirs.name_or_path}"
    if (theirs.revision or None) != (ours.revision or None):
        fix += f" and model.revision to {theirs.revision or 'empty'}"
    return [
        Problem(
            FIELD,
            f"{source.run.name} was trained on {base}, not on this run's base {ours.name_or_path}: {fix} (a run "
            "trains further the model its source was trained on)",
        )
    ]


def _adapter_problems(config: RunConfig, source: InitSource) -> list[Problem]:
    """A continued LoRA adapter keeps its settings; the run's config must say the same."""
    theirs, ours = source.run.config.adapter, config.adapter
    problems = []
    for name in ADAPTER_SETTINGS:
        want, have = getattr(theirs, name), getattr(ours, name)
        if not _same(want, have):
            problems.append(
                Problem(
                    f"adapter.{name}",
                    f"{source.run.name}'s adapter has {name} {_shown(want)}, and model.init_from trains that adapter "
                    f"further as it is: set {_shown(want)} (or adapter.method full to merge it and train the model)",
                )
            )
    return problems


def _reference_problems(config: RunConfig, source: InitSource) -> list[Problem]:
    """A merged adapter exists only in memory, while TRL loads a full run's reference model from the base's files:
    the reference would be the plain base. Precomputed reference log-probabilities come from the starting weights."""
    section = getattr(config, config.method, None)  # the method's own section (dpo:, kto:); sft has none
    if getattr(section, "precompute_ref_log_probs", None) is not False:
        return []
    return [
        Problem(
            f"{config.method}.precompute_ref_log_probs",
            f"{config.method} would compare with the plain base, not with {source.run.name}: its adapter is merged "
            f"in memory for this {config.adapter.method} run, and the reference model is loaded from the base's "
            "files. Set it to true (the reference is then the starting weights), or keep adapter.method lora to "
            "train the adapter further",
        )
    ]


def _same(want: Any, have: Any) -> bool:
    """Equal settings; module lists in any order."""
    if isinstance(want, list) and isinstance(have, list):
        return sorted(want) == sorted(have)
    return bool(want == have)


def _shown(value: Any) -> str:
    return ", ".join(value) if isinstance(value, list) else str(value)


def checked_source(config: RunConfig, workspace: Path | None) -> InitSource | None:
    """The source ``config`` starts from (None without ``model.init_from``), or ConfigError naming each field to fix.

    ``workspace``: where a run id is looked up (the workspace the run is, or will be, created in).
    """
    if not config.model.init_from:
        return None
    try:
        source = resolve_init_from(config.model.init_from, workspace)
    except ArtifactError as exc:
        raise ConfigError([Problem(FIELD, str(exc))]) from None
    except ConfigError as exc:  # the source's own config.yaml no longer loads
        raise ConfigError([Problem(FIELD, f"the source's config cannot be read: {exc}")]) from None
    problems = source_problems(config, source)
    if problems:
        raise ConfigError(problems)
    return source


def init_from_problems(config: RunConfig, workspace: Path | None) -> list[Problem]:
    """Why ``config`` cannot start from its ``model.init_from`` ([] when it can, or has none)."""
    try:
        checked_source(config, workspace)
    except ConfigError as exc:
        return exc.problems
    return []


def pinned(config: RunConfig, workspace: Path | None) -> RunConfig:
    """``config`` with each field that names a run (``model.init_from``, distill's teacher: run_source_fields) as
    the absolute directory it names (a run, or a checkpoint of one), so that the run finds it from any working
    directory; a field unchanged when it names no run (a model for the teacher; the check says why otherwise)."""
    for field in run_source_fields():
        section_name, name = field.split(".")
        section = getattr(config, section_name)
        value = getattr(section, name)
        if not value:
            continue
        try:
            run_dir, step = locate(value, workspace)
        except ArtifactError:
            continue
        directory = run_dir if step is None else checkpoint_path(run_dir, step)
        config = config.model_copy(update={section_name: section.model_copy(update={name: str(directory)})})
    return config


def source_label(value: str | None, workspace: Path | None = None) -> str:
    """A short name for where a run started: the source run's name, and the checkpoint when it is one; "" for a
    run that started from its base model (or whose source is gone)."""
    if not value:
        return ""
    try:
        run_dir, step = locate(value, workspace)
    except ArtifactError:
        return ""
    name = read_status(run_dir).name or run_dir.name
    return name if step is None else f"{name}, checkpoint {step}"


def runs_with_weights(workspace: Path) -> list[FinishedRun]:
    """The workspace's runs a new run can start from: not going, with a final adapter or model; newest first."""
    found = []
    for run_dir in run_dirs(workspace):
        try:
            run = open_run(run_dir)
        except (ArtifactError, ConfigError):  # still running, or a config this engine cannot read
            continue
        if final_weights(run.run_dir, run.config.adapter.is_lora) is not None:
            found.append(run)
    return sorted(found, key=lambda run: (run.status.created_at or 0, run.run_dir.name), reverse=True)
