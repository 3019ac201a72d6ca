"""Runs that start from another run's weights (model.init_from): SFT, then DPO on the SFT adapter.

Real runs of the demo model through the CLI and engine.runs; the checks before launch through
``python -m engine check`` as a user types it (its default --workspace is ./workspace).
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from engine import runs
from engine.config import ConfigError, parse_config
from engine.runs.lineage import FIELD, checked_source, init_from_problems, pinned, source_label
from engine.store.paths import PROJECT_ROOT
from engine.store.rundir import iter_metrics
from tests.helpers.engine_cli import run_check
from tests.helpers.run_progress import stop_then_resume

pytestmark = pytest.mark.integration

DEMO_MODEL = str(PROJECT_ROOT / "assets" / "demo-model")
SFT_DATA = str(PROJECT_ROOT / "assets" / "datasets" / "demo_sft_train.jsonl")
PREFERENCE_DATA = str(PROJECT_ROOT / "assets" / "datasets" / "demo_preference.jsonl")
ADAPTER = {"r": 8, "alpha": 16, "dropout": 0.0, "target_modules": "all-linear"}
# So small that one step leaves the starting weights as they were (Adam moves each weight by about this much).
TINY_LR = 1e-9


def sft_config(name: str = "sft", **sections: dict[str, Any]) -> dict[str, Any]:
    """The demo task in a few quick steps, with a checkpoint every 3."""
    data: dict[str, Any] = {
        "name": name,
        "model": {"name_or_path": DEMO_MODEL},
        "data": {"path": SFT_DATA, "max_samples": 64},
        "adapter": dict(ADAPTER),
        "train": {"max_steps": 6, "per_device_batch_size": 4, "learning_rate": 3e-3, "max_length": 64, "save_steps": 3},
    }
    for section, values in sections.items():
        data.setdefault(section, {}).update(values)
    return data


def dpo_config(init_from: str, name: str = "dpo", **sections: dict[str, Any]) -> dict[str, Any]:
    """DPO on the demo preference pairs, starting from ``init_from``."""
    data = sft_config(name, **sections)
    data["method"] = "dpo"
    data["model"]["init_from"] = init_from
    data["data"] = {"path": PREFERENCE_DATA, "max_samples": 32}
    return data


def write_config(folder: Path, name: str, data: dict[str, Any]) -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(parse_config(data).to_yaml())
    return path


def cli_train(config: Path, workspace: Path) -> tuple[Path, str]:
    """``python -m engine train CONFIG --workspace DIR`` from the config's folder; the run directory and output."""
    result = subprocess.run(
        [sys.executable, "-m", "engine", "train", str(config), "--workspace", str(workspace)],
        cwd=config.parent,
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, PYTHONPATH=str(PROJECT_ROOT), HF_HUB_OFFLINE="1"),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    line = next(line for line in result.stdout.splitlines() if line.startswith("run directory: "))
    return Path(line.removeprefix("run directory: ")), result.stdout


def train_losses(run_dir: Path) -> dict[int, float]:
    return {event["step"]: event["loss"] for event in iter_metrics(run_dir) if event["event"] == "train"}


def tensors(directory: Path) -> dict[str, Any]:
    from safetensors.torch import load_file

    return load_file(directory / "adapter_model.safetensors")


def run_to_end(config: dict[str, Any], workspace: Path) -> Path:
    """Create and start a run the way the studio does (the worker runs in the run directory), and wait for it."""
    run_dir = runs.create_run(parse_config(config), workspace=workspace)
    runs.start(run_dir)
    finished = runs.wait(run_dir, timeout=240)
    assert finished.state == "completed", finished
    return run_dir


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with ``workspace/`` in it: the CLI's default --workspace when run from here."""
    return tmp_path_factory.mktemp("lineage")


@pytest.fixture(scope="module")
def workspace(root: Path) -> Path:
    return root / "workspace"


@pytest.fixture(scope="module")
def sft_run(root: Path, workspace: Path) -> Path:
    """A finished SFT run (checkpoints 3 and 6, and the final adapter), through the CLI."""
    run_dir, _ = cli_train(write_config(root, "sft", sft_config()), workspace)
    return run_dir


@pytest.fixture(scope="module")
def full_run(workspace: Path, sft_run: Path) -> Path:
    """A full fine-tune started from the SFT adapter (merged into the base), one step at a tiny learning rate."""
    config = sft_config("full", adapter={"method": "full"}, train={"max_steps": 1, "learning_rate": TINY_LR})
    config["model"]["init_from"] = sft_run.name
    return run_to_end(config, workspace)


# --- starting from the weights -----------------------------------------------------------------------------


