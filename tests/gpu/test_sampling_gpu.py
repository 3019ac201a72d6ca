"""GRPO, RLOO and distillation on the GPU through ``python -m engine train``: each step samples answers with the
model being trained (generation on the GPU) and trains on them, scored with built-in rewards (GRPO, RLOO) or by a
tuned run as teacher (distill); finite losses, rewards logged, sampled answers written, an adapter that loads."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from engine.store.completions import latest_completions
from engine.store.rundir import iter_metrics
from tests.gpu.gpu_runs import DATASETS, STEPS, check_trained, result_logits, run_config, train


@pytest.mark.parametrize("method", ["grpo", "rloo"])
def test_a_sampling_method_samples_scores_and_trains(method: str, device: str, tmp_path: Path) -> None:
    config = run_config(
        device,
        method,
        data={"path": str(DATASETS / "demo_sft_train.jsonl"), "eval_path": None, "max_samples": 64},
        train={"per_device_batch_size": 8, "learning_rate": 3e-4, "lr_scheduler": "constant"},
        **{
            method: {
                "num_generations": 4,
                "max_completion_length": 16,
                "temperature": 0.7,
                "rewards": [{"kind": "exact_match"}, {"kind": "length", "target_tokens": 6, "weight": 0.5}],
            }
        },
    )
    run_dir = train(config, tmp_path / method)
    check_trained(run_dir, device, falls=False)  # a policy-gradient loss need not fall in a few steps
    events = [event for event in iter_metrics(run_dir) if event.get("event") == "train"]
    rewards = [event["reward"] for event in events if "reward" in event]
    assert rewards and all(map(math.isfinite, rewards)), rewards
    sampled = latest_completions(run_dir)
    assert {row["step"] for row in sampled} == set(range(1, STEPS + 1))  # answers sampled at every step
    assert all(isinstance(row["completion"], str) and math.isfinite(row["reward"]) for row in sampled)
    result_logits(run_dir, device)


def test_distillation_samples_and_learns_from_a_tuned_run(device: str, tmp_path: Path) -> None:
    teacher = train(run_config(device, train={"learning_rate": 3e-3}), tmp_path / "teacher")
    config = run_config(
        device,
        "distill",
        data={"path": str(DATASETS / "demo_sft_train.jsonl"), "eval_path": None, "max_samples": 64},
        train={"per_device_batch_size": 8, "learning_rate": 3e-3},
        distill={"teacher": str(teacher), "max_completion_length": 16},
    )
    run_dir = train(config, tmp_path / "student")
    check_trained(run_dir, device, falls=False)  # the student's own answers change from step to step
    sampled = latest_completions(run_dir)
    assert {row["step"] for row in sampled} == set(range(1, STEPS + 1))  # answers sampled at every step
    assert all(isinstance(row["completion"], str) and row["reward"] is None for row in sampled)
    result_logits(run_dir, device)
