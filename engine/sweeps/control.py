"""A sweep's driver in the background, for the studio: start it, tell whether it runs, stop it. No gradio.

``start_sweep`` validates the sweep (ConfigError naming the entry, SweepError for a different sweep under the same
name or a driver already at work) before any process starts, writes it to ``WORKSPACE/sweeps/<name>/sweep.yaml``
and starts ``python -m engine sweep .../sweep.yaml --workspace WS`` in a session of its own
(``engine.store.processes.spawn_detached``), so it outlives a browser refresh and a studio restart. Beside the
study (engine.sweeps.study) the folder gains:

```
driver.log      what the drivers printed, one start after another (a header line each)
driver.json     the pid of the driver the studio started last, and when
.control.lock   flock'd around a start, so two studios cannot both start a driver
```

Whether a driver runs is the driver's own lock (``study.DRIVER_LOCK_FILE``, held for as long as it runs): the
kernel says who holds it (/proc/locks), which also finds a driver started by hand from the command line. Where
/proc cannot tell, the recorded pid stands in, checked against the process's command line.

``stop_sweep`` sends SIGINT: the driver stops the current trial's run with a checkpoint and exits 130;
``continue_sweep`` starts it again with the sweep it stored, and it picks up that trial where it stopped.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from engine.config import ConfigError, Problem, RunConfig, parse_config
from engine.store.locks import file_lock
from engine.store.processes import command_line, pid_alive, spawn_detached
from engine.store.rundir import write_text_atomic
from engine.sweeps.config import SWEEP_MESSAGES, SweepConfig, parse_sweep
from engine.sweeps.study import (
    DRIVER_LOCK_FILE,
    SWEEP_FILE,
    SweepError,
    differences,
    stored_record,
    sweep_dir,
    sweep_record,
)

DRIVER_LOG = "driver.log"
DRIVER_RECORD = "driver.json"
CONTROL_LOCK_FILE = ".control.lock"
CONTROL_WAIT_S = 10.0  # another start of the same sweep holds the control lock for well under a second
EXEC_WAIT_S = 5.0  # fork to exec takes milliseconds; a machine under heavy load may take longer
PROC_LOCKS = Path("/proc/locks")
# The order of a sweep file's keys as written here: what to run first, the search settings after.
KEY_ORDER = ("name", "base", "space", "objective", "trials", "sampler", "pruner", "time_budget_s", "seed")


@dataclass(frozen=True)
class SweepLaunch:
    """A driver that ``start_sweep`` started: the sweep's name, folder, the driver's pid and its log."""

    name: str
    folder: Path
    pid: int
    log: Path


# --- the sweep file ---------------------------------------------------------------------------------------------


def compact_base(config: RunConfig) -> dict[str, Any]:
    """A run config as the fields that differ from the defaults (what a person reads in a sweep's ``base``); the
    whole config when that would not read back the same."""
    compact = config.model_dump(mode="json", exclude_defaults=True)
    try:
        same = parse_config(compact) == config
    except ConfigError:
        same = False
    return compact if same else config.model_dump(mode="json")


def sweep_yaml(data: dict[str, Any]) -> str:
    """A sweep mapping as YAML: its keys in the usual order, each space entry and the objective, sampler and pruner
    on one line (``train.learning_rate: {low: 0.0003, high: 0.01, log: true}``)."""
    keys = [key for key in KEY_ORDER if key in data] + [key for key in data if key not in KEY_ORDER]
    parts = []
    for key in keys:
        value = data[key]
        if key == "space" and isinstance(value, dict) and value:
            entries = "".join(f"  {_flow({path: entry}, unwrapped=True)}\n" for path, entry in value.items())
            parts.append(f"space:\n{entries}")
        elif key in ("objective", "sampler", "pruner") and isinstance(value, dict):
            parts.append(f"{key}: {_flow(value)}\n")
        else:
            parts.append(yaml.safe_dump({key: value}, sort_keys=False, allow_unicode=True))
    return "".join(parts)


def _flow(value: Any, unwrapped: bool = False) -> str:
    """One value as one line of flow-style YAML; ``unwrapped``: a one-key mapping without its braces, as a line of
    a block mapping (a space entry: ``train.learning_rate: {low: 0.0003, high: 0.01}``). A section's value keeps
    them: ``objective: metric: train_loss`` is not YAML."""
    text = yaml.safe_dump(value, default_flow_style=True, sort_keys=False, width=2**31 - 1, allow_unicode=True)
    text = text.strip().removesuffix("...").strip()
    single = unwrapped and isinstance(value, dict) and len(value) == 1 and text.startswith("{")
    return text[1:-1] if single else text


def config_yaml(config: SweepConfig) -> str:
    """A validated sweep as a self-contained sweep file: its base inline, written compactly."""
    data = config.model_dump(mode="json", exclude_defaults=True)
    data["name"] = config.name
    data["base"] = compact_base(config.base)
    data["space"] = {path: entry.model_dump(mode="json", exclude_defaults=True) for path, entry in config.space.items()}
    return sweep_yaml(data)


def read_sweep_text(text: str, folder: Path | None = None) -> tuple[SweepConfig, str]:
    """Validate a sweep file's text: the SweepConfig and the text to keep as ``sweep.yaml`` (as given, or with a
    ``base`` that names a run YAML written inline, so the sweep's folder stands on its own). ConfigError naming
    each key at fault; a path in ``base`` is looked up from ``folder`` first."""
    try:
        data = yaml.safe_load(text)
    except RecursionError:
        raise ConfigError([Problem("", SWEEP_MESSAGES["sweep_too_deep"])]) from None
    except yaml.YAMLError as exc:
        mark, error = getattr(exc, "problem_mark", None), getattr(exc, "problem", None) or exc
        if mark is None:
            message = SWEEP_MESSAGES["sweep_not_yaml"].format(error=error)
        else:
            message = SWEEP_MESSAGES["sweep_not_yaml_at"].format(
                line=mark.line + 1, column=mark.column + 1, error=error
            )
        raise ConfigError([Problem("", message)]) from None
    config = parse_sweep(data, folder)
    if isinstance(data.get("base"), str):
        return config, sweep_yaml({**data, "base": compact_base(config.base)})
    return config, text


# --- starting ---------------------------------------------------------------------------------------------------


def start_sweep(workspace: Path, sweep: str | SweepConfig, folder: Path | None = None) -> SweepLaunch:
    """Validate ``sweep`` (a sweep file's text, or a SweepConfig), keep it as the sweep's ``sweep.yaml`` and start
    its driver in the background. ``folder`` is where a ``base`` given as a path is looked up first.

    ConfigError when the sweep is not valid; SweepError when its driver already runs, or the workspace holds a
    different sweep under its name. Nothing starts then. The same sweep again continues it.
    """
    config, text = read_sweep_text(sweep, folder) if isinstance(sweep, str) else (sweep, config_yaml(sweep))
    workspace = Path(workspace).resolve()
    target = sweep_dir(workspace, config.name)
    target.mkdir(parents=True, exist_ok=True)
    with file_lock(target / CONTROL_LOCK_FILE, wait_s=CONTROL_WAIT_S):
        running = driver_pid(workspace, config.name)
        if running is not None:
            raise SweepError(f"the sweep {config.name} is already running (driver pid {running}); stop it first")
        _refuse_another(config, target)
        _keep_file(config, target, text)
        return _spawn(workspace, config.name, target)


def continue_sweep(workspace: Path, name: str) -> SweepLaunch:
    """Start the driver of a sweep the workspace holds again, with the sweep it stored: it picks up the trial it
    left (resumed from its checkpoint) and runs the rest. SweepError when there is no such sweep."""
    target = sweep_dir(workspace, name)
    stored = target / SWEEP_FILE
    try:
        return start_sweep(workspace, stored.read_text(encoding="utf-8"), target)
    except (OSError, ConfigError):
        # A file written by hand may name its base relative to where it was first run: the study holds the sweep
        # as it was validated then, base inlined.
        record = stored_record(target, name) if target.is_dir() else None
        if record is None:
            raise SweepError(f"no sweep named {name} in {target.parent} to continue") from None
        return start_sweep(workspace, parse_sweep(record))


def _refuse_another(config: SweepConfig, target: Path) -> None:
    """SweepError when the folder's study holds a different sweep (the driver would refuse it after starting)."""
    stored = stored_record(target, config.name)
    if stored is None or stored == sweep_record(config):
        return
    changes = differences(stored, sweep_record(config))
    shown = "; ".join(changes[:5]) + (f"; and {len(changes) - 5} more" if len(changes) > 5 else "")
    raise SweepError(
        f"the workspace holds a different sweep named {config.name} ({shown}). Keep the sweep as it was to continue "
        "it, or give it another name."
    )


def _keep_file(config: SweepConfig, target: Path, text: str) -> None:
    """Write ``sweep.yaml``, unless the one there already reads as this sweep (it keeps its comments then)."""
    path = target / SWEEP_FILE
    with contextlib.suppress(OSError, ConfigError, SweepError):
        kept, _ = read_sweep_text(path.read_text(encoding="utf-8"), target)
        if sweep_record(kept) == sweep_record(config):
            return
    write_text_atomic(path, text)


def _spawn(workspace: Path, name: str, target: Path) -> SweepLaunch:
    """Start ``python -m engine sweep`` on the folder's sweep.yaml, appending to driver.log, and record its pid."""
    log = target / DRIVER_LOG
    args = ["sweep", str(target / SWEEP_FILE), "--workspace", str(workspace)]
    with log.open("ab") as out:
        out.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} python -m engine {' '.join(args)}\n".encode())
        out.flush()
        # cwd: the sweep's folder, as a run's process works in its run directory.
        process = spawn_detached(args, stdout=out, cwd=str(target))
    record = {"pid": process.pid, "started_at": time.time()}
    write_text_atomic(target / DRIVER_RECORD, json.dumps(record))
    _await_exec(process.pid, target)
    return SweepLaunch(name, target, process.pid, log)


def _await_exec(pid: int, target: Path) -> None:
    """Wait (briefly) until the child runs the driver's command: between fork and exec its command line is still
    the starter's, and a ``driver_running`` asked in that instant (the page, right after Start) would say no."""
    deadline = time.monotonic() + EXEC_WAIT_S
    while time.monotonic() < deadline and pid_alive(pid) and not _is_driver(pid, target):
        time.sleep(0.005)


# --- is it running, stopping ------------------------------------------------------------------------------------


def driver_pid(workspace: Path, name: str) -> int | None:
    """The pid of the driver running the sweep ``name`` (started here or from the command line); None when none
    runs."""
    target = sweep_dir(Path(workspace).resolve(), name)  # as start_sweep wrote it in the driver's command line
    holder = lock_holder(target / DRIVER_LOCK_FILE)
    if holder is not None and pid_alive(holder):
        return holder
    recorded = _recorded_pid(target)
    return recorded if recorded is not None and _is_driver(recorded, target) else None


def driver_running(workspace: Path, name: str) -> bool:
    """Whether a driver is running the sweep ``name``."""
    return driver_pid(workspace, name) is not None


def stop_sweep(workspace: Path, name: str) -> bool:
    """Ask the sweep's driver to stop (SIGINT): it stops the current trial's run with a checkpoint and exits 130.
    False when no driver runs. Returns at once; ``driver_running`` tells when it has gone."""
    pid = driver_pid(workspace, name)
    if pid is None:
        return False
    try:
        os.kill(pid, signal.SIGINT)
    except ProcessLookupError:
        return False
    return True


def driver_log_tail(workspace: Path, name: str, lines: int = 12) -> str:
    """The last ``lines`` lines of the sweep's driver.log ("" when there is none)."""
    path = sweep_dir(workspace, name) / DRIVER_LOG
    try:
        with path.open("rb") as handle:
            handle.seek(max(0, path.stat().st_size - 64 * 1024))  # the end is what matters; a log may be long
            text = handle.read().decode(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.rstrip().splitlines()[-lines:])


def lock_holder(path: Path) -> int | None:
    """The pid holding a ``flock`` on ``path``, as the kernel lists it in /proc/locks; None when nobody holds it or
    /proc cannot tell (no /proc, or a file system whose device numbers /proc/locks reports differently)."""
    try:
        stat = Path(path).stat()
        listing = PROC_LOCKS.read_text()
    except OSError:
        return None
    wanted = f"{os.major(stat.st_dev):02x}:{os.minor(stat.st_dev):02x}:{stat.st_ino}"
    for line in listing.splitlines():
        # "1: FLOCK  ADVISORY  WRITE 5892 fe:00:2147460 0 EOF"; a process waiting for it reads "1: -> FLOCK ...".
        fields = line.split()
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == wanted:
            with contextlib.suppress(ValueError):
                return int(fields[4])
    return None


def _recorded_pid(target: Path) -> int | None:
    try:
        pid = json.loads((target / DRIVER_RECORD).read_text(encoding="utf-8")).get("pid")
    except (OSError, ValueError, AttributeError):
        return None
    return pid if isinstance(pid, int) and pid > 0 else None


def _is_driver(pid: int, target: Path) -> bool:
    """Whether ``pid`` is alive and is ``python -m engine sweep`` of this folder's sweep.yaml (a pid recorded before
    a reboot may name another program by now)."""
    if not pid_alive(pid):
        return False
    args = command_line(pid)
    if not args:  # no /proc: the signal test is all there is
        return not PROC_LOCKS.parent.exists()
    return "sweep" in args and str(target / SWEEP_FILE) in args
