"""engine.runs.devices and the queue's device rule, on a faked 2-GPU machine (``STUDIO_DEVICES=0,1``; no GPU is
needed): two runs on two GPUs start at once and a third waits; a run for a free GPU overtakes one waiting for a busy
GPU, but never takes a GPU that an earlier run waits for; the place in line counts only the run's devices; the GPUs
reach the training process as CUDA_VISIBLE_DEVICES; a warm standby is not handed a run on some GPUs only.

Runs are real run directories; the launcher stand-in marks a run running under a live process whose command line
names the engine, so engine.runs.status reconciles it as active without training anything.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from engine import runs
from engine.config import ConfigError, parse_config
from engine.runs import control, devices, supervisor
from engine.runs import queue as run_queue
from engine.runs.devices import CPU, DeviceError, Need
from engine.store.rundir import read_status, update_status
from tests.helpers.live_processes import live_engine_process, processes_fixture  # noqa: F401 - the fixture

_order = iter(range(1, 10_000))


@pytest.fixture(autouse=True)
def two_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine with GPUs 0 and 1, as far as the studio knows; the CUDA environment of this one is left out."""
    monkeypatch.setenv("STUDIO_DEVICES", "0,1")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


def new_run(workspace: Path, name: str, **launch: Any) -> Path:
    """A queued run that asks for ``launch``; each joins the line after the one made before it."""
    run_dir = runs.create_run(parse_config({"name": name, "launch": launch}), workspace=workspace)
    update_status(run_dir, created_at=float(next(_order)))
    return run_dir


def launcher(started: list[str], processes: list[subprocess.Popen[bytes]]) -> run_queue.Launcher:
    """Stands in for engine.runs.start: records the run and the devices the queue gave it, and makes it active."""

    def launch(run_dir: Path, _checkpoint: int | None) -> int:
        started.append(f"{read_status(run_dir).name}:{read_status(run_dir).devices}")
        pid = live_engine_process(processes)
        update_status(run_dir, state="running", pid=pid, supervisor_pid=pid, started_at=time.time())
        return pid

    return launch


def finish(run_dir: Path) -> None:
    update_status(run_dir, state="completed", pid=None, supervisor_pid=None, ended_at=time.time())


# --- the machine, what a run needs -------------------------------------------------------------------------------


def test_the_machine_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert devices.machine_gpus() == (0, 1)
    for text in ("", "cpu", " CPU "):
        monkeypatch.setenv("STUDIO_DEVICES", text)
        assert devices.machine_gpus() == ()
    monkeypatch.setenv("STUDIO_DEVICES", "2,3")  # to keep GPUs 0 and 1 for other work
    assert devices.machine_gpus() == (2, 3)
    for bad in ("0,0", "-1", "a"):
        with pytest.raises(ValueError):
            devices.parse_devices(bad)
    # Without the override: what nvidia-smi lists (nothing here), narrowed by CUDA_VISIBLE_DEVICES.
    monkeypatch.delenv("STUDIO_DEVICES")
    monkeypatch.setattr(devices, "_smi_gpu_count", lambda: 4)
    assert devices.machine_gpus() == (0, 1, 2, 3)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    assert devices.machine_gpus() == (0, 1)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "-1")
    assert devices.machine_gpus() == ()
    monkeypatch.setattr(devices, "_smi_gpu_count", lambda: 0)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")  # a stray setting on a machine without GPUs
    assert devices.machine_gpus() == ()


def test_the_gpus_are_passed_on_as_cuda_visible_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    assert devices.cuda_visible([1]) == {"CUDA_VISIBLE_DEVICES": "1"}
    assert devices.cuda_visible([0, 1]) == {"CUDA_VISIBLE_DEVICES": "0,1"}
    assert devices.cuda_visible([CPU]) == {} and devices.cuda_visible(None) == {}
    # Indices count the GPUs this process sees: under CUDA_VISIBLE_DEVICES=4,5 the run's GPU 1 is the machine's 5.
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5")
    assert devices.cuda_visible([1]) == {"CUDA_VISIBLE_DEVICES": "5"}
    env = supervisor.worker_environment(1, 2, [1])
    assert env["CUDA_VISIBLE_DEVICES"] == "5" and env["OMP_NUM_THREADS"] == "2"
    assert supervisor.worker_environment(1, 2, None)["CUDA_VISIBLE_DEVICES"] == "4,5"  # left as it is


