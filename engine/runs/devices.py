"""Which devices a machine has, which a run needs, and which the active runs hold. Standard library only.

A device is a GPU index (as this machine's processes number them, so ``CUDA_VISIBLE_DEVICES`` applies) or
``"cpu"``. Every machine has the CPU; a CPU machine has nothing else. A run holds the devices it was started on,
recorded in its status.json (``devices: [1]``, ``devices: ["cpu"]``) by engine.runs.start, and hands its GPUs to
the training process as ``CUDA_VISIBLE_DEVICES``.

What a run needs comes from its config's launch section: the GPUs ``launch.devices`` names; else (auto) any
``launch.num_processes`` free GPUs; the CPU when the machine has no GPU or the run asks for ``launch.device: cpu``.
``STUDIO_DEVICES`` (``0,1``; ``cpu`` or empty for none) says which GPUs the studio may use, in place of what the
machine reports: to keep a GPU for other work, or to fake a GPU machine in a test.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from engine.runs.status import active_runs
from engine.store.rundir import CONFIG_FILE, RunStatus, read_status

CPU = "cpu"
Device = int | str  # a GPU index, or CPU
DEVICES_ENV = "STUDIO_DEVICES"
SMI_TIMEOUT_S = 10.0


class DeviceError(ValueError):
    """A run asks for devices this machine does not have: it can never start here."""


@dataclass(frozen=True)
class Need:
    """What a run asks for: these GPUs (``gpus``), else ``count`` free ones, or the CPU (``cpu``)."""

    gpus: tuple[int, ...] = ()
    count: int = 1
    cpu: bool = False


# --- the machine ------------------------------------------------------------------------------------------------


@lru_cache(maxsize=1)
def _smi_gpu_count() -> int:
    """How many GPUs ``nvidia-smi -L`` lists (0 without nvidia-smi). Asked once: GPUs do not come and go."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return 0
    try:
        listed = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=SMI_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(line.startswith("GPU ") for line in listed.stdout.splitlines()) if listed.returncode == 0 else 0


def has_gpus() -> bool:
    """Whether the machine has GPUs at all, whatever ``STUDIO_DEVICES`` lets runs use."""
    return _smi_gpu_count() > 0


def _visible_entries() -> list[str] | None:
    """The entries of ``CUDA_VISIBLE_DEVICES`` up to the first invalid one (CUDA ignores the rest); None if unset."""
    value = os.environ.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return None
    entries = []
    for entry in (part.strip() for part in value.split(",")):
        if not entry or entry.startswith("-"):
            break
        entries.append(entry)
    return entries


def parse_devices(text: str) -> tuple[int, ...]:
    """GPU indices from ``"0,1"`` (``""`` and ``"cpu"`` are none); ValueError on anything else."""
    text = text.strip()
    if text.lower() in ("", CPU):
        return ()
    indices = tuple(int(part) for part in text.split(","))
    if any(index < 0 for index in indices) or len(set(indices)) != len(indices):
        raise ValueError(f"{DEVICES_ENV}={text!r}: expected distinct GPU indices such as 0,1")
    return indices


def machine_gpus() -> tuple[int, ...]:
    """The GPUs runs may use: ``STUDIO_DEVICES`` when set, else those this process sees (``nvidia-smi``, narrowed by
    ``CUDA_VISIBLE_DEVICES``); () on a CPU machine."""
    override = os.environ.get(DEVICES_ENV)
    if override is not None:
        return parse_devices(override)
    count, visible = _smi_gpu_count(), _visible_entries()
    if visible is not None:
        count = min(count, len(visible))
    return tuple(range(count))


def cuda_visible(devices: list[Device] | None) -> dict[str, str]:
    """The environment that gives a training process its GPUs (``CUDA_VISIBLE_DEVICES``), {} for the CPU.

    Indices count the GPUs this process sees, so under ``CUDA_VISIBLE_DEVICES=2,3`` GPU 1 is passed on as ``3``.
    """
    gpus = [device for device in devices or [] if isinstance(device, int)]
    if not gpus:
        return {}
    visible = _visible_entries()
    names = [visible[gpu] if visible is not None and gpu < len(visible) else str(gpu) for gpu in gpus]
    return {"CUDA_VISIBLE_DEVICES": ",".join(names)}


