"""The Train form's reward picker (method grpo): "Add reward" appends a filled-in reward to the grpo.rewards box,
"Check rewards" loads and calls each reward once on the data's first rows, and Start refuses rewards that cannot
run, at the field, before anything starts. Handlers run as plain functions and through Gradio's event processing."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import gradio as gr
import pytest
import yaml
from gradio.state_holder import SessionState

from engine import runs
from engine.training.methods import METHODS
from engine.training.methods.reward_spec import RewardSpec
from studio.context import StudioContext
from studio.demo.caller import Caller
from studio.demo.policy import CUSTOM_REWARD_REFUSAL, NORMAL
from studio.form.schema import leaf_specs
from studio.form.values import default_values, from_widget, to_widget, values_to_config
from studio.train import actions, starting
from studio.train import rewards as rw
from studio.train.tab import build_train_tab
from tests.helpers.visitors import ALICE, DEMO

FIELD = rw.rewards_field(METHODS["grpo"])

GRPO_PRESET = actions.PRESETS_DIR / "demo-grpo.yaml"
RETURNS_TEXT = "def my_fn(prompts, completions, **kwargs):\n    return ['high' for _ in completions]\n"
COUNTS = "def my_fn(prompts, completions, answer, **kwargs):\n    return [float(len(a)) for a in answer]\n"


def grpo_values(workspace: Path, rewards: str | None = None) -> dict[str, Any]:
    values, message = actions.load_config_values(Caller(workspace), GRPO_PRESET)
    assert values is not None, message
    if rewards is not None:
        values[FIELD] = rewards
    return values


def custom_rewards(workspace: Path, source: str) -> str:
    """The rewards box holding one custom reward of a file in the workspace."""
    workspace.mkdir(parents=True, exist_ok=True)
    path = workspace / "my_rewards.py"
    path.write_text(source, encoding="utf-8")
    return f"- {{kind: custom, file: {path}, function: my_fn}}"


def test_add_reward_appends_a_filled_in_entry_that_the_config_reads() -> None:
    text = rw.add_reward("", "exact_match")
    for kind in ("regex", "length", "contains", "math_match", "custom"):
        text = rw.add_reward(text, kind)
    assert len(text.splitlines()) == 6  # one reward per line
    specs = [RewardSpec(**entry) for entry in yaml.safe_load(text)]
    assert [spec.kind for spec in specs] == ["exact_match", "regex", "length", "contains", "math_match", "custom"]
    # What the box held stays as written; a box that is not a list of rewards is left for the user to fix.
    assert rw.add_reward("- {kind: regex, pattern: 'x+', weight: 2}", "length").startswith("- {kind: regex, ")
    with pytest.raises(ValueError, match="not valid YAML"):
        rw.add_reward("- {kind: [", "regex")
    with pytest.raises(ValueError, match="a YAML list of rewards"):
        rw.add_reward("just words", "regex")


def test_the_box_shows_one_reward_per_line_and_the_demo_offers_no_custom_file() -> None:
    spec = next(spec for spec in leaf_specs() if spec.path == FIELD)
    shown = to_widget(spec, [RewardSpec(kind="exact_match"), RewardSpec(kind="regex", pattern="a|b", weight=0.5)])
    assert shown.splitlines() == ["- {kind: exact_match}", "- {kind: regex, weight: 0.5, pattern: a|b}"]
    assert "custom" in dict(map(reversed, rw.reward_choices(NORMAL)))
    assert "custom" not in dict(map(reversed, rw.reward_choices(DEMO)))


def test_a_box_without_rewards_is_empty_and_reads_back_as_no_rewards() -> None:
    spec = next(spec for spec in leaf_specs() if spec.path == FIELD)
    assert to_widget(spec, []) == "" and default_values()[FIELD] == ""  # not "[]"
    assert from_widget(spec, "") == [] and from_widget(spec, " \n ") == [] and from_widget(spec, None) == []
    assert from_widget(spec, "[]") == []  # what the box showed before, in a kept form or a pasted config
    assert values_to_config({**default_values(), FIELD: ""}).grpo.rewards == []
    assert rw.add_reward("", "length") == "- {kind: length, target_tokens: 16, weight: 0.1}"


def test_check_rewards_passes_the_preset_and_names_a_custom_function_that_returns_text(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    good = rw.check_rewards_message(Caller(workspace), grpo_values(workspace))
    assert good.startswith("✓ 2 rewards load and score the first rows: exact_match × 1, regex × 0.25")
    bad = rw.check_rewards_message(Caller(workspace), grpo_values(workspace, custom_rewards(workspace, RETURNS_TEXT)))
    assert bad.startswith("✗ **The rewards cannot run**") and "my_fn" in bad and "high" in bad
    counted = rw.check_rewards_message(Caller(workspace), grpo_values(workspace, custom_rewards(workspace, COUNTS)))
    assert counted.startswith("✓ 1 reward load")
    # In the demo a custom file is refused before any of it runs.
    in_demo = grpo_values(workspace, custom_rewards(workspace, COUNTS))
    refused = rw.check_rewards_message(Caller(workspace, DEMO, ALICE), in_demo)
    assert CUSTOM_REWARD_REFUSAL in refused
    empty = rw.check_rewards_message(Caller(workspace), grpo_values(workspace, "[]"))
    assert "grpo.rewards: grpo needs at least one reward function" in empty


def test_start_refuses_a_reward_that_cannot_run_at_its_field(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    started: list[Path] = []
    values = grpo_values(workspace, custom_rewards(workspace, RETURNS_TEXT))
    result = starting.start_run(Caller(workspace), values, started.append)
    assert started == [] and runs.run_dirs(workspace) == []
    assert result.message.startswith("✗ Not started") and "my_fn" in result.errors["grpo.rewards.0"]


def call(blocks: gr.Blocks, name: str, args: list[Any]) -> list[Any]:
    fn = next(fn for fn in blocks.fns.values() if fn.name == name)
    return asyncio.run(blocks.process_api(fn, args, state=SessionState(blocks)))["data"]


def test_the_picker_buttons_through_gradio(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    ctx = StudioContext(workspace=workspace)
    with gr.Blocks() as blocks:
        ctx.visitor = gr.State(None)
        form = build_train_tab(ctx)
    added = call(blocks, "on_add", [None, "- {kind: exact_match}", "length"])[0]
    assert added == "- {kind: exact_match}\n- {kind: length, target_tokens: 16, weight: 0.1}"
    values = grpo_values(workspace)
    args = [None, *(values[path] for path in form.paths)]
    assert call(blocks, "on_check", args)[0].startswith("✓ 2 rewards load")
