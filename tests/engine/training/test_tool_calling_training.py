"""Tool-calling SFT trains for real: ``python -m engine train`` on LLaMA-Factory's glaive tool-calling file with the
bundled demo model, whose chat template renders the tools and the calls."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from engine import runs
from engine.config import parse_config
from engine.store.paths import PROJECT_ROOT
from engine.store.rundir import iter_metrics
from tests.helpers.engine_cli import run_train

pytestmark = pytest.mark.integration

GLAIVE = PROJECT_ROOT.parent / "shared" / "datasets" / "glaive_toolcall_en_demo.json"


@pytest.mark.skipif(not GLAIVE.is_file(), reason="shared datasets not present")
def test_the_glaive_file_trains_with_sft(tmp_path: Path) -> None:
    # Rows with a tools schema run to several hundred tokens with this byte-level tokenizer: at max_length 256
    # most of them would lose every loss token and be dropped, so 512 keeps the tool calls in training.
    config = parse_config(
        {
            "name": "tool-calling",
            "method": "sft",
            "model": {"name_or_path": str(PROJECT_ROOT / "assets" / "demo-model")},
            "data": {"path": str(GLAIVE), "max_samples": 16},
            "train": {"max_steps": 3, "per_device_batch_size": 2, "max_length": 512, "logging_steps": 1},
        }
    )
    config_path, run_dir = tmp_path / "config.yaml", tmp_path / "run"
    config_path.write_text(config.to_yaml())
    result = run_train(config_path, run_dir, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    status = runs.status(run_dir)
    assert (status.state, status.step) == ("completed", 3)
    events = [event for event in iter_metrics(run_dir) if event["event"] == "train"]
    assert [event["step"] for event in events] == [1, 2, 3]
    assert all(math.isfinite(event["loss"]) and event["loss"] > 0 for event in events)
    assert (run_dir / "adapter").is_dir()
