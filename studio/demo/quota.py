"""Demo mode's disk quota: what one visitor's uploads, run directories and export may hold together.

A stranger on a shared Space must not fill its disk: an upload or a Start that would take a visitor past
``DemoPolicy.visitor_quota_mb`` is refused with a message that says the limit and what they use, and how to
free space (delete a run on the Runs tab). The count walks the visitor's own folders only, a few files each. A visitor
keeps one export (a new one replaces it: studio.demo.jobs), so it counts too but never grows past one.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from studio.demo.ownership import owned_run_dirs
from studio.demo.policy import MB, DemoPolicy, visitor_exports, visitor_uploads
from studio.i18n.catalog import SOURCE, key, text

FILE_TOO_BIG, HOLDS_TOO_MUCH, UPLOAD_PAST_QUOTA, QUOTA_FULL, DISK_LOW = (
    key(f"demo.quota.{name}") for name in ("file_too_big", "holds_too_much", "upload_full", "full", "disk_low")
)


def tree_bytes(folder: Path | None) -> int:
    """Bytes of the regular files under ``folder`` (symlinks not followed; 0 when it does not exist)."""
    if folder is None or not Path(folder).is_dir():
        return 0
    total = 0
    for root, _dirs, files in os.walk(folder):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:  # removed while we counted (a checkpoint rotated away)
                continue
    return total


def visitor_usage(workspace: Path, policy: DemoPolicy, visitor: str | None) -> int:
    """Bytes the visitor's uploads, runs and export hold now (0 outside demo mode or without a visitor)."""
    if not policy.enabled or policy.visitor(visitor) is None:
        return 0
    runs = sum(tree_bytes(run_dir) for run_dir in owned_run_dirs(workspace, policy, visitor))
    kept = (visitor_uploads(workspace, policy, visitor), visitor_exports(workspace, policy, visitor))
    return runs + sum(tree_bytes(folder) for folder in kept)


def _mb(size: float) -> str:
    return f"{size / MB:.1f} MB"


def upload_refusal(
    workspace: Path, policy: DemoPolicy, visitor: str | None, size: int, lang: str = SOURCE, stored: int | None = None
) -> str | None:
    """Why an upload of ``size`` bytes is refused (bigger than one file may be, or past the visitor's quota), in
    ``lang``; None when it fits or outside demo mode. ``size`` is what the file holds once read (a compressed
    Parquet file holds more than its ``stored`` bytes on disk: engine.api.decoded_bytes)."""
    if not policy.enabled:
        return None
    limit = _mb(policy.upload_limit_mb * MB)
    if size > policy.upload_limit_mb * MB:
        if stored is not None and stored < size:
            return text(HOLDS_TOO_MUCH, lang, size=_mb(size), stored=_mb(stored), limit=limit)
        return text(FILE_TOO_BIG, lang, size=_mb(size), limit=limit)
    used = visitor_usage(workspace, policy, visitor)
    if used + size > policy.visitor_quota_mb * MB:
        quota = _mb(policy.visitor_quota_mb * MB)
        return text(UPLOAD_PAST_QUOTA, lang, size=_mb(size), quota=quota, used=_mb(used))
    return disk_refusal(workspace, policy, lang, size)


def start_refusal(workspace: Path, policy: DemoPolicy, visitor: str | None, lang: str = SOURCE) -> str | None:
    """Why a Start, Resume or Export is refused for the disk it would fill (the visitor's quota, or the disk's free
    space), in ``lang``; None when the visitor is under quota and the disk has room."""
    if not policy.enabled:
        return None
    used = visitor_usage(workspace, policy, visitor)
    if used >= policy.visitor_quota_mb * MB:
        return text(QUOTA_FULL, lang, used=_mb(used), quota=_mb(policy.visitor_quota_mb * MB))
    return disk_refusal(workspace, policy, lang)


def disk_refusal(workspace: Path, policy: DemoPolicy, lang: str = SOURCE, size: int = 0) -> str | None:
    """Why nothing more may be written now, in ``lang``: ``size`` more bytes would leave the workspace's disk less
    free space than ``DemoPolicy.min_free_disk_mb``, which the runs and jobs going on keep for their checkpoints.
    Every visitor's quota together can pass what a disk holds: this is the bound that keeps a full disk from
    failing the runs already going. None when there is room (and outside demo mode)."""
    if not policy.enabled:
        return None
    folder = Path(workspace)
    while not folder.exists() and folder != folder.parent:  # a workspace not made yet: the disk it will be on
        folder = folder.parent
    free = shutil.disk_usage(folder).free - size
    if free >= policy.min_free_disk_mb * MB:
        return None
    return text(DISK_LOW, lang, free=_mb(max(free + size, 0)), floor=_mb(policy.min_free_disk_mb * MB))
