"""Faults injected into real runs of the demo model, through the real supervisor and worker processes.

A hung worker, kill -9 in the middle of a checkpoint, a loss that turns NaN, a disk that fills up while a
checkpoint is written, two Start requests at once, and a Stop that lands during an evaluation or a save.
Every case ends with the same checks: engine.runs.status tells the true state (and no process of the run is
left), metrics.jsonl holds every train step exactly once, each checkpoint directory is either complete and
loadable or absent, and the run resumes to completion (with the losses of an uninterrupted run).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from engine import runs
from engine.config import RunConfig
from engine.runs import queue as run_queue
from engine.store.paths import PROJECT_ROOT
from engine.store.rundir import (
    RESERVE_BYTES,
    append_metrics,
    checkpoint_path,
    checkpoint_steps,
    iter_metrics,
    reserve_space,
    update_status,
)
from engine.training.methods import METHODS
from tests.engine.runs.fault_checks import (
    MAX_STEPS,
    SAVE_STEPS,
    WORKER_ENV,
    assert_checkpoints_intact,
    assert_steps_once,
    assert_true_state,
    catch_save_in_progress,
    checkpoint_dirs,
    fault_config,
    poison_embeddings,
    resume_to_completion,
    run_processes,
    start_run,
    stop_frozen_worker,
    wait_until,
    worker_pid,
)
from tests.engine.runs.test_runs_integration import DEMO_MODEL, train_losses, wait_for_step
from tests.helpers.small_disk import fill_disk

pytestmark = pytest.mark.integration

_references: dict[str, Path] = {}


def uninterrupted_run(root: Path, config: RunConfig) -> Path:
    """A run of ``config`` from start to end, trained once per test module."""
    key = config.to_yaml()
    if key not in _references:
        run_dir = start_run(root / f"reference-{len(_references)}", config)
        assert runs.wait(run_dir, timeout=240).state == "completed", runs.status(run_dir)
        _references[key] = run_dir
    return _references[key]


@pytest.fixture(scope="module")
def references(tmp_path_factory: pytest.TempPathFactory) -> Callable[[RunConfig], Path]:
    """Uninterrupted runs to compare with, by config."""
    root = tmp_path_factory.mktemp("references")
    _references.clear()
    return lambda config: uninterrupted_run(root, config)


@pytest.fixture(scope="module")
def reference_run(references: Callable[[RunConfig], Path]) -> Path:
    """An uninterrupted run of fault_config()."""
    return references(fault_config())


@pytest.fixture(scope="module")
def reference(reference_run: Path) -> dict[int, float]:
    """The losses of the uninterrupted run."""
    return assert_steps_once(reference_run, MAX_STEPS)


# --- 1 + 4: a hung worker, aborted; kill -9 in the middle of a checkpoint -----------------------------------


HUNG_STEPS = 30  # long enough that the run cannot end between two looks at its status, on an idle machine too


def test_hung_worker_is_aborted_then_kill_9_mid_save_resumes(references: Callable[[RunConfig], Path], tmp_path: Path):
    config = fault_config(train={"max_steps": HUNG_STEPS})
    reference = assert_steps_once(references(config), HUNG_STEPS)
    run_dir = start_run(tmp_path, config)
    wait_for_step(run_dir, 3)  # past the checkpoint at step 2
    pid = worker_pid(run_dir)
    os.kill(pid, signal.SIGSTOP)  # hung, as in a C call that never returns
    processes = run_processes(run_dir)
    assert len(processes) == 2  # supervisor and worker
    assert runs.stop(run_dir)  # a hung worker cannot act on Stop...
    time.sleep(1)
    assert runs.status(run_dir).state == "running"  # ...and truly still runs
    assert runs.abort(run_dir)  # abort ends it all the same
    aborted = assert_true_state(run_dir, "aborted", processes)  # killed on request: not a crash
    assert aborted.error == "aborted by the user"
    frozen_mid_save = [step for step in checkpoint_dirs(run_dir) if step not in checkpoint_steps(run_dir)]
    kept = assert_checkpoints_intact(run_dir, cut_short=tuple(frozen_mid_save))  # the freeze may hit a save
    assert kept and kept[-1] >= 2, kept
    logged = max(train_losses(run_dir))

    runs.resume(run_dir)
    pid = worker_pid(run_dir)
    next_save = kept[-1] + SAVE_STEPS
    wait_until(lambda: not checkpoint_path(run_dir, next_save).exists(), 60, "the leftover checkpoint to go", 0.01)
    cut = catch_save_in_progress(run_dir, pid, range(next_save, HUNG_STEPS, SAVE_STEPS))
    os.kill(pid, signal.SIGKILL)  # while the checkpoint is half-written
    crashed = runs.wait(run_dir, timeout=60)
    assert crashed.state == "failed" and "SIGKILL" in crashed.error, crashed
    assert "train step" in crashed.log_tail  # the end of the log says where it was
    assert crashed.checkpoints == kept
    assert assert_checkpoints_intact(run_dir, cut_short=(cut,)) == kept  # there, but not offered for resume
    assert_steps_once(run_dir, max(cut, logged))
    resume_to_completion(run_dir, reference, HUNG_STEPS)  # the resumed worker removes the half-written checkpoint


def test_abort_ends_torchrun_and_every_rank(tmp_path: Path):
    """torchrun starts each rank in a session of its own: abort must reach them, not only the process group."""
    run_dir = start_run(tmp_path, fault_config(launch={"num_processes": 2}))
    wait_for_step(run_dir, 3)
    processes = run_processes(run_dir)
    commands = {pid: Path(f"/proc/{pid}/cmdline").read_bytes() for pid in processes}
    # torchrun's own command line names the worker too: a rank is a worker that is not torchrun.
    ranks = [pid for pid, cmd in commands.items() if b"engine\0worker" in cmd and b"torch.distributed" not in cmd]
    assert len(ranks) == 2, processes
    for pid in ranks:
        os.kill(pid, signal.SIGSTOP)  # both ranks hang (a stuck collective)
    assert runs.abort(run_dir)
    assert runs.status(run_dir).error == "aborted by the user"
    assert_true_state(run_dir, "aborted", processes)
    # The SIGSTOP may land while the ranks save the next checkpoint (it did once, at step 4): that one may be cut
    # short, and must then not be offered for resume.
    frozen_mid_save = [step for step in checkpoint_dirs(run_dir) if step not in checkpoint_steps(run_dir)]
    assert set(frozen_mid_save) <= {4}, frozen_mid_save
    assert 2 in assert_checkpoints_intact(run_dir, cut_short=tuple(frozen_mid_save))
    assert_steps_once(run_dir, max(train_losses(run_dir)))
    # Resuming a two-process run from its checkpoint: test_runs_integration's stop/resume test.


def test_abort_finds_ranks_orphaned_by_a_dead_torchrun(tmp_path: Path):
    """A rank whose supervisor and torchrun died is in no process tree of the run; its command line names it."""
    run_dir = runs.create_run(fault_config(), workspace=tmp_path / "workspace")
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    rank = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)", "-m", "engine", "worker", str(run_dir)],
        start_new_session=True,
    )
    try:
        update_status(run_dir, state="running", supervisor_pid=gone.pid, pid=None)
        assert runs.abort(run_dir)
        assert rank.wait(timeout=10) == -signal.SIGKILL
        aborted = runs.status(run_dir)
        assert (aborted.state, aborted.error) == ("aborted", "aborted by the user")
        assert aborted.is_final and aborted.is_resumable and not aborted.is_active
        assert not runs.abort(run_dir)  # nothing left to abort
        assert runs.status(run_dir).state == "aborted"  # a later reader does not turn it into a crash
    finally:
        rank.kill()


# --- 2: the loss turns NaN ------------------------------------------------------------------------------------


# The methods that learn from preference pairs (kto unpairs them).
PREFERENCE = tuple(name for name, method in METHODS.items() if "preference" in method.formats)
# Each method's own data: the SFT demo set, or the bundled preference pairs.
METHOD_DATA = {"sft": {}, **{method: {"path": "assets/datasets/demo_preference.jsonl"} for method in PREFERENCE}}


def test_nan_mid_run_keeps_earlier_checkpoints_and_refuses_resume(tmp_path: Path):
    import shutil

    model_dir = tmp_path / "model"
    shutil.copytree(DEMO_MODEL, model_dir)
    # Room to stop in: with 6 steps of about 0.1 s, the run could end before the Stop arrived.
    run_dir = start_run(tmp_path, fault_config(model={"name_or_path": str(model_dir)}, train={"max_steps": 60}))
    wait_for_step(run_dir, 2)
    runs.stop(run_dir)
    stopped = runs.wait(run_dir, timeout=120)
    assert stopped.state == "stopped", stopped
    good = stopped.step
    poison_embeddings(model_dir)  # the base model changes under the stopped run: the next loss is NaN

    runs.resume(run_dir)
    failed = runs.wait(run_dir, timeout=120)
    assert_true_state(run_dir, "failed")
    assert failed.exit_code == 1 and failed.bad_loss_step == good + 1
    assert f"the loss became nan at step {good + 1}" in failed.error
    assert f"checkpoints up to step {good} are kept" in failed.error
    losses = assert_steps_once(run_dir, good + 1)
    assert losses[good + 1] != losses[good + 1]  # NaN, logged once
    assert assert_checkpoints_intact(run_dir)[-1] == good  # nothing saved after the loss went bad
    assert not (run_dir / "adapter").exists()
    with pytest.raises(runs.RunError, match=f"loss went bad at step {good + 1}.*Start a new run"):
        runs.resume(run_dir)


@pytest.mark.parametrize("method", PREFERENCE)
def test_a_nan_loss_fails_each_preference_method_at_its_step(method: str, tmp_path: Path):
    """The guard reads each trainer's loss: a base that gives NaN fails the run at step 1, resume refused."""
    import shutil

    model_dir = tmp_path / "model"
    shutil.copytree(DEMO_MODEL, model_dir)
    poison_embeddings(model_dir)
    config = fault_config(method=method, data=METHOD_DATA[method], model={"name_or_path": str(model_dir)})
    run_dir = start_run(tmp_path, config)
    failed = runs.wait(run_dir, timeout=120)
    assert_true_state(run_dir, "failed")
    assert failed.exit_code == 1 and failed.bad_loss_step == 1, failed
    assert "the loss became nan at step 1" in failed.error
    losses = assert_steps_once(run_dir, 1)
    assert losses[1] != losses[1]  # NaN, logged once
    assert not assert_checkpoints_intact(run_dir) and not (run_dir / "adapter").exists()
    with pytest.raises(runs.RunError, match="loss went bad at step 1.*Start a new run"):
        runs.resume(run_dir)


