"""Save now, Pause / Continue and early stopping in real runs of the demo model, through the real supervisor and
worker processes, in the fault suite's manner (test_faults.py, fault_checks.py): each case ends with the true
state, every train step logged once, every checkpoint whole and loadable, and the losses of an uninterrupted run.

- a pause outlives the process that asked for it (killed with SIGKILL, as a studio can be), and a Continue from
  another process finishes the run in the same worker, as if it had never waited;
- Stop and Abort act on a paused run;
- Save now during an evaluation writes a checkpoint of that step at once (while paused: Chat, Evaluate and Export
  offer it while the run is active), and training goes on;
- two processes (torchrun) pause, save and continue together;
- early stopping ends the demo preset's variant as completed, with its reason, before max_steps, its result the
  best checkpoint.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from engine import runs
from engine.config import RunConfig, load_config, parse_config
from engine.store.paths import PROJECT_ROOT
from engine.store.processes import is_alive
from engine.store.rundir import checkpoint_path, checkpoint_steps, iter_metrics
from tests.engine.runs.fault_checks import (
    WORKER_ENV,
    assert_checkpoints_intact,
    assert_steps_once,
    assert_true_state,
    resume_to_completion,
    start_run,
    wait_until,
    worker_pid,
)
from tests.engine.runs.test_faults import eval_in_progress
from tests.engine.runs.test_runs_integration import small_config, train_losses

pytestmark = pytest.mark.integration

MAX_STEPS = 12
EVAL_STEPS = 4
PRESET = PROJECT_ROOT / "assets" / "presets" / "demo-early-stopping.yaml"


def request_config(**launch: int) -> RunConfig:
    """12 quick steps, an evaluation every 4 that lasts (one row per batch), no checkpoint but on request and the
    last step's."""
    return small_config(
        data={"eval_size": 24},
        train={
            "max_steps": MAX_STEPS,
            "eval_strategy": "steps",
            "eval_steps": EVAL_STEPS,
            "eval_batch_size": 1,
            "save_steps": 1000,
        },
        launch={"threads_per_process": 1, **launch},
    )


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same run, uninterrupted."""
    run_dir = start_run(tmp_path_factory.mktemp("reference"), request_config())
    assert runs.wait(run_dir, timeout=240).state == "completed", runs.status(run_dir)
    return run_dir


def evals(run_dir: Path) -> list[tuple[int, float]]:
    return [(event["step"], event["eval_loss"]) for event in iter_metrics(run_dir) if event["event"] == "eval"]


def pause_events(run_dir: Path) -> list[dict]:
    return [event for event in iter_metrics(run_dir) if event["event"] == "pause"]


def pause_now(run_dir: Path, after: int) -> int:
    """Pause the run once it has trained past step ``after``; returns the step it waits at."""
    wait_until(lambda: (runs.status(run_dir).step or 0) > after, 120, f"a step past {after}", 0.01)
    assert runs.pause(run_dir)
    paused = wait_until(lambda: (s := runs.status(run_dir)).state == "paused" and s, 120, "the pause")
    assert paused.paused_at and after < paused.step < MAX_STEPS, paused
    return paused.step


def assert_waited(run_dir: Path, step: int, continued_at: float) -> dict:
    """The pause at ``step`` is logged once, and no step was trained while it lasted."""
    (pause,) = [event for event in pause_events(run_dir) if event["step"] == step]
    assert pause["time"] + pause["seconds"] >= continued_at - 0.05  # it lasted until Continue (or Stop)
    after = [event["time"] for event in iter_metrics(run_dir) if event["event"] == "train" and event["step"] > step]
    assert not after or min(after) >= pause["time"] + pause["seconds"]
    return pause


# --- a pause outlives the process that asked for it -----------------------------------------------------------

ASKER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from engine import runs
    from engine.config import parse_config
    import yaml
    config, workspace = parse_config(yaml.safe_load(sys.argv[1])), Path(sys.argv[2])
    run_dir = runs.create_run(config, workspace=workspace)
    runs.start(run_dir)
    print(run_dir, flush=True)
    while (runs.status(run_dir).step or 0) < 2:
        time.sleep(0.01)
    assert runs.pause(run_dir)
    time.sleep(600)  # a studio that goes on living, until it is killed
    """
)
CONTINUER = (
    "import sys; from pathlib import Path; from engine import runs; print(runs.resume_paused(Path(sys.argv[1])))"
)


