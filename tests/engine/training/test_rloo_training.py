"""RLOO trains for real: TRL's RLOOTrainer on the demo model and the demo date task, with a built-in and a custom
reward, through ``python -m engine train``; its samples, advantages and charts checked by value, its rules, the
reward check and ``python -m engine check`` on the shipped preset, and Evaluate's rewards scoring of the run."""

from __future__ import annotations

import json
import math
import statistics
import textwrap
from pathlib import Path
from typing import Any

import pytest

from engine import runs
from engine.config import ConfigError, RunConfig, load_config, parse_config
from engine.store.completions import latest_completions
from engine.store.paths import PROJECT_ROOT
from engine.store.rundir import iter_metrics
from engine.training.methods import METHODS
from tests.helpers.engine_cli import run_check, run_train

pytestmark = pytest.mark.integration
DEMO_SFT = PROJECT_ROOT / "assets" / "datasets" / "demo_sft_train.jsonl"
PRESET = PROJECT_ROOT / "assets" / "presets" / "demo-rloo.yaml"
GENERATIONS, EVAL_ROWS = 4, 4

# Rewarded when the answer is short: on the untrained demo model some of a group's answers are and some are not,
# so the leave-one-out advantages are not all zero and the policy moves from the first step.
SHORT_ANSWER = """
def short_answer(prompts, completions, **kwargs):
    return [1.0 if len(completion[0]["content"]) < 12 else 0.0 for completion in completions]
"""


def rloo_config(reward_file: Path, function: str = "short_answer", **train: Any) -> RunConfig:
    """RLOO on the demo date task: one prompt of 4 answers of at most 16 tokens per step, no reference (beta 0:
    each answer's advantage is then its reward less the mean of the other three's), 4 prompts held out."""
    return parse_config(
        {
            "name": "rloo",
            "method": "rloo",
            "data": {"path": str(DEMO_SFT), "max_samples": 32, "eval_size": EVAL_ROWS},
            "adapter": {"r": 8, "dropout": 0.0},
            "train": {
                "max_steps": 4,
                "per_device_batch_size": GENERATIONS,
                "learning_rate": 3e-3,
                "max_length": 128,
                "logging_steps": 1,
                **train,
            },
            "rloo": {
                "num_generations": GENERATIONS,
                "max_completion_length": 16,
                "beta": 0.0,
                "rewards": [
                    {"kind": "length", "target_tokens": 6},
                    {"kind": "custom", "file": str(reward_file), "function": function, "weight": 2.0},
                ],
            },
            "launch": {"threads_per_process": 1},
        }
    )


def reward_file(folder: Path, source: str = SHORT_ANSWER) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "rewards.py"
    path.write_text(textwrap.dedent(source))
    return path


@pytest.fixture(scope="module")
def rloo_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("rloo")
    (root / "config.yaml").write_text(rloo_config(reward_file(root)).to_yaml())
    result = run_train(root / "config.yaml", root / "run")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return root / "run"


