"""GRPO trains on prompts alone (format ``prompt``) and hands the data's other columns to the reward functions, as
TRL does: a custom reward records the ``solution`` values it receives through ``python -m engine train``."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from engine import runs
from engine.config import parse_config
from tests.helpers.engine_cli import run_train

pytestmark = pytest.mark.integration

# Four prompts, two per step (8 answers, 4 per prompt): two steps see each once. Row 2's number becomes the
# string "12" (its column mixes strings and numbers); row 3 has no solution, so the rewards get None for it.
ROWS = [
    {"prompt": "Say the number 7", "solution": "7", "level": 1},
    {"prompt": [{"role": "user", "content": "Say the number 12"}], "solution": 12, "level": 2},
    {"prompt": [{"from": "human", "value": "Say hello"}], "level": 1},
    {"prompt": "Say the number 3", "system": "Answer with digits.", "solution": "3", "level": 3},
]
RECORDING_REWARD = """
import json
import os


def has_solution(prompts, completions, solution, level, ts_row, **kwargs):
    with open({seen!r}, "a") as file:
        file.write(json.dumps({{"pid": os.getpid(), "rows": ts_row, "solution": solution, "level": level}}) + "\\n")
    return [None if s is None else float(s in c[0]["content"]) for s, c in zip(solution, completions)]
"""


def test_grpo_trains_on_prompts_alone_and_the_rewards_get_the_data_s_columns(tmp_path: Path):
    data = tmp_path / "prompts.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in ROWS), encoding="utf-8")
    seen = tmp_path / "seen.jsonl"
    rewards = tmp_path / "rewards.py"
    rewards.write_text(textwrap.dedent(RECORDING_REWARD.format(seen=str(seen))), encoding="utf-8")
    config = parse_config(
        {
            "name": "prompts",
            "method": "grpo",
            "data": {"path": str(data)},
            "adapter": {"r": 4, "dropout": 0.0},
            "train": {"max_steps": 2, "per_device_batch_size": 8, "max_length": 64, "logging_steps": 1},
            "grpo": {
                "num_generations": 4,
                "max_completion_length": 8,
                "rewards": [
                    {"kind": "custom", "file": str(rewards), "function": "has_solution"},
                    {"kind": "exact_match", "column": "solution"},
                ],
            },
        }
    )
    (tmp_path / "config.yaml").write_text(config.to_yaml())
    result = run_train(tmp_path / "config.yaml", tmp_path / "run")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert runs.status(tmp_path / "run").state == "completed"
    # The report names the row without a solution and the column made strings.
    assert "1 of 4 prompts have no 'solution' (the first: row 3 of" in result.stdout + result.stderr

    calls = [json.loads(line) for line in seen.read_text().splitlines()]
    # The check runs in the train command's process, the training in the worker it starts.
    check = [call for call in calls if call["pid"] == calls[0]["pid"]]
    training = [call for call in calls if call["pid"] != calls[0]["pid"]]
    # Before launch the check called it on the first two rows, then alone on the first row without a solution.
    assert [(call["rows"], call["solution"]) for call in check] == [([1, 2], ["7", "12"]), ([3], [None])]
    received = {
        (row, solution, level)
        for call in training
        for row, solution, level in zip(call["rows"], call["solution"], call["level"], strict=True)
    }
    assert received == {(1, "7", 1), (2, "12", 2), (3, None, 1), (4, "3", 3)}
    assert sum(len(call["rows"]) for call in training) == 2 * 8  # every answer of both steps was scored
