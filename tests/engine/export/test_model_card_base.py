"""The model card's ``base_model``: a hub id where there is one, never a local path (the hub takes only ids, and a
relative path means nothing where the export is read)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from engine.config import parse_config
from engine.export.exports import ExportPlan
from engine.export.model_card import model_card
from engine.runs.artifacts import FinishedRun, TrainedWeights
from engine.store.paths import PROJECT_ROOT
from engine.store.rundir import RunStatus


def _card(tmp_path: Path, name_or_path: str, kind: str = "adapter") -> tuple[dict, str]:
    """The card of an export of a run of ``name_or_path``: its front matter and its text."""
    run_dir = tmp_path / "runs" / "run"
    run_dir.mkdir(parents=True, exist_ok=True)
    config = parse_config({"name": "card", "model": {"name_or_path": name_or_path}})
    run = FinishedRun(run_dir, config, RunStatus(state="completed", step=4))
    weights = TrainedWeights(run_dir / "adapter", "adapter", is_adapter=True)
    card = model_card(ExportPlan(run, weights, kind, "float32", tmp_path / "exports" / "card", tmp_path))
    front = yaml.safe_load(card.split("---\n")[1])
    return front, card


def test_the_bundled_demo_model_is_named_as_a_local_model_not_by_its_path(tmp_path: Path):
    front, card = _card(tmp_path, "assets/demo-model")  # reads like org/name, and is a folder of the project
    assert "base_model" not in front and front["library_name"] == "peft"
    assert "Fine-tuned from the local model `demo-model` (not on the hub)" in card
    body = card.split("## Training config")[0]
    assert "assets/demo-model" not in body and str(PROJECT_ROOT) not in body


def test_a_folder_of_the_hubs_cache_is_named_by_its_repo(tmp_path: Path):
    snapshot = tmp_path / "hub" / "models--HuggingFaceTB--SmolLM2-135M" / "snapshots" / "0123abc"
    snapshot.mkdir(parents=True)
    front, card = _card(tmp_path, str(snapshot), kind="merged")
    assert front["base_model"] == "HuggingFaceTB/SmolLM2-135M" and front["library_name"] == "transformers"
    assert str(tmp_path) not in card.split("## Training config")[0]


def test_another_local_folder_gives_no_base_model_while_a_hub_id_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    folder = tmp_path / "models" / "my-llama"
    folder.mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    front, card = _card(tmp_path, "models/my-llama")  # a folder whose name reads like org/name
    assert "base_model" not in front
    assert "the local model `my-llama` (not on the hub)" in card and "models/my-llama`" not in card

    front, card = _card(tmp_path, "Qwen/Qwen2.5-0.5B-Instruct")  # no such folder here: the hub's
    assert front["base_model"] == "Qwen/Qwen2.5-0.5B-Instruct"
    assert "Fine-tuned from `Qwen/Qwen2.5-0.5B-Instruct`" in card
    assert "loads on top of `Qwen/Qwen2.5-0.5B-Instruct`" in card
