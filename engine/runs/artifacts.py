"""What a finished (or stopped) run has to offer: its config, and the trained weights to evaluate or export.

Shared by evaluation and export, and by the studio before it starts either, so a missing run, a running run
or a run without a result is refused with the same clear message everywhere. Standard library and the config
only (no torch).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from engine.config import RunConfig, load_config
from engine.runs.status import status
from engine.store.rundir import CONFIG_FILE, RunStatus, checkpoint_path, checkpoint_steps, final_weights


class ArtifactError(RuntimeError):
    """The run, or the weights asked for, cannot be used; the message says why and what to do."""


@dataclass(frozen=True)
class TrainedWeights:
    """The weights of a run: its final adapter / model, or one checkpoint."""

    path: Path
    label: str  # "adapter", "model" or "checkpoint-N"
    is_adapter: bool  # a peft adapter on top of the base (else a whole model)


@dataclass(frozen=True)
class FinishedRun:
    """A run that is not going (or one whose checkpoint is asked for), with its config and reconciled status."""

    run_dir: Path
    config: RunConfig
    status: RunStatus

    @property
    def name(self) -> str:
        """The run's name, or its directory name."""
        return self.config.name or self.run_dir.name


def open_run(run_dir: Path, checkpoint: int | None = None) -> FinishedRun:
    """The run at ``run_dir``; refuses a missing run, and one that is still going unless a ``checkpoint`` of it is
    asked for (a whole checkpoint does not change while the run goes on: Save now makes one to look at)."""
    run_dir = Path(run_dir).resolve()
    if not (run_dir / CONFIG_FILE).is_file():
        raise ArtifactError(f"no run at {run_dir} (it has no {CONFIG_FILE})")
    current = status(run_dir)
    if current.is_active and checkpoint is None:
        steps = checkpoint_steps(run_dir)
        hint = f"pick one of its checkpoints ({', '.join(map(str, steps))})" if steps else "press Save now for one"
        raise ArtifactError(
            f"{current.name or run_dir.name} is still {current.state}, so it has no final result yet; {hint}, "
            "or wait for it to finish"
        )
    return FinishedRun(run_dir, load_config(run_dir / CONFIG_FILE), current)


def trained_weights(run: FinishedRun, checkpoint: int | None = None, newest_checkpoint: bool = False) -> TrainedWeights:
    """The run's final result, or checkpoint ``checkpoint``.

    With ``newest_checkpoint`` a run without a final result (stopped, failed) falls back to its newest
    checkpoint; otherwise such a run is refused with a message naming the checkpoints it has.
    """
    is_adapter = run.config.adapter.is_lora
    steps = checkpoint_steps(run.run_dir)
    if checkpoint is not None:
        if checkpoint not in steps:
            have = ", ".join(map(str, steps)) or "none"
            raise ArtifactError(f"{run.name} has no checkpoint {checkpoint} (checkpoints: {have})")
        return TrainedWeights(checkpoint_path(run.run_dir, checkpoint), f"checkpoint-{checkpoint}", is_adapter)
    final = final_weights(run.run_dir, is_adapter)
    if final is not None:
        return TrainedWeights(final, final.name, is_adapter)
    if newest_checkpoint and steps:
        return TrainedWeights(checkpoint_path(run.run_dir, steps[-1]), f"checkpoint-{steps[-1]}", is_adapter)
    state = run.status.state or "unknown"
    what = "adapter" if is_adapter else "model"
    hint = f"pick one of its checkpoints ({', '.join(map(str, steps))})" if steps else "it has no checkpoint either"
    raise ArtifactError(f"{run.name} has no final {what} (it is {state}); resume it to completion, or {hint}")