# --- 3: the disk fills up while a checkpoint is written ---------------------------------------------------------


def allocated_bytes(path: Path) -> int:
    """Disk space a directory's files take (whole blocks, as the disk counts them)."""
    return sum(child.stat().st_blocks * 512 for child in path.rglob("*") if child.is_file())


def test_disk_full_during_a_checkpoint_fails_clearly_and_resumes(
    reference_run: Path, reference: dict[int, float], small_disk: Path
):
    checkpoint_size = allocated_bytes(checkpoint_path(reference_run, MAX_STEPS))
    # Room for the logs, the reserve and one and a half checkpoints: the one at step 2 fits, step 4 does not.
    filler = fill_disk(small_disk, leave=RESERVE_BYTES + checkpoint_size * 3 // 2 + 256 * 1024)

    run_dir = start_run(small_disk, fault_config())
    failed = runs.wait(run_dir, timeout=180)
    assert_true_state(run_dir, "failed")
    assert failed.error.startswith("the disk is full: no space left on device (ENOSPC) while saving checkpoint 4")
    assert failed.error.endswith("Free some space, then resume from checkpoint 2.")
    assert failed.checkpoints == [2]
    assert assert_checkpoints_intact(run_dir) == [2]  # the half-written checkpoint 4 is gone
    assert_steps_once(run_dir, 4)

    filler.unlink()  # space freed
    resume_to_completion(run_dir, reference)


def test_a_status_write_on_a_full_disk_uses_the_reserve(small_disk: Path):
    run_dir = small_disk / "run"
    run_dir.mkdir()
    update_status(run_dir, state="running")
    reserve_space(run_dir)
    fill_disk(small_disk, leave=0)
    with pytest.raises(OSError):
        append_metrics(run_dir, [{"event": "train", "step": 1, "pad": "x" * 100_000}])
    assert (run_dir / "metrics.jsonl").read_bytes() == b""  # no half line left behind
    update_status(run_dir, state="failed", error="the disk is full")
    assert runs.status(run_dir).state == "failed"
    assert not (run_dir / ".space-reserve").exists()


# --- 5: two Start requests at once -------------------------------------------------------------------------------

STARTER = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    import engine.data  # the slow import, done before the start line
    from studio.demo.caller import Caller
    from studio.train.starting import start_run
    values, workspace, ready, go = json.loads(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4])
    ready.touch()
    while not go.exists():
        time.sleep(0.001)
    result = start_run(Caller(workspace), values)
    print(json.dumps({"message": result.message, "run_dir": str(result.run_dir) if result.run_dir else None}))
    """
)


def test_two_starts_at_once_start_exactly_one_run_and_queue_the_other(reference: dict[int, float], tmp_path: Path):
    from studio.form.values import config_to_values

    workspace, go = tmp_path / "workspace", tmp_path / "go"
    values = json.dumps(config_to_values(fault_config()))
    starters = [
        subprocess.Popen(
            [sys.executable, "-c", STARTER, values, str(workspace), str(tmp_path / f"ready{n}"), str(go)],
            stdout=subprocess.PIPE,
            text=True,
            cwd=PROJECT_ROOT,
            env=WORKER_ENV,
        )
        for n in range(2)
    ]
    wait_until(lambda: all((tmp_path / f"ready{n}").exists() for n in range(2)), 120, "both starters")
    go.touch()
    results = [json.loads(starter.communicate(timeout=120)[0]) for starter in starters]
    started = [Path(result["run_dir"]) for result in results if result["message"].startswith("▶ Started")]
    queued = [Path(result["run_dir"]) for result in results if "is queued: 1 run ahead" in result["message"]]
    assert len(started) == 1 and len(queued) == 1, results
    assert sorted(runs.run_dirs(workspace)) == sorted([*started, *queued])
    assert run_queue.cancel_queued(queued[0])  # no scheduler runs here: it waits until cancelled

    run_dir = started[0]
    assert runs.wait(run_dir, timeout=240).state == "completed", runs.status(run_dir)
    assert_true_state(run_dir, "completed")
    assert assert_steps_once(run_dir, MAX_STEPS) == reference
    assert assert_checkpoints_intact(run_dir)[-1] == MAX_STEPS


# --- 6: Stop during an evaluation and during a checkpoint save ----------------------------------------------------


def eval_in_progress(run_dir: Path, step: int) -> bool:
    """The train event of ``step`` is logged and its evaluation's is not: the worker is evaluating."""
    events = {(event["event"], event["step"]) for event in iter_metrics(run_dir)}
    return ("train", step) in events and ("eval", step) not in events


