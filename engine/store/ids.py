"""Names that sort in the order they were made, to the microsecond: Evaluate's and Benchmarks' result files
(engine.evaluate.result_files) and job folders (engine.runs.jobs), each listed newest first by name, also among
those made within one second. Standard library only."""

from __future__ import annotations

import time

_last_micros = [0]  # the last id's time, so that one process never makes an id twice nor one that sorts earlier


def time_id() -> str:
    """``YYYYmmdd-HHMMSS-uuuuuu`` (local time) from one reading of the clock."""
    micros = max(time.time_ns() // 1000, _last_micros[0] + 1)
    _last_micros[0] = micros
    seconds, fraction = divmod(micros, 10**6)
    return f"{time.strftime('%Y%m%d-%H%M%S', time.localtime(seconds))}-{fraction:06d}"
