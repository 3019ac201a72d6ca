"""engine.training.cpu_share: the load of other programs read from /proc, and the threads a run keeps."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.training.cpu_share import CpuShareCallback, CpuTimes, others_load, read_cpu_times, threads_for

pytestmark = pytest.mark.skipif(read_cpu_times() is None, reason="needs Linux /proc")

SPIN = "import time\nend = time.time() + 120\nwhile time.time() < end: pass"


def spinner() -> subprocess.Popen[bytes]:
    """Another program that keeps one core busy."""
    return subprocess.Popen([sys.executable, "-c", SPIN])


def process_seconds() -> dict[int, float]:
    """CPU seconds (user + system) of every process on the machine but this one, by pid, from /proc."""
    ticks, found = os.sysconf("SC_CLK_TCK"), {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        pid = int(stat.parent.name)
        if pid == os.getpid():
            continue
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # it ended while we read
        found[pid] = (int(fields[11]) + int(fields[12])) / ticks
    return found


def cores_used(before: dict[int, float], after: dict[int, float], wall: float) -> float:
    """Cores the other processes used between two readings (a process that started meanwhile counts whole)."""
    return sum(seconds - before.get(pid, 0.0) for pid, seconds in after.items()) / wall


def test_a_busy_program_counts_and_this_process_does_not():
    """Checked against the truth of the moment, so it holds on a busy machine too: the load the run reads
    (/proc/stat less this process) must match what every other process used (each one's /proc/PID/stat) while
    this process kept a core busy itself, and must include the spinner's share.

    The truth misses any process that began and ended within the window (/proc/stat counted its time, no pid
    list holds it), which only ever makes the read load look higher: so the test looks for a window in which the
    two agree. Were this process counted, every window would read at least its own share too much."""
    process = spinner()
    gaps = []
    try:
        deadline = time.monotonic() + 60
        while process_seconds().get(process.pid, 0.0) < 0.05 and time.monotonic() < deadline:
            time.sleep(0.01)  # the spinner is running, not still starting
        for _ in range(WINDOWS):
            before, others_before, after, others_after = measured_window()
            wall = after.wall - before.wall
            own = (after.own - before.own) / wall
            load, truth = others_load(before, after), cores_used(others_before, others_after, wall)
            gaps.append((round(load - truth, 2), round(own, 2)))
            # A process that ended within the window took its time with it: only a window where none ended, and
            # none came and went unseen, is a fair truth.
            if others_before.keys() <= others_after.keys() and abs(load - truth) < min(0.25, own / 2):
                break
        else:
            pytest.fail(f"no window where the load read matched the processes' (load - truth, own): {gaps}")
    finally:
        process.kill()
        process.wait()
    spinner_share = (others_after[process.pid] - others_before[process.pid]) / wall
    # Both really ran (each gets a third of a core or less where several programs share 2 cores).
    assert own > 0.1 and spinner_share > 0.1, (own, spinner_share)
    assert load >= spinner_share - 0.1, (load, spinner_share)


WINDOWS = 20  # tries at a window in which no process of the machine ended (tests beside this one start many)


def measured_window() -> tuple[CpuTimes, dict[int, float], CpuTimes, dict[int, float]]:
    """The machine's CPU times and every other process's, before and after 1.5 s in which this process spins (its
    time must not count as other programs')."""
    before, others_before = read_cpu_times(), process_seconds()
    end = time.monotonic() + 1.5
    while time.monotonic() < end:
        pass
    return before, others_before, read_cpu_times(), process_seconds()


@pytest.mark.parametrize(
    ("load", "cores", "most", "expected"),
    [
        (0.0, 2, 2, 2),
        (0.1, 2, 2, 2),  # the studio answering polls leaves both cores
        (0.9, 2, 2, 1),  # a browser drawing charts takes one
        (3.0, 2, 2, 1),  # never below one
        (1.0, 16, 8, 8),  # never above the threads the run started with
        (9.0, 16, 8, 7),
    ],
)
def test_threads_for_the_cores_left(load, cores, most, expected):
    assert threads_for(load, cores, most) == expected


def test_callback_follows_the_load_both_ways():
    # Readings a second apart: the machine busy with 1.0 other cores, then quiet again.
    readings = iter(
        [
            CpuTimes(machine_busy=0.0, own=0.0, wall=0.0),
            CpuTimes(machine_busy=2.0, own=1.0, wall=1.0),  # others: 1.0 core
            CpuTimes(machine_busy=3.0, own=2.0, wall=2.0),  # others: 0.0 cores
        ]
    )
    chosen: list[int] = []
    share = CpuShareCallback(
        cores=2, most=2, set_threads=chosen.append, start=next(readings), read=lambda: next(readings)
    )
    share.on_train_begin(None, None, None)
    share.on_step_end(None, None, None)
    assert chosen == [1, 2] and share.threads == 2


def test_the_first_reading_waits_out_its_window_when_the_run_loaded_at_once():
    """A warm fork reaches its first step a few milliseconds after the start reading: the load is read over the
    whole first window all the same, not left to the first check at a step's end."""
    clock = {"wall": 0.05}  # the run began training 50 ms after the start reading
    slept: list[float] = []

    def read() -> CpuTimes:
        return CpuTimes(machine_busy=clock["wall"] * 1.0, own=0.0, wall=clock["wall"])  # others: one core

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock["wall"] += seconds

    chosen: list[int] = []
    start = CpuTimes(machine_busy=0.0, own=0.0, wall=0.0)
    share = CpuShareCallback(cores=2, most=2, set_threads=chosen.append, start=start, read=read, sleep=sleep)
    share.on_train_begin(None, None, None)
    assert slept == [pytest.approx(0.15)] and chosen == [1]


def test_a_run_beside_a_busy_program_trains_on_the_free_core(tmp_path: Path):
    if len(os.sched_getaffinity(0)) != 2:
        pytest.skip("the figures below are for a 2-core machine")
    from engine import runs
    from engine.config import parse_config

    config = parse_config(
        {
            "name": "share",
            "data": {"path": "assets/datasets/demo_sft_train.jsonl", "max_samples": 32},
            "train": {"max_steps": 3, "per_device_batch_size": 4, "max_length": 64, "save_strategy": "no"},
        }
    )
    process = spinner()
    try:
        run_dir = runs.create_run(config, run_dir=tmp_path / "run")
        runs.start(run_dir)
        final = runs.wait(run_dir, timeout=120)
    finally:
        process.kill()
        process.wait()
    assert final.state == "completed", final
    assert "training with 1 of 2 threads" in (run_dir / "train.log").read_text()