def catch_eval_in_progress(run_dir: Path, pid: int, step: int) -> None:
    """Freeze the worker during the evaluation at ``step`` (it runs for seconds: one row per batch)."""
    wait_until(lambda: eval_in_progress(run_dir, step), 120, f"the evaluation at step {step}", poll=0.05)
    os.kill(pid, signal.SIGSTOP)
    assert eval_in_progress(run_dir, step), "the evaluation ended before the worker was frozen"


@pytest.mark.parametrize("method", ["sft", "dpo"])  # dpo: a preference trainer's own evaluation and saves
def test_stop_during_evaluation_and_during_a_save(method: str, references: Callable[[RunConfig], Path], tmp_path: Path):
    # Evaluating draws from the random generator (a DataLoader seeds itself), so the losses to match come from
    # an uninterrupted run that evaluates too. One row per eval batch: the evaluation lasts long enough to hit.
    config = fault_config(
        method=method,
        data={**METHOD_DATA[method], "eval_size": 24},
        train={"max_steps": 10, "eval_strategy": "steps", "eval_steps": 4, "eval_batch_size": 1},
    )
    reference_evals = [e for e in iter_metrics(references(config)) if e["event"] == "eval"]
    run_dir = start_run(tmp_path, config)
    pid = worker_pid(run_dir)
    catch_eval_in_progress(run_dir, pid, 4)
    stop_frozen_worker(run_dir, pid)
    stopped = runs.wait(run_dir, timeout=120)
    assert_true_state(run_dir, "stopped")
    assert stopped.step == 5  # the evaluation finished, then the next step ended with a checkpoint
    assert assert_checkpoints_intact(run_dir)[-1] == 5
    assert [e["step"] for e in iter_metrics(run_dir) if e["event"] == "eval"] == [4]  # whole, and once
    assert_steps_once(run_dir, 5)

    runs.resume(run_dir)
    pid = worker_pid(run_dir)
    cut = catch_save_in_progress(run_dir, pid, (6, 8))  # 8 when 6 was missed
    stop_frozen_worker(run_dir, pid)
    stopped = runs.wait(run_dir, timeout=120)
    assert_true_state(run_dir, "stopped")
    assert stopped.step == cut + 1  # the save completed, and the next step saved again and stopped
    assert assert_checkpoints_intact(run_dir)[-2:] == [cut, cut + 1]
    assert_steps_once(run_dir, cut + 1)

    resume_to_completion(run_dir, train_losses(references(config)), max_steps=10)
    evals = [e for e in iter_metrics(run_dir) if e["event"] == "eval"]
    assert [(e["step"], e["eval_loss"]) for e in evals] == [(e["step"], e["eval_loss"]) for e in reference_evals]
    assert [e["step"] for e in evals] == [4, 8, 10]  # every 4 steps, and the last
