"""What a run appends: metrics.jsonl (one JSON object per event, whole lines only, read by byte offset) and
train.log (everything its process printed, read from the end)."""

from __future__ import annotations

import errno
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from engine.store.rundir.files import LOG_FILE, METRICS_FILE

ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")  # a terminal's colour / cursor code


def append_metrics(run_dir: Path, events: list[dict[str, Any]]) -> None:
    """Append events as whole JSON lines in one write, so a tailing reader never sees half a line.

    A full disk can cut a write short without an error; the stub is cut off again and the disk-full error
    raised, so the file never holds half a line that the next append would glue another event onto.
    """
    if not events:
        return
    payload = "".join(json.dumps(event, allow_nan=True) + "\n" for event in events).encode("utf-8")
    fd = os.open(run_dir / METRICS_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        size = os.fstat(fd).st_size  # only rank 0 of one run appends: nobody else moves the end meanwhile
        try:
            written = os.write(fd, payload)
        except OSError:
            os.ftruncate(fd, size)
            raise
        if written != len(payload):
            os.ftruncate(fd, size)
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(run_dir / METRICS_FILE))
    finally:
        os.close(fd)


def drop_partial_metrics_line(run_dir: Path) -> None:
    """Cut a last line that has no newline (a writer died mid-line); readers never returned it anyway."""
    path = run_dir / METRICS_FILE
    try:
        with path.open("rb+") as handle:
            data = handle.read()
            if data and not data.endswith(b"\n"):
                handle.truncate(data.rfind(b"\n") + 1)
    except FileNotFoundError:
        pass


def read_metrics(run_dir: Path, offset: int = 0) -> tuple[list[dict[str, Any]], int]:
    """Events appended since byte ``offset`` and the offset to pass next time.

    Reads only the new bytes (the cost does not grow with the run's length) and stops at the last complete
    line, so a line being written is picked up whole on the next call.
    """
    path = run_dir / METRICS_FILE
    try:
        with path.open("rb") as handle:
            handle.seek(offset)
            chunk = handle.read()
    except FileNotFoundError:
        return [], offset
    end = chunk.rfind(b"\n") + 1
    events = [json.loads(line) for line in chunk[:end].splitlines() if line.strip()]
    return events, offset + end


def iter_metrics(run_dir: Path) -> Iterator[dict[str, Any]]:
    """Every event of a run, in order."""
    events, _ = read_metrics(run_dir, 0)
    yield from events


def file_tail(path: Path, max_bytes: int) -> str:
    """The last ``max_bytes`` of a log file, decoded leniently (a log may hold any bytes); "" when it is missing."""
    try:
        with Path(path).open("rb") as handle:
            handle.seek(max(0, Path(path).stat().st_size - max_bytes))
            return handle.read().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return ""


def log_tail(run_dir: Path, max_bytes: int = 4000) -> str:
    """The last ``max_bytes`` of train.log, without terminal colour codes (trackio prints its dashboard's address
    in bold orange, hard-coded, whatever the output is), which a page would show as ``[1m[38;5;208m``."""
    return ANSI_ESCAPE.sub("", file_tail(run_dir / LOG_FILE, max_bytes))