# --- what a run needs -------------------------------------------------------------------------------------------


def need_of(launch: Any, gpus: tuple[int, ...]) -> Need:
    """What a run with this launch section (``device``, ``num_processes``, ``devices``) needs on a machine with
    ``gpus``: on a CPU machine, or when it asks for the CPU, the CPU whatever else it names."""
    if not gpus or launch.device == CPU:
        return Need(cpu=True)
    if launch.devices:
        return Need(gpus=tuple(launch.devices), count=len(launch.devices))
    return Need(count=launch.num_processes)


def run_need(run_dir: Path, gpus: tuple[int, ...]) -> Need:
    """What the run in ``run_dir`` needs, from its config (loaded here: the config is not standard library)."""
    from engine.config import load_config

    return need_of(load_config(Path(run_dir) / CONFIG_FILE).launch, gpus)


def could_use(need: Need, gpus: tuple[int, ...]) -> set[Device]:
    """Every device that may serve the need: those it names, else any of the machine's GPUs, or the CPU."""
    if need.cpu:
        return {CPU}
    return set(need.gpus or gpus)


def choose(need: Need, gpus: tuple[int, ...], taken: set[Device]) -> list[Device] | None:
    """The devices to start the run on, none of them in ``taken``; None while it must wait.

    Raises DeviceError when this machine can never give them (a GPU it lacks, more GPUs than it has).
    """
    if need.cpu:
        return None if CPU in taken else [CPU]
    missing = [gpu for gpu in need.gpus if gpu not in gpus]
    if missing or need.count > len(gpus):
        has = ", ".join(map(str, gpus))
        wanted = f"GPU {', '.join(map(str, missing))}" if missing else f"{need.count} GPUs"
        raise DeviceError(f"the run needs {wanted}; this machine has GPU {has}")
    if need.gpus:
        return list(need.gpus) if not taken.intersection(need.gpus) else None
    free = [gpu for gpu in gpus if gpu not in taken]
    return free[: need.count] if len(free) >= need.count else None


# --- what the active runs hold ----------------------------------------------------------------------------------


def held_by(current: RunStatus, gpus: tuple[int, ...]) -> set[Device]:
    """The devices an active run holds: those its status records; all of them when it records none (it was
    started by something that did not say, and may use any)."""
    if current.devices is None:
        return {CPU, *gpus}
    return set(current.devices)


def held_devices(workspace: Path, gpus: tuple[int, ...], besides: Path | None = None) -> set[Device]:
    """The devices the workspace's active runs hold (but ``besides``)."""
    others = [run_dir for run_dir in active_runs(workspace) if besides is None or run_dir.name != Path(besides).name]
    return set().union(*(held_by(read_status(run_dir), gpus) for run_dir in others))


def pick_devices(run_dir: Path, workspace: Path | None) -> list[Device]:
    """The devices to start a run on now, for a start that does not wait in the queue (the CLI's foreground run, a
    direct engine.runs.start): free ones when there are, else those it asks for even though they are busy."""
    gpus = machine_gpus()
    need = run_need(run_dir, gpus)
    taken = held_devices(workspace, gpus, besides=run_dir) if workspace is not None else set()
    try:
        chosen = choose(need, gpus, taken)
    except DeviceError:
        chosen = None  # the worker says what is wrong (engine.training.hardware); no narrowing here
    if chosen is not None:
        return chosen
    if need.cpu:
        return [CPU]
    return list(need.gpus or gpus[: need.count])


def fits_standby(devices: list[Device] | None) -> bool:
    """Whether a run on ``devices`` may go to a warm standby (engine.runs.standby): its worker was started seeing
    every GPU and may have initialised CUDA already, so it can no longer be narrowed to some of them."""
    if not devices or devices == [CPU]:
        return True
    return sorted(device for device in devices if isinstance(device, int)) == list(machine_gpus())