def test_dpo_run_starts_from_the_sft_adapter_and_takes_it_as_reference(root: Path, workspace: Path, sft_run: Path):
    import torch

    config = dpo_config(sft_run.name, train={"max_steps": 1, "learning_rate": TINY_LR})
    run_dir, output = cli_train(write_config(root, "dpo", config), workspace)
    assert f"starts from: sft's adapter ({sft_run / 'adapter'})" in output  # the check's line before the run
    assert runs.status(run_dir).state == "completed"
    # The run records where it started, as the absolute directory (the worker runs in another directory).
    assert yaml.safe_load((run_dir / "config.yaml").read_text())["model"]["init_from"] == str(sft_run)
    sft, dpo = tensors(sft_run / "adapter"), tensors(run_dir / "adapter")
    assert sft.keys() == dpo.keys() and len(sft) > 10
    # A fresh adapter starts with lora_B at zero: the SFT adapter is far from that, the DPO run's is the SFT one.
    assert max(float(sft[key].abs().max()) for key in sft if "lora_B" in key) > 1e-3
    assert all(torch.allclose(sft[key], dpo[key], atol=1e-6) for key in sft)
    # DPO's reference is a frozen copy of the adapter it was given: exactly the SFT adapter, so at the first step
    # policy and reference agree and the sigmoid loss is ln 2.
    reference = tensors(run_dir / "adapter" / "ref")
    assert all(torch.equal(sft[key], reference[key]) for key in sft)
    assert train_losses(run_dir)[1] == pytest.approx(math.log(2), abs=1e-4)


def test_full_run_merges_the_sft_adapter_into_its_base(sft_run: Path, full_run: Path):
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    tuned = AutoModelForCausalLM.from_pretrained(full_run / "model").state_dict()
    base = AutoModelForCausalLM.from_pretrained(DEMO_MODEL)
    untouched = {name: value.clone() for name, value in base.state_dict().items()}
    merged = PeftModel.from_pretrained(base, sft_run / "adapter").merge_and_unload().state_dict()
    assert tuned.keys() == merged.keys()
    assert all(torch.allclose(tuned[name], merged[name], atol=1e-6) for name in merged)
    moved = [name for name in merged if not torch.allclose(merged[name], untouched[name], atol=1e-4)]
    assert len(moved) > 5  # the merge changed the base: the run did not start from the plain base
    assert runs.status(full_run).trainable_params == runs.status(full_run).total_params


def test_qlora_run_continues_the_adapter_on_a_4bit_base(workspace: Path, sft_run: Path):
    import torch

    config = sft_config("qlora", quantization={"mode": "4bit"}, train={"max_steps": 1, "learning_rate": TINY_LR})
    config["model"]["init_from"] = sft_run.name
    run_dir = run_to_end(config, workspace)
    sft, qlora = tensors(sft_run / "adapter"), tensors(run_dir / "adapter")
    assert sft.keys() == qlora.keys()
    # TRL keeps a QLoRA adapter in bfloat16: the SFT weights, rounded to it (a fresh adapter has lora_B at zero).
    assert {qlora[key].dtype for key in qlora} == {torch.bfloat16}
    assert all(torch.allclose(sft[key].to(torch.bfloat16).float(), qlora[key].float(), atol=1e-6) for key in sft)
    assert "its LoRA adapter trains further" in (run_dir / "train.log").read_text()


def test_stopped_dpo_run_resumes_from_its_checkpoint_not_from_the_sft_adapter(workspace: Path, sft_run: Path):
    """A resume loads the source again (DPO's reference), then the Trainer restores the run's own adapter: the
    losses match a run that was never stopped."""
    config = dpo_config(sft_run.name, train={"max_steps": 8, "save_steps": 2, "learning_rate": 5e-3})
    reference = run_to_end(config, workspace)
    run_dir = runs.create_run(parse_config({**config, "name": "dpo-stopped"}), workspace=workspace)
    stop_then_resume(run_dir, 8)
    expected, resumed = train_losses(reference), train_losses(run_dir)
    assert sorted(resumed) == list(range(1, 9))
    assert resumed == pytest.approx(expected, rel=1e-4, abs=1e-6)
    assert abs(expected[8] - math.log(2)) > 1e-3  # it trained: a resume from the SFT adapter alone would differ


# --- the checks before launch --------------------------------------------------------------------------------


def check_refuses(root: Path, name: str, config: dict[str, Any], *expected: str) -> str:
    """``python -m engine check`` from ``root`` (workspace: ./workspace) exits 2 with each ``expected`` text."""
    result = run_check(write_config(root, name, config), cwd=root)
    assert result.returncode == 2, result.stdout + result.stderr
    for text in expected:
        assert text in result.stderr, result.stderr
    return result.stderr


