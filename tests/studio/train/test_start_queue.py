"""Start and Resume outside demo mode wait in line for their devices instead of being refused; the Monitor shows the
place in line for the run's devices; the Launch section's device picker; and two real tiny runs on a CPU machine
that the studio's scheduler runs one after the other, the second starting by itself once the first has completed.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from engine import runs
from engine.config import RunConfig
from engine.runs import queue as run_queue
from engine.store.rundir import FINAL_STATES, read_status, update_status
from studio.demo.caller import Caller
from studio.form.schema import leaf_specs
from studio.form.values import config_to_values, values_to_data
from studio.monitor.live import FEEDS, live_panels
from studio.queue.scheduler import Scheduler, resume_in_line
from studio.train import actions, starting
from tests.helpers.live_processes import processes_fixture, running_stand_in  # noqa: F401 - the fixture
from tests.helpers.machine_load import load_factor


def start(workspace: Path, launcher: Any, name: str, **changes: Any) -> starting.StartResult:
    values = actions.starting_values()
    values.update({"name": name, "train.max_steps": 10})
    values.update({key.replace("__", "."): value for key, value in changes.items()})
    return starting.start_run(Caller(workspace), values, launcher)


def test_start_on_two_gpus_starts_two_runs_and_queues_the_third(
    tmp_path: Path, processes: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STUDIO_DEVICES", "0,1")
    launcher = running_stand_in(processes)
    first, second = start(tmp_path, launcher, "first"), start(tmp_path, launcher, "second")
    assert (first.message, second.message) == ("▶ Started `first`", "▶ Started `second`")
    assert [read_status(result.run_dir).devices for result in (first, second)] == [[0], [1]]
    on_gpu_1 = start(tmp_path, launcher, "on-1", launch__devices="1")
    waiting = "is queued: 1 run ahead of yours. It starts by itself; follow it on the Monitor."
    assert on_gpu_1.message == f"⧖ `on-1` {waiting}"  # the run on GPU 1; the one on GPU 0 is not in its way
    with FEEDS.polled(on_gpu_1.run_dir) as feed:
        panel = live_panels(on_gpu_1.run_dir, runs.status(on_gpu_1.run_dir), feed)["progress"]
    assert "queued</b>: 1 run ahead of yours · it starts by itself when its devices are free" in panel
    third = start(tmp_path, launcher, "third")  # any GPU: both runs and the run waiting for GPU 1 are ahead
    assert "is queued: 3 runs ahead of yours" in third.message
    update_status(second.run_dir, state="completed", pid=None, supervisor_pid=None, ended_at=time.time())
    # GPU 1 goes to the run that has waited longest for it.
    assert Scheduler(tmp_path, launcher=lambda run_dir, _: launcher(run_dir)).tick() == [on_gpu_1.run_dir]
    assert read_status(on_gpu_1.run_dir).devices == [1] and run_queue.runs_ahead(third.run_dir) == 2


def test_resume_waits_in_line_while_the_machine_is_busy(
    tmp_path: Path, processes: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STUDIO_DEVICES", "cpu")
    stopped = runs.create_run(RunConfig(name="stopped"), workspace=tmp_path)
    update_status(stopped, state="stopped", ended_at=time.time())
    (stopped / "checkpoints" / "checkpoint-3").mkdir(parents=True)
    (stopped / "checkpoints" / "checkpoint-3" / "trainer_state.json").write_text('{"global_step": 3}')
    launcher = running_stand_in(processes)
    busy = start(tmp_path, launcher, "busy")
    assert busy.message == "▶ Started `busy`"
    message = resume_in_line(stopped, lambda run_dir, _: launcher(run_dir))
    assert message == "⧖ `stopped` is queued: 1 run ahead of yours. It starts by itself; follow it on the Monitor."
    assert read_status(stopped).resume_checkpoint == 3
    with pytest.raises(runs.RunError, match="the run is queued"):
        resume_in_line(stopped)


def test_the_launch_section_has_a_device_picker() -> None:
    spec = next(spec for spec in leaf_specs() if spec.path == "launch.devices")
    assert spec.kind == "list" and "GPUs the run may use" in spec.help
    values = config_to_values(RunConfig(launch={"devices": [0, 1], "num_processes": 2}))
    assert values["launch.devices"] == "0, 1"
    data, problems = values_to_data({**values, "launch.devices": "1, 0"}, leaf_specs())
    assert problems == [] and RunConfig.model_validate(data).launch.devices == [1, 0]
    assert config_to_values(RunConfig())["launch.devices"] == ""  # empty: any free GPU


def test_two_real_runs_on_a_cpu_machine_take_turns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Real tiny runs through engine.runs.start: the second waits in line, and the studio's scheduler starts it by
    itself once the first has completed."""
    monkeypatch.setenv("STUDIO_DEVICES", "cpu")
    first, second = (start(tmp_path, None, name).run_dir for name in ("first", "second"))
    scheduler = Scheduler(tmp_path, interval=0.5)
    try:
        assert read_status(second).state == "queued" and run_queue.runs_ahead(second) == 1
        scheduler.thread.start()
        deadline = time.time() + 300 * load_factor()
        while runs.status(second).state not in FINAL_STATES and time.time() < deadline:
            time.sleep(0.2)
        done = [runs.status(run_dir) for run_dir in (first, second)]
        assert [status.state for status in done] == ["completed", "completed"], done
        assert [status.step for status in done] == [10, 10]
        assert [status.devices for status in done] == [["cpu"], ["cpu"]]
        assert done[1].launched_at >= done[0].ended_at  # one at a time, the second after the first
    finally:
        scheduler.stopped.set()
        for run_dir in (first, second):
            runs.abort(run_dir)
