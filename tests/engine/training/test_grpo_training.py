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
from tests.engine.runs.fault_checks import wait_until
from tests.helpers.engine_cli import run_check, run_train
from tests.helpers.run_progress import wait_for_state

pytestmark = pytest.mark.integration
DEMO_SFT = PROJECT_ROOT / "assets" / "datasets" / "demo_sft_train.jsonl"

# Rewarded when the answer is short: on the untrained demo model some of a group's answers are and some are not,
# so the group's advantages are not all zero and the policy moves from the first step.
SHORT_ANSWER = """
def short_answer(prompts, completions, **kwargs):
    return [1.0 if len(completion[0]["content"]) < 12 else 0.0 for completion in completions]
"""
# The short answer reward, which waits at step 6 (5 steps done) until the test opens its gate: the test's Pause
# lands at the end of that very step, however fast or slow the machine.
GATED_AT_STEP_6 = """
import time
from pathlib import Path

def short_answer(prompts, completions, trainer_state, **kwargs):
    gate = Path(__file__).with_name("gate")
    if trainer_state.global_step == 5 and not (gate / "open").exists():
        gate.mkdir(exist_ok=True)
        (gate / "reached").touch()
        deadline = time.time() + 300
        while not (gate / "open").exists() and time.time() < deadline:
            time.sleep(0.02)
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


def gated_config(folder: Path) -> RunConfig:
    """GRPO on 4 prompts with the reward gated at step 6: a prompt a step (4 answers), epochs of 4 steps."""
    config = grpo_config(reward_file(folder, GATED_AT_STEP_6), max_steps=10)
    return config.model_copy(update={"data": config.data.model_copy(update={"max_samples": 4})})


def test_a_run_resumed_in_a_later_epoch_takes_the_uninterrupted_runs_steps(tmp_path: Path):
    """Stopped at step 6, in its second epoch, a run resumes there (2 of that epoch's steps skipped) and takes the
    unbroken run's prompts through its third epoch (engine.training.methods.online.epochs)."""
    (tmp_path / "reference" / "gate").mkdir(parents=True)
    (tmp_path / "reference" / "gate" / "open").touch()
    reference = train_events(trained(gated_config(tmp_path / "reference"), tmp_path / "reference"))
    assert reference[-1]["epoch"] == 2.5
    expected = {event["step"]: (event["loss"], event["reward"], event["entropy"]) for event in reference}

    config = gated_config(tmp_path / "stopped")
    gate = tmp_path / "stopped" / "gate"
    run_dir = runs.create_run(config, run_dir=tmp_path / "run")
    runs.start(run_dir)
    wait_until(lambda: (gate / "reached").exists() or not runs.status(run_dir).is_active, 300, "step 6")
    assert runs.pause(run_dir)
    (gate / "open").touch()
    assert wait_for_state(run_dir, "paused").step == 6
    assert runs.stop(run_dir)
    assert runs.wait(run_dir, timeout=300).checkpoints[-1] == 6
    runs.resume(run_dir)
    assert runs.wait(run_dir, timeout=300).state == "completed"
    got = {event["step"]: (event["loss"], event["reward"], event["entropy"]) for event in train_events(run_dir)}
    assert got == expected


def test_a_reward_that_raises_fails_the_run_naming_it_and_keeps_checkpoints(tmp_path: Path):
    config = grpo_config(reward_file(tmp_path, FAILS_AT_STEP_3), function="picky")
    run_dir = runs.create_run(config, run_dir=tmp_path / "run")
    runs.start(run_dir)
    failed = runs.wait(run_dir, timeout=300)
    assert failed.state == "failed", failed
    assert "reward picky failed on row" in failed.error and "ValueError: cannot judge this one" in failed.error
    assert failed.checkpoints == [2]


def test_the_memory_estimate_holds_the_reference_that_grpo_keeps_with_a_kl_term(tmp_path: Path):
    """GRPOTrainer loads a full fine-tune's reference again from the model's path when beta > 0: the estimate counts
    its bytes as loaded, and the check says which reference the run has; none without the KL term or for LoRA."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from engine.training.check import check_run

    demo = str(PROJECT_ROOT / "assets" / "demo-model")
    args = GRPOConfig(
        output_dir=str(tmp_path),
        report_to=[],
        use_cpu=True,
        beta=0.04,
        num_generations=2,
        per_device_train_batch_size=2,
    )
    trainer = GRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(demo, dtype=torch.float32),
        reward_funcs=[lambda completions, **kwargs: [0.0] * len(completions)],
        args=args,
        train_dataset=Dataset.from_list([{"prompt": "Which month?"}] * 2),
        processing_class=AutoTokenizer.from_pretrained(demo),
    )
    reference = sum(parameter.numel() * parameter.element_size() for parameter in trainer.ref_model.parameters())

    def checked(adapter: str, beta: float) -> tuple[float, list[str]]:
        config = grpo_config(reward_file(tmp_path))
        config = config.model_copy(
            update={
                "adapter": config.adapter.model_copy(update={"method": adapter}),
                "grpo": config.grpo.model_copy(update={"beta": beta}),
            }
        )
        report = check_run(config)
        assert report.memory is not None
        return report.memory.frozen, [line for line in report.lines() if line.startswith("reference: ")]

    frozen, said = checked("full", 0.04)
    assert frozen == pytest.approx(reference, rel=0.01)
    assert said == ["reference: a frozen copy of the model, loaded beside it (counted as frozen below)"]
    assert checked("lora", 0.04) == (0, ["reference: the base, with the adapter off"])
    assert checked("full", 0.0) == (0, ["reference: none (beta 0: no KL term)"])