def test_check_refuses_a_run_that_does_not_exist(root: Path, workspace: Path, sft_run: Path):
    check_refuses(
        root,
        "missing",
        dpo_config("no-such-run"),
        f"{FIELD}: no run 'no-such-run' in {Path('workspace') / 'runs'}",
        "give a run id of the workspace, a run directory, or a checkpoint of a run",
    )


def test_check_refuses_a_run_without_weights(root: Path, workspace: Path, sft_run: Path):
    never_started = runs.create_run(parse_config(sft_config("never")), workspace=workspace)
    check_refuses(
        root,
        "no-weights",
        dpo_config(never_started.name),
        f"{FIELD}: never has no final adapter (it is queued)",
        "Start from a run that has completed, or from one of its checkpoints",
    )


def test_check_refuses_another_base(root: Path, sft_run: Path):
    other = root / "other-model"
    shutil.copytree(DEMO_MODEL, other, dirs_exist_ok=True)
    config = dpo_config(sft_run.name, model={"name_or_path": str(other)})
    check_refuses(
        root,
        "other-base",
        config,
        f"{FIELD}: sft was trained on {DEMO_MODEL}, not on this run's base {other}",
        f"set model.name_or_path to {DEMO_MODEL}",
    )


def test_check_refuses_a_checkpoint_the_run_does_not_have(root: Path, sft_run: Path):
    check_refuses(
        root,
        "bad-checkpoint",
        dpo_config(str(sft_run / "checkpoints" / "checkpoint-99")),
        f"{FIELD}: sft has no checkpoint 99 (checkpoints: 3, 6)",
    )


# --- the rules, in process -------------------------------------------------------------------------------------


def problems(config: dict[str, Any], workspace: Path) -> dict[str, str]:
    return {problem.field: problem.message for problem in init_from_problems(parse_config(config), workspace)}


def test_a_checkpoint_is_found_by_path_or_under_the_run_id(workspace: Path, sft_run: Path):
    for value in (str(sft_run / "checkpoints" / "checkpoint-3"), f"{sft_run.name}/checkpoints/checkpoint-3"):
        source = checked_source(parse_config(dpo_config(value)), workspace)
        assert source.weights.label == "checkpoint-3" and source.weights.path == sft_run / "checkpoints/checkpoint-3"
        assert pinned(parse_config(dpo_config(value)), workspace).model.init_from == str(source.weights.path)
    assert source_label(str(sft_run / "checkpoints" / "checkpoint-3")) == "sft, checkpoint 3"
    assert source_label(sft_run.name, workspace) == "sft"


def test_a_run_id_never_leads_out_of_the_runs_folder(workspace: Path, sft_run: Path):
    outside = workspace.parent / "escape"
    shutil.copytree(sft_run, outside, dirs_exist_ok=True)  # a real run, but beside the runs folder
    assert "no run '../../escape'" in problems(dpo_config("../../escape"), workspace)[FIELD]


def test_a_continued_adapter_keeps_its_settings(workspace: Path, sft_run: Path):
    found = problems(dpo_config(sft_run.name, adapter={"r": 16, "target_modules": "q_proj, v_proj"}), workspace)
    assert set(found) == {"adapter.r", "adapter.target_modules"}
    assert "sft's adapter has r 8" in found["adapter.r"] and "set 8" in found["adapter.r"]
    assert "set all-linear" in found["adapter.target_modules"]
    assert problems(dpo_config(sft_run.name), workspace) == {}


def test_a_full_model_is_not_a_source_for_an_adapter(workspace: Path, full_run: Path):
    found = problems(dpo_config(full_run.name), workspace)
    assert list(found) == [FIELD]
    assert "full's result is a whole model (full)" in found[FIELD]
    assert f"set model.name_or_path to {full_run / 'model'} and clear model.init_from" in found[FIELD]
    assert problems(dpo_config(full_run.name, adapter={"method": "full"}), workspace) == {}


def test_a_merged_adapter_needs_precomputed_reference_log_probs(workspace: Path, sft_run: Path):
    full = dpo_config(sft_run.name, adapter={"method": "full"})
    found = problems(full, workspace)
    assert list(found) == ["dpo.precompute_ref_log_probs"]
    assert "would compare with the plain base, not with sft" in found["dpo.precompute_ref_log_probs"]
    assert problems({**full, "dpo": {"precompute_ref_log_probs": True}}, workspace) == {}


def test_blank_init_from_means_the_base_model():
    assert parse_config({"model": {"init_from": "  "}}).model.init_from is None
    with pytest.raises(ConfigError):
        checked_source(parse_config({"model": {"init_from": "nowhere"}}), None)