def test_what_a_run_needs() -> None:
    gpus = (0, 1)

    def need(**launch: Any) -> Need:
        return devices.need_of(parse_config({"launch": launch}).launch, gpus)

    assert need() == Need(count=1)
    assert need(num_processes=2) == Need(count=2)
    assert need(devices=[1]) == Need(gpus=(1,), count=1)
    assert need(device="cpu", devices=[1]) == Need(cpu=True)
    assert devices.need_of(parse_config({"launch": {"devices": [1]}}).launch, ()) == Need(cpu=True)  # a CPU machine
    assert devices.choose(need(), gpus, {0}) == [1]
    assert devices.choose(need(num_processes=2), gpus, {0}) is None
    assert devices.choose(need(devices=[1]), gpus, {0}) == [1]
    assert devices.choose(need(device="cpu"), gpus, {0, 1}) == [CPU]
    with pytest.raises(DeviceError, match="needs GPU 5; this machine has GPU 0, 1"):
        devices.choose(need(devices=[5]), gpus, set())
    with pytest.raises(DeviceError, match="needs 3 GPUs"):
        devices.choose(need(num_processes=3), gpus, set())


def test_launch_devices_is_checked() -> None:
    assert parse_config({"launch": {"devices": [1, 0]}}).launch.devices == [1, 0]
    assert parse_config({"launch": {"devices": []}}).launch.devices is None  # a cleared box: any free GPU
    assert parse_config({"launch": {"devices": [0, 1], "num_processes": 2}}).launch.devices == [0, 1]
    assert parse_config({"launch": {"devices": [0, 1, 2]}}).launch.num_processes == 1  # one process, several GPUs
    cases = {
        "name each GPU once": ({"devices": [1, 1]}, "launch.devices"),
        "must be >= 0": ({"devices": [-1]}, "launch.devices.0"),
        "names 1 GPU for 2 processes": ({"devices": [0], "num_processes": 2}, "launch.devices"),
    }
    for message, (launch, field) in cases.items():
        with pytest.raises(ConfigError) as caught:
            parse_config({"launch": launch})
        assert message in caught.value.by_field()[field]


# --- the scheduler ----------------------------------------------------------------------------------------------


def test_two_runs_on_two_gpus_start_at_once_and_a_third_waits(tmp_path: Path, processes: list[Any]) -> None:
    first, second, third = (new_run(tmp_path, name) for name in ("first", "second", "third"))
    started: list[str] = []
    start = launcher(started, processes)
    assert run_queue.start_next_queued(tmp_path, start) == [first, second]
    assert started == ["first:[0]", "second:[1]"]
    assert read_status(third).state == "queued" and run_queue.runs_ahead(third) == 2
    assert run_queue.start_next_queued(tmp_path, start) == []  # however often it is asked
    finish(second)
    assert run_queue.runs_ahead(third) == 1
    assert run_queue.start_next_queued(tmp_path, start) == [third]
    assert started[-1] == "third:[1]" and runs.status(third).devices == [1]


def test_a_run_for_a_free_gpu_overtakes_one_waiting_for_a_busy_gpu(tmp_path: Path, processes: list[Any]) -> None:
    started: list[str] = []
    start = launcher(started, processes)
    busy = new_run(tmp_path, "busy", devices=[0])
    assert run_queue.start_next_queued(tmp_path, start) == [busy]
    wants_0 = new_run(tmp_path, "wants-0", devices=[0])
    wants_1 = new_run(tmp_path, "wants-1", devices=[1])
    also_0 = new_run(tmp_path, "also-0", devices=[0])
    # The place in line counts only the runs ahead on the run's own devices.
    assert [run_queue.runs_ahead(run) for run in (wants_0, wants_1, also_0)] == [1, 0, 2]
    assert run_queue.devices_free_for(wants_1) == [1] and run_queue.devices_free_for(wants_0) is None
    assert run_queue.start_next_queued(tmp_path, start) == [wants_1]
    assert read_status(wants_0).state == "queued" and run_queue.runs_ahead(also_0) == 2
    finish(busy)
    assert run_queue.start_next_queued(tmp_path, start) == [wants_0]  # first in line for GPU 0
    assert started == ["busy:[0]", "wants-1:[1]", "wants-0:[0]"] and read_status(also_0).state == "queued"


def test_a_run_waiting_for_two_gpus_is_not_starved(tmp_path: Path, processes: list[Any]) -> None:
    started: list[str] = []
    start = launcher(started, processes)
    busy = new_run(tmp_path, "busy", devices=[0])
    run_queue.start_next_queued(tmp_path, start)
    both = new_run(tmp_path, "both", num_processes=2)
    single = new_run(tmp_path, "single")
    # GPU 1 is free, but the earlier run waits for it (and GPU 0): the single-GPU run does not take it.
    assert run_queue.start_next_queued(tmp_path, start) == []
    assert run_queue.runs_ahead(both) == 1 and run_queue.runs_ahead(single) == 2
    assert run_queue.devices_free_for(single) is None
    finish(busy)
    assert run_queue.start_next_queued(tmp_path, start) == [both]
    assert started[-1] == "both:[0, 1]" and read_status(single).state == "queued"


