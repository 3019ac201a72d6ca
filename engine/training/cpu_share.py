"""On a CPU, train with as many threads as there are cores that other programs leave free.

PyTorch's OpenMP threads wait for each other at the end of every parallel operation by spinning. When another
program keeps a core busy (a browser drawing the live charts on the same laptop is the usual one), one of the
training threads keeps losing its core and the others spin until it comes back, at every one of the
hundreds of operations in a step. On 2 cores with Chromium showing the Monitor, a demo step took 1.37 s with
2 threads and 0.14 s with 1 (0.08 s with 2 on an idle machine); see benchmarks/README.md.

So a run on a CPU whose thread count the user left to the engine measures, about once a second, how much CPU
the rest of the machine used (``/proc/stat`` minus this process's own time) and sets
``torch.set_num_threads`` to the cores left free, never below one nor above the count it started with. A
light load (the studio answering polls, about a tenth of a core) keeps every thread. Linux only; elsewhere,
and for GPU or multi-process runs, nothing changes. A different thread count sums floats in a different order
(the losses of a padding-free demo run differ in the 7th digit between one thread and two), so a run that must
repeat bit for bit pins ``launch.threads_per_process``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from transformers import TrainerCallback

PROC_STAT = "/proc/stat"
SELF_STAT = "/proc/self/stat"
CHECK_SECONDS = 1.0
# The shortest window the first reading is taken over: /proc/stat counts in ticks of 10 ms.
FIRST_WINDOW_SECONDS = 0.2
# Busy fields of /proc/stat's cpu line: user, nice, system, irq, softirq, steal (a hypervisor's other guests).
BUSY_FIELDS = (0, 1, 2, 5, 6, 7)


@dataclass(frozen=True)
class CpuTimes:
    """Cumulative CPU seconds: of the whole machine busy, of this process, and of wall-clock time."""

    machine_busy: float
    own: float
    wall: float


def read_cpu_times() -> CpuTimes | None:
    """The machine's and this process's CPU time so far; None where /proc cannot tell (not Linux)."""
    try:
        with open(PROC_STAT) as handle:
            fields = handle.readline().split()[1:]
        with open(SELF_STAT) as handle:
            own_fields = handle.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    ticks = os.sysconf("SC_CLK_TCK")
    busy = sum(int(fields[i]) for i in BUSY_FIELDS if i < len(fields))
    own = int(own_fields[11]) + int(own_fields[12])  # utime, stime (fields 14 and 15 of stat)
    return CpuTimes(busy / ticks, own / ticks, time.monotonic())


def others_load(before: CpuTimes, after: CpuTimes) -> float:
    """Cores the rest of the machine kept busy on average between two readings."""
    wall = after.wall - before.wall
    if wall <= 0:
        return 0.0
    others = (after.machine_busy - before.machine_busy) - (after.own - before.own)
    return max(0.0, others / wall)


def threads_for(load: float, cores: int, most: int) -> int:
    """Threads to train with when other programs keep ``load`` cores busy: the cores they leave, rounded
    (a tenth of a core in use leaves all of them), between 1 and ``most``."""
    return max(1, min(most, round(cores - load)))


class CpuShareCallback(TrainerCallback):
    """Sets torch's thread count at step ends to the cores other programs leave free (see the module doc)."""

    def __init__(
        self,
        cores: int,
        most: int,
        set_threads: Callable[[int], None],
        start: CpuTimes,
        read: Callable[[], CpuTimes | None] = read_cpu_times,
        check_seconds: float = CHECK_SECONDS,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.cores, self.most = cores, most
        self.set_threads, self.read, self.check_seconds, self.sleep = set_threads, read, check_seconds, sleep
        self.threads = most
        self._last = start  # the reading the first measured interval starts from

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        # Made before the data and the model were loaded: the load of that time decides the first step's threads.
        # A warm fork loads them in less than the window; it waits out the rest (a fraction of a second, once),
        # or its first steps would run on every thread beside a busy program until the first check.
        now = self.read()
        if now is not None and now.wall - self._last.wall < FIRST_WINDOW_SECONDS:
            self.sleep(FIRST_WINDOW_SECONDS - (now.wall - self._last.wall))
            now = self.read()
        self._adjust(now, min_seconds=FIRST_WINDOW_SECONDS)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._adjust(self.read(), min_seconds=self.check_seconds)

    def _adjust(self, now: CpuTimes | None, min_seconds: float) -> None:
        """Set the threads from the load between the last reading and ``now``, once at least ``min_seconds`` have
        passed."""
        if now is None or now.wall - self._last.wall < min_seconds:
            return
        load = others_load(self._last, now)
        wanted = threads_for(load, self.cores, self.most)
        self._last = now
        if wanted != self.threads:
            self.threads = wanted
            self.set_threads(wanted)
            print(
                f"cpu share: other programs keep {load:.1f} of {self.cores} cores busy; "
                f"training with {wanted} of {self.most} threads",
                flush=True,
            )


def cpu_share_callback(threads_pinned: bool, on_cpu: bool, num_processes: int) -> CpuShareCallback | None:
    """The callback for a run that may adapt its threads: a single process on a CPU, threads not pinned."""
    import torch

    most = torch.get_num_threads()
    if threads_pinned or not on_cpu or num_processes != 1 or most < 2:
        return None
    start = read_cpu_times()
    if start is None:
        return None
    cores = len(os.sched_getaffinity(0))
    return CpuShareCallback(cores=cores, most=most, set_threads=torch.set_num_threads, start=start)