def test_a_pause_outlives_the_studio_and_continue_finishes_in_the_same_worker(reference: Path, tmp_path: Path):
    config = request_config()
    asker = subprocess.Popen(
        [sys.executable, "-c", ASKER, config.to_yaml(), str(tmp_path / "workspace")],
        stdout=subprocess.PIPE,
        text=True,
        cwd=PROJECT_ROOT,
        env=WORKER_ENV,
    )
    try:
        run_dir = Path(asker.stdout.readline().strip())
        paused = wait_until(lambda: (s := runs.status(run_dir)).state == "paused" and s, 120, "the pause")
    finally:
        asker.kill()  # SIGKILL: the studio that paused the run is gone without a word
        asker.wait(10)
    assert asker.returncode == -signal.SIGKILL
    pid, step = paused.pid, paused.step
    assert is_alive(pid) and runs.status(run_dir).state == "paused"  # the run does not depend on its asker
    assert max(train_losses(run_dir)) == step

    continued_at = time.time()
    continuer = subprocess.run(
        [sys.executable, "-c", CONTINUER, str(run_dir)],
        capture_output=True,
        text=True,
        cwd=PROJECT_ROOT,
        env=WORKER_ENV,
    )  # a studio started again, or any other program
    assert continuer.stdout.strip() == "True", continuer.stderr
    finished = runs.wait(run_dir, timeout=240)
    assert_true_state(run_dir, "completed")
    assert finished.pid == pid and finished.paused_at is None  # the same process went on
    assert assert_steps_once(run_dir, MAX_STEPS) == train_losses(reference)  # as if it had never waited
    assert evals(run_dir) == evals(reference)
    assert [event["event"] for event in iter_metrics(run_dir)].count("resume") == 0
    assert assert_waited(run_dir, step, continued_at)["seconds"] > 0
    assert len(pause_events(run_dir)) == 1
    assert checkpoint_steps(run_dir) == [MAX_STEPS]  # the last step's, as always: pausing saves nothing


# --- Stop, the time limit and Abort while paused --------------------------------------------------------------


def test_stop_and_abort_end_a_paused_run(reference: Path, tmp_path: Path):
    """(The time limit stops a paused run with the same Stop: test_request_files.py.)"""
    run_dir = start_run(tmp_path, request_config())
    first = pause_now(run_dir, 1)
    stopped_at = time.time()
    assert runs.stop(run_dir)
    stopped = runs.wait(run_dir, timeout=120)
    assert_true_state(run_dir, "stopped")
    assert stopped.step == first and stopped.paused_at is None  # at the step it waited at, not one further
    assert assert_checkpoints_intact(run_dir) == [first]  # Stop saved it
    assert_waited(run_dir, first, stopped_at)

    runs.resume(run_dir)
    second = pause_now(run_dir, first)
    pids = [runs.status(run_dir).supervisor_pid, runs.status(run_dir).pid]
    assert runs.abort(run_dir)
    assert_true_state(run_dir, "aborted", pids)
    assert runs.status(run_dir).error == "aborted by the user"
    assert assert_checkpoints_intact(run_dir) == [first] and max(train_losses(run_dir)) == second
    resume_to_completion(run_dir, train_losses(reference), MAX_STEPS)  # from the paused step's checkpoint
    assert evals(run_dir) == evals(reference)


# --- Save now during an evaluation ----------------------------------------------------------------------------


