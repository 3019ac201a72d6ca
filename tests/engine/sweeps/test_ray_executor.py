"""A real sweep of the demo model with ``executor: ray`` against a real local Ray head (``ray start --head`` with two
CPUs), through the CLI: trials run as Ray tasks two at a time, each an ordinary run of the workspace; the study is
told each run's last eval loss; a trial pruned while its run trains on the "node" is stopped through the run
directory (the head cannot signal another machine's processes); Ctrl-C stops the trials on the cluster with a
checkpoint and the same command resumes them there; a head that does not answer is refused at once.

The head's processes (and so the Ray workers that train the trials) name their host ``ray-test-node``
(engine.store.hosts reads $ENGINE_HOST), while the driver keeps this machine's name: the trials look to the driver as
they would on another node of a cluster, so its status reconciliation (heartbeats, not pids) and the stop request
are the ones a real cluster uses. Skipped where ray is not installed (the test extra installs it).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ray")

import optuna  # noqa: E402

from engine import runs  # noqa: E402
from engine.store.processes import proc_pids  # noqa: E402
from engine.store.rundir import PRUNED, read_status  # noqa: E402
from engine.sweeps import sweep_status  # noqa: E402
from engine.sweeps.study import storage_for, sweep_dir  # noqa: E402
from tests.engine.sweeps.sweep_files import (  # noqa: E402
    DEADLINE_S,
    demo_base,
    engine_cli,
    engine_env,
    last_eval_loss,
    metrics,
    start_engine_cli,
    wait_for,
    write_sweep,
)

pytestmark = pytest.mark.integration

NODE = "ray-test-node"
RAY = Path(sys.executable).parent / "ray"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def session_pids(session: int) -> list[int]:
    """The live processes of a session (the head started in one of its own, and everything it started)."""
    found = []
    for pid in proc_pids():
        try:
            if os.getsid(pid) == session:
                found.append(pid)
        except ProcessLookupError:
            continue
    return found


def signal_all(pids: list[int], signum: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            continue


@pytest.fixture(scope="module")
def ray_head() -> Iterator[str]:
    """A local Ray head with 2 CPUs and no GPU, its address; stopped (its own session's processes) afterwards."""
    temp = Path(tempfile.mkdtemp(prefix="ray-", dir="/tmp"))  # short: Ray's socket paths must fit in 107 bytes
    port = free_port()
    log = (temp / "head.log").open("wb")
    command = [str(RAY), "start", "--head", "--block", f"--port={port}", "--num-cpus=2", "--num-gpus=0"]
    command += ["--disable-usage-stats", "--include-dashboard=false", f"--temp-dir={temp}"]
    head = subprocess.Popen(
        command, env=dict(engine_env(), ENGINE_HOST=NODE), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        wait_for(
            lambda: "Ray runtime started" in (temp / "head.log").read_text() or head.poll() is not None,
            "the Ray head to start",
        )
        assert head.poll() is None, (temp / "head.log").read_text()
        yield f"127.0.0.1:{port}"
    finally:
        head.terminate()  # ray start --block stops the processes it started (as ray stop would, but only these)
        with contextlib.suppress(AssertionError):
            # ... in a second or two, then lingers itself for about 30 s with nothing left to stop: not waited for.
            wait_for(lambda: set(session_pids(head.pid)) <= {head.pid}, "the Ray head's processes to end", timeout=10)
        signal_all(session_pids(head.pid), signal.SIGKILL)
        head.wait(timeout=30)
        log.close()
        shutil.rmtree(temp, ignore_errors=True)


def sweep_file(address: str) -> dict[str, Any]:
    """Three trials: two that learn (20 steps), then one whose learning rate leaves the eval loss where it starts,
    which the median pruner stops once both learners have finished (startup_trials 2: neither learner is judged
    while the other still runs). One thread per trial: the machine has two cores, one for each trial. Evaluations
    every 5 steps (the study's intermediate values); no checkpoint before the end (none is asserted but the one a
    stop saves)."""
    base = demo_base(max_steps=20)
    base["train"]["save_steps"] = 200
    base["launch"] = {"threads_per_process": 1}
    return {
        "name": "on-ray",
        "base": base,
        "space": {"train.learning_rate": {"choices": [3e-3, 2e-3, 1e-9]}, "train.max_steps": {"choices": [20, 200]}},
        "trials": 3,
        "sampler": "random",
        "pruner": {"kind": "median", "startup_trials": 2, "warmup_steps": 0},
        "first_trials": [
            {"train.learning_rate": 3e-3, "train.max_steps": 20},
            {"train.learning_rate": 2e-3, "train.max_steps": 20},
            {"train.learning_rate": 1e-9, "train.max_steps": 200},
        ],
        "executor": {
            "kind": "ray",
            "address": address,
            "gpus_per_trial": 0,
            "cpus_per_trial": 1,
            "max_concurrent_trials": 2,
        },
    }


def test_a_sweep_runs_its_trials_as_ray_tasks_two_at_a_time(tmp_path: Path, ray_head: str) -> None:
    workspace = tmp_path / "ws"
    done = engine_cli("sweep", str(write_sweep(tmp_path, sweep_file(ray_head))), "--workspace", str(workspace))
    output = done.stdout + done.stderr
    trials = {trial.number: trial for trial in sweep_status(workspace, "on-ray").trials}
    why = f"{output[-4000:]}\n" + "\n".join(f"trial {t.number}: {t.state} {t.note}" for t in trials.values())
    assert done.returncode == 0, why
    assert f"executor: Ray cluster at {ray_head}, 1 node, 2 CPUs, 0 GPUs" in output
    assert [trials[n].state for n in range(3)] == ["complete", "complete", "pruned"], why

    # Every trial is an ordinary run directory of the workspace, trained on the "node", and the study's trials are
    # exactly those runs.
    assert sorted(t.run_id for t in trials.values()) == sorted(found.name for found in runs.run_dirs(workspace))
    statuses = {n: runs.status(workspace / "runs" / trials[n].run_id) for n in range(3)}
    for number, current in statuses.items():
        assert current.sweep == {"name": "on-ray", "trial": number}
        assert current.host == NODE, current  # recorded by the task's node, not by the driver
    study = optuna.load_study(study_name="on-ray", storage=storage_for(sweep_dir(workspace, "on-ray")))
    for number in (0, 1):
        run_dir = workspace / "runs" / trials[number].run_id
        assert statuses[number].state == "completed" and statuses[number].step == 20
        events = metrics(run_dir)
        assert [e["step"] for e in events if e["event"] == "eval"] == [5, 10, 15, 20]
        assert study.trials[number].value == last_eval_loss(run_dir)
        assert sorted(study.trials[number].intermediate_values) == [5, 10, 15, 20]
    best = study.best_trial
    assert best.number in (0, 1) and best.value == last_eval_loss(workspace / "runs" / best.user_attrs["run_id"])

    # Two at a time: the two learners' runs trained at the same time.
    first, second = statuses[0], statuses[1]
    assert max(first.started_at, second.started_at) < min(first.ended_at, second.ended_at), (first, second)

    # The pruned trial was stopped through its run directory (a stop request its task turned into SIGTERM there):
    # it saved a checkpoint, long before its 200 steps.
    pruned = statuses[2]
    assert (pruned.state, pruned.error) == (PRUNED, trials[2].note), pruned
    assert pruned.checkpoints and pruned.step < 200
    assert not (workspace / "runs" / trials[2].run_id / ".request").exists()  # the task cleared it at the end


def test_a_cluster_that_does_not_answer_is_refused_at_once(tmp_path: Path) -> None:
    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    done = engine_cli("sweep", str(write_sweep(tmp_path, sweep_file(address))), "--workspace", str(tmp_path / "ws"))
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"error: executor.address: no Ray head answers at {address}" in done.stderr
    assert not (tmp_path / "ws" / "runs").exists()


PAUSED_STEPS = 80


def training(workspace: Path, number: int) -> bool:
    """Whether the trial's run trains (past its first step)."""
    found = sorted((workspace / "runs").glob(f"*-paused-trial-{number}"))
    current = read_status(found[0]) if found else None
    return bool(current and current.state == "running" and (current.step or 0) >= 1)


def test_ctrl_c_stops_the_trials_on_the_cluster_and_the_same_command_resumes_them(
    tmp_path: Path, ray_head: str
) -> None:
    workspace = tmp_path / "ws"
    base = sweep_file(ray_head)["base"]
    # Long enough that both trials train at once on a busy machine (one Ray worker may start seconds after the
    # other), and that Ctrl-C comes before either ends. One evaluation (the trial's value) and one checkpoint at the
    # end: the checkpoint asserted is the one Ctrl-C saves.
    base["train"].update(max_steps=PAUSED_STEPS, eval_steps=PAUSED_STEPS, save_steps=PAUSED_STEPS)
    sweep = {
        **sweep_file(ray_head),
        "base": base,
        "name": "paused",
        "space": {"train.learning_rate": {"choices": [3e-3, 2e-3]}},
        "trials": 2,
        "pruner": "none",
        "first_trials": [{"train.learning_rate": 3e-3}, {"train.learning_rate": 2e-3}],
    }
    path = write_sweep(tmp_path, sweep)
    log = tmp_path / "first.log"
    driver = start_engine_cli("sweep", str(path), "--workspace", str(workspace), log=log)
    try:
        wait_for(lambda: training(workspace, 0) and training(workspace, 1), "both trials to train")
        os.kill(driver.pid, signal.SIGINT)
        assert driver.wait(timeout=DEADLINE_S) == 130, log.read_text()
    finally:
        if driver.poll() is None:
            driver.kill()
    stopped = [runs.status(run_dir) for run_dir in sorted(runs.run_dirs(workspace))]
    assert [(current.state, current.host) for current in stopped] == [("stopped", NODE)] * 2, log.read_text()
    assert all(current.checkpoints and current.step < PAUSED_STEPS for current in stopped), stopped

    done = engine_cli("sweep", str(path), "--workspace", str(workspace))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("picking up its run") == 2, done.stdout
    summary = sweep_status(workspace, "paused")
    why = done.stdout + "\n".join(f"trial {t.number}: {t.state} {t.note}" for t in summary.trials)
    assert [trial.state for trial in summary.trials] == ["complete", "complete"], why
    for trial in summary.trials:
        run_dir = workspace / "runs" / trial.run_id
        assert runs.status(run_dir).state == "completed" and trial.value == last_eval_loss(run_dir)
        assert [e["event"] for e in metrics(run_dir)].count("resume") == 1  # resumed, not started again
