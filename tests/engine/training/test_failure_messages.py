"""A crashed run's status says why in plain words: a full disk is named as one, also when a library hid the
OSError (torch.save's zip writer keeps only its own words)."""

from __future__ import annotations

import errno
from pathlib import Path

from engine.store.disk import disk_full_errno
from engine.training.recipe import _failure_message

TORCH_SHORT_WRITE = RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 4800 vs 4726")
TORCH_WRITE_FAILED = RuntimeError(
    "[enforce fail at inline_container.cc:858] . PytorchStreamWriter failed writing file data/3: file write failed"
)


def test_torch_saves_short_write_while_saving_is_a_full_disk(tmp_path: Path) -> None:
    for failure in (TORCH_SHORT_WRITE, TORCH_WRITE_FAILED):
        assert disk_full_errno(failure, tmp_path, saving=True) == errno.ENOSPC
        message = _failure_message(failure, tmp_path, "checkpoint 6")
        assert message.startswith("the disk is full: no space left on device (ENOSPC) while saving checkpoint 6")
        assert message.endswith("Free some space, then start the run again.")


def test_other_failures_keep_their_own_words(tmp_path: Path) -> None:
    assert disk_full_errno(TORCH_SHORT_WRITE, tmp_path, saving=False) is None  # not a save: not guessed
    failure = RuntimeError("mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)")
    assert disk_full_errno(failure, tmp_path, saving=True) is None
    assert _failure_message(failure, tmp_path, "checkpoint 6") == f"RuntimeError: {failure}"
    wrapped = RuntimeError("saving failed")
    wrapped.__cause__ = OSError(errno.EDQUOT, "Disk quota exceeded")
    assert disk_full_errno(wrapped, tmp_path, saving=False) == errno.EDQUOT
