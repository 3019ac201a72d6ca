"""Run a script under a memory and a CPU-time cap: ``python -P limited_child.py MEMORY_BYTES CPU_S SCRIPT``.

The bootstrap of engine.store.limits: it caps its own address space (RLIMIT_AS) and CPU time (RLIMIT_CPU: the
kernel ends the process with SIGXCPU, then SIGKILL a second later) and then runs SCRIPT as ``__main__``, with
stdin and stdout untouched. Standard library only, so the caps hold before anything large is imported.
"""

from __future__ import annotations

import contextlib
import math
import resource
import runpy
import sys


def main() -> None:
    memory_bytes, cpu_s, script = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
    cpu = max(1, math.ceil(cpu_s))  # RLIMIT_CPU counts whole seconds
    with contextlib.suppress(ValueError, OSError):  # a system without the limit still has the CPU cap
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    sys.argv = [script]
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
