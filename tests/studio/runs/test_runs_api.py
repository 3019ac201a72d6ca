"""The HTTP API's functions (studio.runs.api) called directly: their names, and the RunError a bad id raises."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine import runs
from engine.config import parse_config
from engine.store.workspace import runs_dir
from studio.runs.api import endpoints


def test_the_endpoints_keep_their_names_and_refuse_ids_that_are_not_runs(tmp_path: Path) -> None:
    functions = {fn.__name__: fn for fn in endpoints(tmp_path)}
    actions = ["stop_run", "resume_run", "save_run", "pause_run", "continue_run"]
    assert list(functions) == ["list_runs", "run_status", "run_metrics", *actions]
    assert functions["list_runs"]() == []
    run_dir = runs.create_run(parse_config({"name": "one"}), run_dir=runs_dir(tmp_path) / "one")
    assert [row["Run id"] for row in functions["list_runs"]()] == ["one"]
    assert functions["run_metrics"]("one") == {"events": [], "offset": 0} and run_dir.is_dir()
    for name in ("run_status", "run_metrics", *actions):
        for bad in ("../../etc", "one\x00", "one\n"):  # a path, a NUL byte, a control character: a message
            with pytest.raises(runs.RunError, match="is not a run id"):
                functions[name](bad)
        with pytest.raises(runs.RunError, match="no run 'two'"):
            functions[name]("two")
    for name in ("save_run", "pause_run", "continue_run"):  # a queued run has no worker to ask
        assert functions[name]("one") is False