def test_cpu_runs_go_beside_gpu_runs_one_at_a_time(tmp_path: Path, processes: list[Any]) -> None:
    gpu, cpu = new_run(tmp_path, "gpu"), new_run(tmp_path, "cpu", device="cpu")
    gpu_too, cpu_too = new_run(tmp_path, "gpu2"), new_run(tmp_path, "cpu2", device="cpu")
    started: list[str] = []
    assert run_queue.start_next_queued(tmp_path, launcher(started, processes)) == [gpu, cpu, gpu_too]
    assert started == ["gpu:[0]", "cpu:['cpu']", "gpu2:[1]"]
    assert read_status(cpu_too).state == "queued" and run_queue.runs_ahead(cpu_too) == 1


def test_a_run_whose_gpus_this_machine_lacks_fails_with_the_reason(tmp_path: Path, processes: list[Any]) -> None:
    lacking = new_run(tmp_path, "lacking", devices=[5])
    fine = new_run(tmp_path, "fine")
    assert run_queue.start_next_queued(tmp_path, launcher([], processes)) == [fine]
    status = runs.status(lacking)
    assert (
        status.state == "failed" and status.error == "could not start: the run needs GPU 5; this machine has GPU 0, 1"
    )


def test_try_start_starts_only_its_own_run_when_its_turn_comes(tmp_path: Path, processes: list[Any]) -> None:
    started: list[str] = []
    start = launcher(started, processes)
    first, second, third = (new_run(tmp_path, name, devices=[0]) for name in ("first", "second", "third"))
    assert run_queue.try_start(second, start) is False  # the first is ahead of it on GPU 0
    assert run_queue.try_start(first, start) is True and started == ["first:[0]"]
    finish(first)
    assert run_queue.try_start(third, start) is False and run_queue.try_start(second, start) is True
    assert run_queue.try_start(second, start) is False  # not queued any more


def test_runs_without_a_devices_record_hold_the_whole_machine(tmp_path: Path, processes: list[Any]) -> None:
    """A run started by an engine that did not record its devices may use any of them: nothing starts beside it."""
    old = new_run(tmp_path, "old")
    pid = live_engine_process(processes)
    update_status(old, state="running", pid=pid, supervisor_pid=pid)
    waiting = new_run(tmp_path, "waiting", devices=[1])
    assert run_queue.start_next_queued(tmp_path, launcher([], processes)) == []
    assert run_queue.runs_ahead(waiting) == 1


def test_the_default_launcher_hands_the_chosen_gpus_to_the_process(
    tmp_path: Path, processes: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """engine.runs.start records the queue's choice; the supervisor gives the worker exactly those GPUs."""
    spawned: list[list[str]] = []

    def spawn(args: list[str], **_popen: Any) -> Any:
        spawned.append(args)
        return subprocess.Popen(["sleep", "0"])

    monkeypatch.setattr(control, "spawn_detached", spawn)
    busy = new_run(tmp_path, "busy", devices=[0])
    run_queue.start_next_queued(tmp_path, launcher([], processes))
    run_dir = new_run(tmp_path, "second")
    assert run_queue.start_next_queued(tmp_path) == [run_dir]  # engine.runs.start
    assert spawned == [["supervise", str(run_dir)]] and read_status(run_dir).devices == [1]
    # A start that does not go through the queue takes a free GPU too (or the one it asks for, free or not).
    finish(run_dir)
    assert control.pick_devices(run_dir, tmp_path) == [1]
    assert busy.is_dir()

    environments: list[dict[str, str]] = []

    class Worker:
        def __init__(self, _command: list[str], env: dict[str, str], **_kwargs: Any) -> None:
            environments.append(env)

        def wait(self) -> int:
            return 0

    monkeypatch.setattr(supervisor.subprocess, "Popen", Worker)
    update_status(run_dir, state="starting", devices=[1])
    supervisor.supervise(run_dir)
    assert environments[0]["CUDA_VISIBLE_DEVICES"] == "1"


def test_a_warm_standby_takes_runs_on_every_gpu_or_the_cpu_only(monkeypatch: pytest.MonkeyPatch) -> None:
    assert devices.fits_standby([0, 1]) and devices.fits_standby([1, 0]) and devices.fits_standby([CPU])
    assert not devices.fits_standby([1]) and not devices.fits_standby([0])
    monkeypatch.setenv("STUDIO_DEVICES", "0")  # one GPU: every GPU run holds all of them
    assert devices.fits_standby([0])
