"""GRPO trains for real: TRL's GRPOTrainer on the demo model and the demo date task, with a built-in and a custom
reward, through ``python -m engine train`` / ``check`` and through engine.runs (stop, resume, a reward that fails)."""

from __future__ import annotations

import json
import math
import textwrap
from pathlib import Path
from typing import Any

import pytest

from engine import runs
from engine.config import RunConfig, parse_config
from engine.store.completions import latest_completions
from engine.store.paths import PROJECT_ROOT
from engine.store.rundir import iter_metrics
from engine.training.methods import METHODS
from tests.helpers.engine_cli import run_check, run_train
from tests.helpers.run_progress import stop_then_resume

pytestmark = pytest.mark.integration
DEMO_SFT = PROJECT_ROOT / "assets" / "datasets" / "demo_sft_train.jsonl"

# Rewarded when the answer is short: on the untrained demo model some of a group's answers are and some are not,
# so the group's advantages are not all zero and the policy moves from the first step.
SHORT_ANSWER = """
def short_answer(prompts, completions, **kwargs):
    return [1.0 if len(completion[0]["content"]) < 12 else 0.0 for completion in completions]
"""
FAILS_AT_STEP_3 = """
def picky(prompts, completions, trainer_state, **kwargs):
    if trainer_state.global_step >= 2:
        raise ValueError("cannot judge this one")
    return [0.0 for _ in completions]
"""


def grpo_config(reward_file: Path, function: str = "short_answer", **train: Any) -> RunConfig:
    """GRPO on the demo date task: 4 answers of at most 16 tokens per prompt, a checkpoint every 2 steps."""
    return parse_config(
        {
            "name": "grpo",
            "method": "grpo",
            "data": {"path": str(DEMO_SFT), "max_samples": 32},
            "adapter": {"r": 8, "dropout": 0.0},
            "train": {
                "max_steps": 6,
                "per_device_batch_size": 4,
                "learning_rate": 3e-3,
                "max_length": 128,
                "save_steps": 2,
                "logging_steps": 1,
                **train,
            },
            "grpo": {
                "num_generations": 4,
                "max_completion_length": 16,
                "beta": 0.04,  # a reference (the base, adapter off) and its KL chart
                "rewards": [
                    {"kind": "length", "target_tokens": 6},
                    {"kind": "custom", "file": str(reward_file), "function": function, "weight": 2.0},
                ],
            },
            "launch": {"threads_per_process": 1},  # repeatable bit for bit whatever the machine's load
        }
    )


def reward_file(folder: Path, source: str = SHORT_ANSWER) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "rewards.py"
    path.write_text(textwrap.dedent(source))
    return path


def train_events(run_dir: Path) -> list[dict[str, Any]]:
    events = [event for event in iter_metrics(run_dir) if event["event"] == "train"]
    steps = [event["step"] for event in events]
    assert len(steps) == len(set(steps)), f"duplicated steps: {steps}"
    return events


def trained(config: RunConfig, root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.yaml").write_text(config.to_yaml())
    result = run_train(root / "config.yaml", root / "run")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return root / "run"


def test_grpo_trains_with_a_built_in_and_a_custom_reward(tmp_path: Path):
    run_dir = trained(grpo_config(reward_file(tmp_path)), tmp_path)
    assert runs.status(run_dir).state == "completed"
    events = train_events(run_dir)
    assert [event["step"] for event in events] == [1, 2, 3, 4, 5, 6]
    for chart in METHODS["grpo"].charts:  # every chart the Monitor offers for grpo gets finite points
        assert all(math.isfinite(event[chart.key]) for event in events), chart.key
    for event in events:  # the total is the weighted sum of each function's mean
        total = event["rewards/length/mean"] + 2.0 * event["rewards/short_answer/mean"]
        assert event["reward"] == pytest.approx(total, abs=1e-5)
        assert 0 < event["completions/mean_length"] <= 16
    assert any(event["grad_norm"] > 0 for event in events)  # the groups' rewards differed: the policy moved
    assert (run_dir / "adapter" / "adapter_model.safetensors").is_file()
    samples = latest_completions(run_dir)
    assert {sample["step"] for sample in samples} == {1, 2, 3, 4, 5, 6}  # a generation per step here
    prompts = {row["messages"][0]["content"] for row in map(json.loads, DEMO_SFT.read_text().splitlines())}
    for sample in samples:
        assert sample["prompt"] in prompts and isinstance(sample["completion"], str)
        scores = sample["rewards"]
        assert set(scores) == {"length", "short_answer"}
        assert sample["reward"] == pytest.approx(scores["length"] + 2.0 * scores["short_answer"], abs=1e-5)
        assert scores["short_answer"] == (1.0 if len(sample["completion"].strip()) < 12 else 0.0)


def test_check_names_a_reward_that_cannot_run(tmp_path: Path):
    bad = reward_file(tmp_path, "def short_answer(completions):\n    return [1.0]\n")  # no **kwargs
    config = tmp_path / "config.yaml"
    config.write_text(grpo_config(bad).to_yaml())
    result = run_check(config, tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "grpo.rewards.1" in result.stderr and "short_answer" in result.stderr
    missing = grpo_config(bad, function="nowhere")
    config.write_text(missing.to_yaml())
    result = run_check(config, tmp_path)
    assert result.returncode == 2 and "grpo.rewards.1" in result.stderr and "nowhere" in result.stderr


def test_stop_and_resume_reproduce_the_uninterrupted_run(tmp_path: Path):
    config = grpo_config(reward_file(tmp_path), max_steps=10)
    reference = train_events(trained(config, tmp_path / "reference"))
    expected = {event["step"]: (event["loss"], event["reward"]) for event in reference}

    run_dir = runs.create_run(config, run_dir=tmp_path / "run")
    stop_then_resume(run_dir, 10)
    assert {event["step"]: (event["loss"], event["reward"]) for event in train_events(run_dir)} == expected


def test_a_reward_that_raises_fails_the_run_naming_it_and_keeps_checkpoints(tmp_path: Path):
    config = grpo_config(reward_file(tmp_path, FAILS_AT_STEP_3), function="picky")
    run_dir = runs.create_run(config, run_dir=tmp_path / "run")
    runs.start(run_dir)
    failed = runs.wait(run_dir, timeout=300)
    assert failed.state == "failed", failed
    assert "reward picky failed on row" in failed.error and "ValueError: cannot judge this one" in failed.error
    assert failed.checkpoints == [2]
