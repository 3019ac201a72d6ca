"""A workspace holding the small study (tests/studio/sweeps/small_study.py), made once and copied for each test:
making a study costs about a second on a busy machine, copying its files milliseconds."""

from __future__ import annotations

import shutil
from pathlib import Path

import optuna
import pytest

from tests.studio.sweeps.small_study import make_study

optuna.logging.set_verbosity(optuna.logging.WARNING)


@pytest.fixture(scope="session")
def study_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("small-study")
    make_study(path)
    return path


@pytest.fixture
def workspace(study_template: Path, tmp_path: Path) -> Path:
    """A workspace of its own with the sweep "small" (runs for trials 0 and 4)."""
    copy = tmp_path / "ws"
    shutil.copytree(study_template, copy)
    return copy
