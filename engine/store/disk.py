"""A full disk, told apart from other failures: the words a run or a job says it in, and how it is recognised.

Standard library only: the trainer (engine.training.recipe), the supervisor and the background jobs
(engine.runs.jobs) all say "the disk is full" the same way.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
from pathlib import Path

from engine.store.rundir.files import DISK_FULL_ERRNOS

DISK_FULL_WORDS = {
    errno.ENOSPC: "no space left on device (ENOSPC)",
    errno.EDQUOT: "the disk quota is used up (EDQUOT)",
    errno.EFBIG: "a file grew past the file size limit (EFBIG, file too large)",
}
NEARLY_FULL_BYTES = 1 << 20
# What torch.save's zip writer says when a write came up short (it never keeps the OSError): during a save, a full
# disk (or the file size limit), though the disk may show free space again once the partial file is gone.
SHORT_WRITE_WORDS = ("unexpected pos", "file write failed")


def disk_full_errno(exc: BaseException, folder: Path, saving: bool) -> int | None:
    """ENOSPC, EDQUOT or EFBIG when ``exc`` comes from a full disk, else None.

    Libraries wrap the OSError: safetensors says "No space left on device (os error 28)", and torch.save only
    "unexpected pos ..."; so the chain and the text are searched, and for a failed save the disk is measured.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in DISK_FULL_ERRNOS:
            return current.errno
        text = str(current)
        for code in DISK_FULL_ERRNOS:
            if os.strerror(code) in text or f"os error {code})" in text:
                return code
        current = current.__cause__ or current.__context__
    if saving:
        with contextlib.suppress(OSError):
            if shutil.disk_usage(folder).free < NEARLY_FULL_BYTES:
                return errno.ENOSPC
        import resource

        if resource.getrlimit(resource.RLIMIT_FSIZE)[0] != resource.RLIM_INFINITY:
            return errno.EFBIG
        if "inline_container" in str(exc) and any(words in str(exc) for words in SHORT_WRITE_WORDS):
            return errno.ENOSPC
    return None


def disk_full_words(exc: BaseException, folder: Path, saving: bool) -> str | None:
    """ "no space left on device (ENOSPC)" (or the quota's, the file size limit's) when ``exc`` comes from a full
    disk (disk_full_errno), else None."""
    code = disk_full_errno(exc, folder, saving)
    return None if code is None else DISK_FULL_WORDS[code]