def test_save_now_during_an_evaluation_is_offered_at_once_and_training_goes_on(reference: Path, tmp_path: Path):
    from engine.evaluate.evaluations import check_request
    from engine.export.exports import plan_export
    from studio.chat.models import model_choices
    from studio.demo.caller import Caller
    from studio.jobs.view import finished_runs, weight_choices

    workspace = tmp_path / "workspace"
    run_dir = start_run(tmp_path, request_config())
    pid = worker_pid(run_dir)
    wait_until(lambda: eval_in_progress(run_dir, EVAL_STEPS), 120, "the first evaluation", 0.02)
    os.kill(pid, signal.SIGSTOP)  # the requests land in the middle of the evaluation
    try:
        assert eval_in_progress(run_dir, EVAL_STEPS), "the evaluation ended before the worker was frozen"
        assert runs.save_now(run_dir) and runs.pause(run_dir)  # and wait there, to look at it while it is active
    finally:
        os.kill(pid, signal.SIGCONT)
    paused = wait_until(lambda: (s := runs.status(run_dir)).state == "paused" and s, 120, "the pause after the save")
    assert paused.step == EVAL_STEPS and paused.checkpoints == [EVAL_STEPS]  # the evaluated step, saved whole
    assert assert_checkpoints_intact(run_dir) == [EVAL_STEPS]  # loads: adapter and optimizer state
    assert evals(run_dir) == evals(reference)[:1]  # the evaluation finished first
    run_id = run_dir.name
    assert finished_runs(workspace) == [(f"integration (paused) · {run_id}", run_id)]  # Evaluate, Export
    assert weight_choices(workspace, run_id) == [(f"checkpoint {EVAL_STEPS}", str(EVAL_STEPS))]
    assert (f"integration · checkpoint {EVAL_STEPS}", f"run:{run_id}:{EVAL_STEPS}") in model_choices(Caller(workspace))
    assert plan_export(run_dir, checkpoint=EVAL_STEPS).weights.path == checkpoint_path(run_dir, EVAL_STEPS)
    assert check_request(run_dir, "eval", EVAL_STEPS)[1].label == f"checkpoint-{EVAL_STEPS}"

    assert runs.resume_paused(run_dir)
    wait_until(lambda: (runs.status(run_dir).step or 0) > EVAL_STEPS, 120, "a step after the pause", 0.01)
    os.kill(pid, signal.SIGSTOP)  # a Save now while it trains, answered before the last step
    try:
        assert runs.save_now(run_dir)
    finally:
        os.kill(pid, signal.SIGCONT)
    second = wait_until(lambda: checkpoint_steps(run_dir)[1:2], 120, "the second checkpoint")[0]
    finished = runs.wait(run_dir, timeout=240)
    assert_true_state(run_dir, "completed")
    assert finished.pid == pid  # one process throughout
    kept = assert_checkpoints_intact(run_dir)  # the two asked for during the run, and the last step's
    assert kept == [EVAL_STEPS, second, MAX_STEPS] and EVAL_STEPS < second < MAX_STEPS, kept
    assert assert_steps_once(run_dir, MAX_STEPS) == train_losses(reference)  # the saves changed nothing
    assert evals(run_dir) == evals(reference)


# --- two processes --------------------------------------------------------------------------------------------


def test_two_processes_pause_save_and_continue_together(tmp_path: Path):
    run_dir = start_run(tmp_path, request_config(num_processes=2))
    step = pause_now(run_dir, 1)
    assert runs.save_now(run_dir)  # while paused: saved at once, still paused
    wait_until(lambda: checkpoint_steps(run_dir) == [step], 120, "the checkpoint of the paused step")
    assert runs.status(run_dir).state == "paused" and runs.status(run_dir).step == step
    assert runs.resume_paused(run_dir)
    assert runs.wait(run_dir, timeout=240).state == "completed", runs.status(run_dir)
    assert_true_state(run_dir, "completed")
    assert_steps_once(run_dir, MAX_STEPS)
    assert assert_checkpoints_intact(run_dir) == [step, MAX_STEPS]
    assert [event["step"] for event in pause_events(run_dir)] == [step]  # rank 0 alone writes


# --- early stopping --------------------------------------------------------------------------------------------


def test_early_stopping_completes_the_preset_variant_with_its_reason_and_best_model(tmp_path: Path):
    """The preset, cut short: a threshold no evaluation can beat, so the 4 evaluations after the first miss."""
    from safetensors.torch import load_file

    preset = load_config(PRESET).model_dump(mode="json")
    preset["train"].update(max_steps=60, eval_steps=2, save_steps=2, logging_steps=1)
    preset["train"]["early_stopping"]["threshold"] = 100.0
    preset["launch"]["threads_per_process"] = 1
    config = parse_config(preset)
    patience = config.train.early_stopping.patience
    stop_step = 2 * (patience + 1)  # the first evaluation sets the best; each after it misses

    run_dir = start_run(tmp_path, config)
    done = runs.wait(run_dir, timeout=240)
    assert_true_state(run_dir, "completed")
    assert done.reason == f"early stopped at step {stop_step} (eval_loss did not improve for {patience} evaluations)"
    assert done.step == stop_step < config.train.max_steps == done.max_steps
    assert_steps_once(run_dir, stop_step)
    assert [step for step, _ in evals(run_dir)] == list(range(2, stop_step + 1, 2))
    best_step = min(evals(run_dir), key=lambda item: item[1])[0]  # the lowest eval loss is the best model
    assert best_step in assert_checkpoints_intact(run_dir)  # kept despite save_total_limit
    result = load_file(run_dir / "adapter" / "adapter_model.safetensors")
    best = load_file(checkpoint_path(run_dir, best_step) / "adapter_model.safetensors")
    assert result.keys() == best.keys() and all((result[name] == best[name]).all() for name in result)
    with pytest.raises(runs.RunError, match="has completed"):
        runs.resume(run_dir)
