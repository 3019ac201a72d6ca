"""Which runs and weights the Evaluate and Export tabs offer (studio.jobs.view), on run directories made here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine import runs
from engine.config import parse_config
from engine.store.rundir import update_status
from engine.store.workspace import runs_dir
from studio.jobs.view import finished_runs, weight_choices


def make_run(workspace: Path, name: str, created: float, **config: Any) -> Path:
    run_dir = runs.create_run(parse_config({"name": name, **config}), run_dir=runs_dir(workspace) / name)
    update_status(run_dir, state="completed", created_at=created)
    return run_dir


def test_the_final_result_is_where_the_runs_method_puts_it(tmp_path: Path) -> None:
    lora = make_run(tmp_path, "lora", 1.0)
    (lora / "model").mkdir()  # weights where a LoRA run never writes its result
    (lora / "model" / "model.safetensors").write_bytes(b"weights")
    full = make_run(tmp_path, "full", 2.0, adapter={"method": "full"})
    (full / "model").mkdir()
    (full / "model" / "pytorch_model.bin").write_bytes(b"weights")  # the older format counts too
    assert finished_runs(tmp_path) == [("full · full", "full")]
    assert weight_choices(tmp_path, "full") == [("final result", "")]
    assert weight_choices(tmp_path, "lora") == []
