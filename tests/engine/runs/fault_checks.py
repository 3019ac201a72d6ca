"""The checks every fault case ends with, and the helpers that drive a run into a fault (test_faults.py beside it).

The checks: engine.runs.status tells the true state (and no process of the run is left), metrics.jsonl holds
every train step exactly once, each checkpoint directory is either complete and loadable or absent, and the run
resumes to completion with the losses of an uninterrupted run.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from engine import runs
from engine.config import RunConfig
from engine.store.paths import PROJECT_ROOT
from engine.store.processes import process_tree
from engine.store.rundir import (
    CHECKPOINTS_DIR,
    checkpoint_path,
    checkpoint_steps,
)
from tests.engine.runs.test_runs_integration import small_config, train_losses

WORKER_ENV = dict(os.environ, PYTHONPATH=str(PROJECT_ROOT))
MAX_STEPS, SAVE_STEPS = 6, 2


def fault_config(**overrides: Any) -> RunConfig:
    """The integration tests' small demo run, shorter: 6 steps with a checkpoint every 2."""
    train = {"max_steps": MAX_STEPS, "save_steps": SAVE_STEPS, **overrides.pop("train", {})}
    return small_config(train=train, **overrides)


# --- the checks every case ends with ---------------------------------------------------------------------------


def running(pid: int | None) -> bool:
    """Whether ``pid`` is a process that still runs (a zombie does not)."""
    if not pid:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def run_processes(run_dir: Path) -> list[int]:
    """Every live process of a run: the supervisor's tree, torchrun ranks in their own sessions included."""
    current = runs.status(run_dir)
    roots = [pid for pid in (current.supervisor_pid, current.pid) if pid]
    return sorted({pid for root in roots for pid in process_tree(root) if running(pid)})


def assert_true_state(run_dir: Path, state: str, processes: list[int] = ()) -> dict[str, Any]:
    """The reconciled status says ``state``, and nothing of the run (``processes`` too) runs any more."""
    current = runs.status(run_dir)
    assert current.state == state, current
    pids = [*processes, current.supervisor_pid, current.pid]
    # The worker writes its final state just before it exits, and the supervisor then records the exit code.
    wait_until(lambda: not any(running(pid) for pid in pids), 30, f"the processes of a {state} run to end", 0.05)
    current = runs.status(run_dir)
    assert current.state == state, current  # and the exiting processes did not change it
    if state in ("stopped", "completed"):
        assert current.step == max(train_losses(run_dir)), current  # the status step is the last trained one
    return current


def assert_steps_once(run_dir: Path, last_step: int) -> dict[int, float]:
    """Train events of steps 1..last_step, each exactly once (train_losses fails on a duplicate)."""
    losses = train_losses(run_dir)
    assert sorted(losses) == list(range(1, last_step + 1)), sorted(losses)
    return losses


def checkpoint_dirs(run_dir: Path) -> list[int]:
    """Steps of every checkpoint-N directory, complete or not."""
    return sorted(int(path.name.split("-")[1]) for path in (run_dir / CHECKPOINTS_DIR).glob("checkpoint-*"))


def assert_checkpoints_intact(run_dir: Path, cut_short: tuple[int, ...] = ()) -> list[int]:
    """Every checkpoint a resume may pick is complete and loads; returns their steps.

    A directory that is not complete is allowed only for the steps in ``cut_short`` (a process killed mid-save
    cannot tidy up; the next worker removes it) and is then checked not to be offered for resume.
    """
    import torch
    from safetensors.torch import load_file

    listed = checkpoint_steps(run_dir)
    assert sorted(set(checkpoint_dirs(run_dir)) - set(listed)) == sorted(cut_short), (checkpoint_dirs(run_dir), listed)
    for step in listed:
        path = checkpoint_path(run_dir, step)
        assert json.loads((path / "trainer_state.json").read_text())["global_step"] == step
        assert load_file(path / "adapter_model.safetensors"), path
        assert torch.load(path / "optimizer.pt", weights_only=True)["state"], path
    return listed


def resume_to_completion(run_dir: Path, reference: dict[int, float], max_steps: int = MAX_STEPS) -> None:
    """engine.runs.resume from the newest checkpoint runs to the end, with the uninterrupted run's losses."""
    runs.resume(run_dir)
    runs.wait(run_dir, timeout=240)
    assert_true_state(run_dir, "completed")
    assert assert_steps_once(run_dir, max_steps) == reference  # exactly, step by step
    assert max_steps in assert_checkpoints_intact(run_dir)
    assert (run_dir / "adapter" / "adapter_model.safetensors").is_file()


# --- driving the run ----------------------------------------------------------------------------------------


def start_run(tmp_path: Path, config: RunConfig) -> Path:
    """Create and start a run in a workspace under ``tmp_path``, as the studio does."""
    run_dir = runs.create_run(config, workspace=tmp_path / "workspace")
    runs.start(run_dir)
    return run_dir


def wait_until(condition: Callable[[], Any], timeout: float, what: str, poll: float = 0.02) -> Any:
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(poll)
    raise AssertionError(f"timed out waiting for {what}")


def worker_pid(run_dir: Path) -> int:
    return wait_until(lambda: runs.status(run_dir).pid, 60, "the worker's pid")


def stop_frozen_worker(run_dir: Path, pid: int) -> None:
    """Ask a run whose worker is frozen (SIGSTOP) to stop, then let the worker go on: the stop request lands at
    the exact moment it was frozen."""
    try:
        assert runs.stop(run_dir)
        time.sleep(0.2)  # the supervisor passes SIGTERM on; it waits, pending, in the frozen worker
    finally:
        os.kill(pid, signal.SIGCONT)


def lowest_priority(pid: int) -> None:
    """Renice every thread of ``pid`` to 19 (threads it starts later inherit it)."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(ProcessLookupError):  # a thread that ended meanwhile
            os.setpriority(os.PRIO_PROCESS, int(task.name), 19)


def catch_save_in_progress(run_dir: Path, pid: int, steps: Sequence[int], timeout: float = 120) -> int:
    """Freeze the worker while it writes the checkpoint of one of ``steps`` (it stays frozen); returns that step.

    The test shares two cores with the run, so it watches with one cheap stat per millisecond or two instead
    of listing checkpoints; once the directory exists, a frozen worker must not have finished it yet. The
    demo model's save lasts milliseconds, and on a busy machine the watcher was once not scheduled inside
    it. So the worker first gets the lowest CPU priority: the watcher, woken every 2 ms, runs before it, and
    with other programs busy the save is spread over seconds (on an idle core it runs as fast as before).
    Should a save still be missed, or be over before the test looked, the next of ``steps`` is tried.
    """
    lowest_priority(pid)
    for step in steps:
        if step in checkpoint_steps(run_dir):
            continue  # saved before the test looked
        wait_until(checkpoint_path(run_dir, step).exists, timeout, f"the save of checkpoint {step}", poll=0.002)
        os.kill(pid, signal.SIGSTOP)
        if step not in checkpoint_steps(run_dir):
            return step
        os.kill(pid, signal.SIGCONT)  # missed: this checkpoint was complete before the worker was frozen
    raise AssertionError(f"no save of checkpoints {list(steps)} was caught in progress")


def poison_embeddings(model_dir: Path) -> None:
    """Overwrite the model's input embeddings with inf: every forward pass from now on gives a NaN loss."""
    from safetensors.torch import load_file, save_file

    weights = load_file(model_dir / "model.safetensors")
    name = next(key for key in weights if "embed_tokens" in key)
    weights[name].fill_(float("inf"))
    save_file(weights, model_dir / "model.safetensors", metadata={"format": "pt"})