def test_rloo_trains_and_writes_leave_one_out_samples(rloo_run: Path):
    assert runs.status(rloo_run).state == "completed"
    events = [event for event in iter_metrics(rloo_run) if event["event"] == "train"]
    assert [event["step"] for event in events] == [1, 2, 3, 4]
    config = load_config(rloo_run / "config.yaml")
    drawn = [chart.key for chart in METHODS["rloo"].charts if chart.drawn_for(config)]
    assert "kl" not in drawn and {"reward", "reward_std", "entropy"} <= set(drawn)  # beta 0: no reference, no KL
    for event in events:
        assert math.isfinite(event["loss"]) and math.isfinite(event["grad_norm"])
        assert all(math.isfinite(event[key]) for key in drawn), event
        total = event["rewards/length/mean"] + 2.0 * event["rewards/short_answer/mean"]
        assert event["reward"] == pytest.approx(total, abs=1e-5)
        assert 0 < event["completions/mean_length"] <= 16
        assert event["num_input_tokens_seen"] > 0
    assert any(event["grad_norm"] > 0 for event in events)  # some group's rewards differed: the policy moved
    assert (rloo_run / "adapter" / "adapter_model.safetensors").is_file()

    samples = latest_completions(rloo_run)
    assert [sample["step"] for sample in samples] == [s for s in (1, 2, 3, 4) for _ in range(GENERATIONS)]
    prompts = {row["messages"][0]["content"] for row in map(json.loads, DEMO_SFT.read_text().splitlines())}
    for step in (1, 2, 3, 4):  # a generation per step: one prompt, its whole group of answers
        group = [sample for sample in samples if sample["step"] == step]
        assert len({sample["prompt"] for sample in group}) == 1 and group[0]["prompt"] in prompts
        for sample in group:
            scores = sample["rewards"]
            assert set(scores) == {"length", "short_answer"}
            assert sample["reward"] == pytest.approx(scores["length"] + 2.0 * scores["short_answer"], abs=1e-5)
            assert scores["short_answer"] == (1.0 if len(sample["completion"].strip()) < 12 else 0.0)
            others = [other["reward"] for other in group if other is not sample]
            # RLOO's advantage: the answer's reward less the mean of the others' (not GRPO's group-normalised one)
            assert sample["advantage"] == pytest.approx(sample["reward"] - statistics.fmean(others), abs=1e-5)


def test_the_rules_refuse_batches_that_do_not_split_into_groups(tmp_path: Path):
    file = reward_file(tmp_path)
    with pytest.raises(ConfigError) as caught:
        rloo_config(file, per_device_batch_size=3)
    assert [problem.field for problem in caught.value.problems] == ["train.per_device_batch_size"]
    assert "samples 3 answers" in str(caught.value) and "rloo.num_generations (4)" in str(caught.value)
    with pytest.raises(ConfigError, match=r"train.eval_batch_size: must be a multiple of rloo.num_generations"):
        rloo_config(file, eval_strategy="steps", eval_batch_size=6)
    with pytest.raises(ConfigError, match="rloo.rewards: rloo needs at least one reward function"):
        parse_config({"method": "rloo"})
    # Two steps of 2 prompts share a round of 4 answers: one whole group.
    config = rloo_config(file, per_device_batch_size=2, gradient_accumulation_steps=2)
    assert config.rloo.num_generations == 4
    config = parse_config({**config.model_dump(mode="json"), "rloo": {**config.rloo.model_dump(), "beta": 0.05}})
    assert "kl" in [chart.key for chart in METHODS["rloo"].charts if chart.drawn_for(config)]


def test_check_passes_the_preset_and_names_a_reward_that_cannot_run(tmp_path: Path):
    from engine.training.check import check_run

    result = run_check(PRESET, PROJECT_ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ok: the config and dataset are ready to train" in result.stdout

    bad = reward_file(tmp_path, "def short_answer(completions):\n    return [1.0]\n")  # no **kwargs
    with pytest.raises(ConfigError) as caught:
        check_run(rloo_config(bad))
    assert [problem.field for problem in caught.value.problems] == ["rloo.rewards.1"]
    assert "short_answer" in str(caught.value) and "**kwargs" in str(caught.value)


def test_evaluate_scores_the_run_by_its_rewards(rloo_run: Path):
    from engine.evaluate import evaluations
    from engine.evaluate.worker import evaluate

    result = evaluate(rloo_run)
    assert (result["scoring"], result["method"], result["baseline"]) == ("rewards", "rloo", "base")
    assert result["max_new_tokens"] == 16 and result["data"]["rows"] == EVAL_ROWS
    assert result["reward_weights"] == {"length": 1.0, "short_answer": 2.0}
    for side in ("base", "tuned"):
        listed = [entry[f"{side}_reward"] for entry in result["completions"]]
        assert result[side]["reward"] == pytest.approx(statistics.fmean(listed))
        for entry in result["completions"]:
            scores = entry[f"{side}_rewards"]
            assert entry[f"{side}_reward"] == pytest.approx(scores["length"] + 2.0 * scores["short_answer"])
    assert evaluations.latest_evaluation(rloo_run)["id"] == result["id"]
