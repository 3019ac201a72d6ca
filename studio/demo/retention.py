"""Demo mode's retention: what strangers leave on a public demo goes once they have left it alone for a while.

A visitor's quota bounds what they hold at once and the per-address budgets what one address sends in an hour, but
a Space that runs for months would still fill its disk with the runs of visitors who never come back. So a visitor
whose runs, uploads and export have all stood unchanged for ``DemoPolicy.keep_days`` loses them together: a
visitor's data is never cut in part (a run keeps the upload it names, and Resume its checkpoints). A visitor with a
run not ended (queued, running, paused) keeps everything; a run no visitor owns (the host's own) is never touched.
The sweep runs when the studio starts and every hour after, in a daemon thread.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from engine.api import OPEN_STATES, VISITORS_DIR, jobs, runs, visitor_exports_dir
from studio.demo.policy import DemoPolicy

log = logging.getLogger(__name__)
SWEEP_SECONDS = 3600.0
DAY_SECONDS = 86400.0


@dataclass
class VisitorData:
    """What one visitor (by owner tag) holds in the workspace."""

    runs: list[Path] = field(default_factory=list)
    folders: list[Path] = field(default_factory=list)  # their uploads' folder and their export's folder
    open_run: bool = False  # a run queued or at work
    last_touched: float = 0.0  # the newest modification time of any of their files


def newest_mtime(folder: Path) -> float:
    """The newest modification time of the files under ``folder`` (and of the folder itself); 0 when it is gone."""
    newest = 0.0
    for root, _dirs, files in os.walk(folder):
        for name in [*files, "."]:
            try:
                newest = max(newest, os.lstat(os.path.join(root, name)).st_mtime)
            except OSError:  # removed meanwhile
                continue
    return newest


def visitors_data(workspace: Path) -> dict[str, VisitorData]:
    """Every visitor's runs and folders in ``workspace``, by owner tag (runs without an owner are left out)."""
    found: dict[str, VisitorData] = defaultdict(VisitorData)
    for run_dir in runs.run_dirs(workspace):
        status = runs.status(run_dir)
        if not status.owner:
            continue
        data = found[status.owner]
        data.runs.append(run_dir)
        data.open_run = data.open_run or status.state in OPEN_STATES
    for root in (Path(workspace) / VISITORS_DIR, visitor_exports_dir(Path(workspace), "")):  # "": their parent
        for folder in root.iterdir() if root.is_dir() else ():
            found[folder.name].folders.append(folder)
    for data in found.values():
        data.last_touched = max((newest_mtime(path) for path in [*data.runs, *data.folders]), default=0.0)
    return dict(found)


def sweep(workspace: Path, policy: DemoPolicy, now: float | None = None) -> list[str]:
    """Delete the runs, uploads, export and jobs of every visitor unchanged for ``policy.keep_days``; returns the
    owner tags of those whose data went. Nothing outside demo mode."""
    if not policy.enabled:
        return []
    cutoff = (time.time() if now is None else now) - policy.keep_days * DAY_SECONDS
    gone = []
    for owner, data in visitors_data(workspace).items():
        if data.open_run or data.last_touched > cutoff:
            continue
        try:
            for run_dir in data.runs:
                forget_jobs(workspace, run_dir.name)
                runs.delete(run_dir)  # refuses a run that started meanwhile: the visitor's data then stays
        except runs.RunError as exc:
            log.info("retention: kept a visitor's data: %s", exc)
            continue
        for folder in data.folders:
            shutil.rmtree(folder, ignore_errors=True)
        gone.append(owner)
    return gone


def forget_jobs(workspace: Path, run_id: str) -> None:
    """Remove the ended jobs (evaluations, benchmarks, exports) of a run: their logs are all they hold."""
    for job_dir in jobs.list_jobs(workspace, run_id=run_id):
        if not jobs.status(job_dir).is_running:
            shutil.rmtree(job_dir, ignore_errors=True)


class RetentionSweeper:
    """A daemon thread that sweeps (``sweep``) at once and then every ``interval`` seconds."""

    def __init__(self, workspace: Path, policy: DemoPolicy, interval: float = SWEEP_SECONDS):
        self.workspace, self.policy, self.interval = Path(workspace), policy, interval
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True, name="demo-retention")

    def _loop(self) -> None:
        while True:
            try:
                gone = sweep(self.workspace, self.policy)
                if gone:
                    days = self.policy.keep_days
                    log.info("retention: removed the data of %d visitor(s) unchanged for %s days", len(gone), days)
            except Exception:  # noqa: BLE001 - one unreadable folder must not end the sweeps for good
                log.exception("retention: a sweep failed")
            if self.stopped.wait(self.interval):
                return


_sweepers: dict[Path, RetentionSweeper] = {}
_sweepers_lock = threading.Lock()


def ensure_retention(workspace: Path, policy: DemoPolicy) -> RetentionSweeper | None:
    """The workspace's sweeper in demo mode, started on first use (one per workspace per studio process); None
    outside demo mode."""
    if not policy.enabled:
        return None
    key = Path(workspace).resolve()
    with _sweepers_lock:
        if key not in _sweepers:
            _sweepers[key] = RetentionSweeper(key, policy)
            _sweepers[key].thread.start()
        return _sweepers[key]
