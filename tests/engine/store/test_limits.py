"""Untrusted work in a child whose caps hold (engine.store.limits): a cap reached is a final refusal."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.config import ConfigError, parse_config
from engine.store.limits import Limits, OverLimit, run_limited
from engine.training.methods.reward_spec import REGEX_LIMITS, RewardSpec, pattern_problem

SMALL = Limits(memory_bytes=256 * 2**20, cpu_s=1.0, wall_s=60.0)


def script(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "child.py"
    path.write_text(body, encoding="utf-8")
    return path


def test_the_child_answers_on_stdout(tmp_path: Path) -> None:
    echo = script(tmp_path, "import sys\nprint(sys.stdin.read()[::-1])\n")
    assert run_limited(echo, "abc", SMALL).strip() == "cba"


def test_a_child_past_its_memory_is_refused(tmp_path: Path) -> None:
    hungry = script(tmp_path, "blocks = [bytearray(64 * 2**20) for _ in range(16)]\nprint('fed')\n")
    with pytest.raises(OverLimit) as refused:
        run_limited(hungry, "", SMALL)
    assert refused.value.kind == "memory"


def test_a_child_past_its_cpu_time_is_refused(tmp_path: Path) -> None:
    spinning = script(tmp_path, "while True:\n    pass\n")
    with pytest.raises(OverLimit) as refused:
        run_limited(spinning, "", SMALL)
    assert refused.value.kind == "time"


def test_a_failing_child_says_its_last_line(tmp_path: Path) -> None:
    failing = script(tmp_path, "raise SystemExit('no such column: answer')\n")
    with pytest.raises(RuntimeError, match="no such column: answer"):
        run_limited(failing, "", SMALL)


def test_a_nested_regex_reward_is_refused_by_its_cost() -> None:
    """((a{100}){100}){100} is a valid pattern that took 2.2 s and 0.3 GB to compile in the studio's process."""
    problem = pattern_problem("((a{100}){100}){100}")
    assert problem is not None and f"{REGEX_LIMITS.memory_bytes // 2**20} MiB" in problem and "simplify" in problem
    with pytest.raises(ValueError, match="pattern: this regular expression takes more than"):
        RewardSpec(kind="regex", pattern="((b{100}){100}){100}")


def test_regex_rewards_keep_their_plain_checks() -> None:
    assert RewardSpec(kind="regex", pattern=r"\d+ (apples|pears)").pattern == r"\d+ (apples|pears)"
    assert pattern_problem("(x") == "not a valid regular expression: missing ) at position 2"
    with pytest.raises(ValueError, match="at most 1000 characters"):
        RewardSpec(kind="regex", pattern="a" * 1001)


def test_a_reward_entry_with_an_unknown_key_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"grpo\.rewards\.0\.bogus: unknown key"):
        parse_config({"method": "grpo", "grpo": {"rewards": [{"kind": "length", "target_tokens": 5, "bogus": 1}]}})
