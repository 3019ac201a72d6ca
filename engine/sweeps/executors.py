"""Which executor runs a sweep: the one its file names in ``executor.kind``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.sweeps.config import SweepConfig
from engine.sweeps.local import SweepRun, run_sweep
from engine.sweeps.study import SweepError


def execute_sweep(config: SweepConfig, workspace: Path, **options: Any) -> SweepRun:
    """Run (or continue) the sweep with its executor: local (engine.sweeps.local.run_sweep, one trial at a time
    here) or ray (engine.sweeps.ray_executor.run_ray_sweep, trials as tasks on a Ray cluster). ``options`` are
    run_sweep's (sweep_text, stop, echo, poll_s). SweepError when the executor cannot be used."""
    if config.executor.kind == "ray":
        try:  # ray is optional: imported only by sweeps that ask for it
            from engine.sweeps.ray_executor import run_ray_sweep
        except ImportError as exc:
            raise SweepError(f"executor: kind ray needs the ray package ({exc}); pip install 'ray[default]'") from None
        return run_ray_sweep(config, workspace, **options)
    return run_sweep(config, workspace, **options)
