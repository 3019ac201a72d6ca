"""The bad-input corpus through the Train tab's handlers: the dataset panel's check and Start.

Each broken file shows a message naming the row or the field (never a traceback), and Start starts nothing
and writes nothing."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import pytest

from engine.config import RunConfig
from studio.demo.caller import Caller
from studio.form.values import default_values
from studio.train import dataset as dp
from studio.train import starting
from tests.data.bad_inputs.corpus import CASES, MAX_LENGTH, Case, build_corpus
from tests.helpers.side_effects import repo_new_files, tree


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workspace whose datasets/ folder holds the corpus (where uploads land)."""
    root = tmp_path_factory.mktemp("workspace")
    build_corpus(root / "datasets")
    return root


def form_values(case: Case, workspace: Path) -> dict[str, Any]:
    """The form pointed at the case's file, as the dataset panel would send it."""
    values = default_values()
    values.update({"train.max_length": MAX_LENGTH, "data.eval_path": "", "data.eval_size": 0})
    values["data.eval_path" if case.as_eval else "data.path"] = str(workspace / "datasets" / case.file)
    for key, value in case.data.items():
        if isinstance(value, dict):
            values.update({f"data.{key}.{name}": item for name, item in value.items()})
        else:
            values[f"data.{key}"] = value
    return values


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_dataset_panel_shows_the_problem(case: Case, workspace: Path) -> None:
    before = tree(workspace)
    result = dp.check_dataset(form_values(case, workspace), with_tokens=True, workspace=workspace)
    shown = html.unescape(result.summary + result.error)
    assert "Traceback" not in shown
    if case.expect:
        assert result.summary == "" and result.error.startswith("✗ **The dataset cannot be used**")
        assert all(fragment in shown for fragment in case.expect), shown
    else:
        assert result.error == "" and result.summary.startswith("✓ **Format**")
        assert case.warning in shown
    assert tree(workspace) == before


@pytest.fixture(scope="module")
def tokenizer_loaded() -> None:
    """Start counts tokens with the tokenizer the dataset panel loaded (as on the page, where a check runs first)."""
    dp.get_tokenizer(RunConfig())


@pytest.mark.parametrize("case", [case for case in CASES if case.expect], ids=lambda case: case.id)
def test_start_refuses_a_bad_dataset_and_starts_nothing(case: Case, workspace: Path, tokenizer_loaded: None) -> None:
    before, repo_before = tree(workspace), repo_new_files()
    calls: list[Path] = []
    result = starting.start_run(Caller(workspace), form_values(case, workspace), calls.append)
    assert result.run_dir is None and calls == []
    assert result.message == "✗ Not started: the dataset cannot be used (see the dataset panel)."
    assert all(fragment in result.data_error for fragment in case.expect), result.data_error
    assert "Traceback" not in result.data_error
    assert tree(workspace) == before and repo_new_files() <= repo_before
