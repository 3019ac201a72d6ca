"""The Train form's reward picker (method grpo): the rewards a user adds to ``grpo.rewards`` with a click, and the
check of every reward against the data's first rows before Start. No Gradio here.

The ``grpo.rewards`` box stays the one place the rewards are written (the config's YAML, one reward per line);
the picker only appends a filled-in entry that the user then edits, so nothing holds a second copy of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from engine.config import ConfigError
from engine.config.grpo import RewardSpec
from studio.demo.policy import NORMAL, DemoPolicy, visitor_uploads
from studio.form.schema import yaml_list_text
from studio.markup import text_block
from studio.train.actions import checked_config
from studio.train.starting import check_method_data

FIELD = "grpo.rewards"
# What "Add" writes for each kind: what the kind needs, with a value that works on the demo task.
TEMPLATES: dict[str, dict[str, Any]] = {
    "exact_match": {"kind": "exact_match", "column": "answer", "weight": 1.0},
    "math_match": {"kind": "math_match", "column": "answer", "weight": 1.0},
    "regex": {"kind": "regex", "pattern": "[A-Z][a-z]+ [0-9]{1,2}", "weight": 0.25},
    "length": {"kind": "length", "target_tokens": 16, "weight": 0.1},
    "contains": {"kind": "contains", "text": "because", "absent": False, "weight": 0.5},
    "custom": {"kind": "custom", "file": "rewards.py", "function": "my_reward", "weight": 1.0},
}
LABELS = {
    "exact_match": "Exact match with a reference column",
    "math_match": "Same number / math answer as a reference column",
    "regex": "Matches a pattern (format)",
    "length": "Close to a length in tokens",
    "contains": "Contains (or lacks) a text",
    "custom": "A function of your own Python file",
}


def reward_choices(policy: DemoPolicy = NORMAL) -> list[tuple[str, str]]:
    """The picker's list as (label, kind); no custom file in demo mode, where strangers never run code."""
    return [(label, kind) for kind, label in LABELS.items() if not (policy.enabled and kind == "custom")]


def add_reward(text: str | None, kind: str) -> str:
    """The rewards box's text with a filled-in ``kind`` entry appended, one reward per line; ValueError when the
    box holds something other than a YAML list of rewards (the user's text is never overwritten)."""
    if kind not in TEMPLATES:
        raise ValueError(f"no reward kind {kind!r}")
    try:
        current = yaml.safe_load(text or "") or []
    except yaml.YAMLError:
        raise ValueError("the rewards box is not valid YAML: fix it first") from None
    if isinstance(current, dict):
        current = [current]
    if not isinstance(current, list):
        raise ValueError("the rewards box should hold a YAML list of rewards: fix it first")
    return yaml_list_text([*current, TEMPLATES[kind]])


def check_rewards_message(
    values: Mapping[str, Any], workspace: Path, policy: DemoPolicy = NORMAL, visitor: str | None = None
) -> str:
    """Markdown for the "Check rewards" button: the form's config checked as Start checks it, then each reward
    loaded and called once on the first prompt rows (the method's check, engine.training.rewards.check_rewards),
    or what is wrong with which one; in demo mode without server paths."""
    return policy.shown(_check_text(values, workspace, policy, visitor), workspace)


def _check_text(values: Mapping[str, Any], workspace: Path, policy: DemoPolicy, visitor: str | None) -> str:
    from engine.data import DataError

    try:
        config = checked_config(values, workspace, policy, visitor_uploads(workspace, policy, visitor), visitor)
        if config.method != "grpo":
            return ""
        check_method_data(config)
    except ConfigError as exc:
        return _refusal("\n".join(map(str, exc.problems)))
    except DataError as exc:
        return _refusal(f"the dataset cannot be used: {exc}")
    rewards: list[RewardSpec] = config.grpo.rewards  # the config refuses an empty list
    names = ", ".join(f"{spec.label} × {spec.weight:g}" for spec in rewards)
    return f"✅ {len(rewards)} reward{'s' if len(rewards) != 1 else ''} load and score the first rows: {names}"


def _refusal(message: str) -> str:
    return f"❌ **The rewards cannot run**\n\n{text_block(message)}"
