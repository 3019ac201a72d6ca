"""The rewards box of a method that learns from rewards takes a whole list of rewards: pydantic's max_length of a
list counts its items (16 rewards), and the form used to give the box's text that limit in characters, so the page
stopped the typing at ``- {kind: custom,`` and a box that "Add reward" had filled could not be edited."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import gradio as gr
import yaml
from gradio.state_holder import SessionState

from engine.training.methods import METHODS
from studio.context import StudioContext
from studio.demo.caller import Caller
from studio.form.schema import leaf_specs
from studio.train import actions
from studio.train import rewards as rw
from studio.train.tab import build_train_tab

FIELD = rw.rewards_field(METHODS["grpo"])
GRPO_PRESET = actions.PRESETS_DIR / "demo-grpo.yaml"
TYPED = (  # what a practitioner types: far more than 16 characters
    "- {kind: exact_match, column: answer, ignore_case: true}\n"
    "- {kind: regex, pattern: '[A-Z][a-z]+ [0-9]{1,2}', weight: 0.25}\n"
    "- {kind: contains, text: because, absent: true, weight: 0.5}"
)


def call(blocks: gr.Blocks, name: str, args: list[Any]) -> list[Any]:
    fn = next(fn for fn in blocks.fns.values() if fn.name == name)
    return asyncio.run(blocks.process_api(fn, args, state=SessionState(blocks)))["data"]


# --- the box takes a whole list --------------------------------------------------------------------------------


def test_a_list_fields_item_limit_does_not_cap_its_text() -> None:
    specs = {spec.path: spec for spec in leaf_specs()}
    rewards_fields = [field for field in map(rw.rewards_field, METHODS.values()) if field]
    assert rewards_fields and all(specs[field].max_length is None for field in rewards_fields)
    assert specs["launch.devices"].max_length is None  # a list of GPU indices, its item limit 65
    assert specs["train.trackio_project"].max_length == 96  # a text's own limit stays


def test_the_rewards_box_in_the_page_takes_a_typed_list_and_reads_it(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    with gr.Blocks() as blocks:
        form = build_train_tab(StudioContext(workspace, gr.State(None), gr.Tabs(), visitor=gr.State(None)))
    box = form.components[FIELD]
    assert box.max_length is None and form.components["launch.devices"].max_length is None
    assert box.get_config()["max_length"] is None  # the page's textarea gets no maxlength
    values, _ = actions.load_config_values(Caller(workspace), GRPO_PRESET)
    assert values is not None
    values[FIELD] = TYPED
    out = call(blocks, "on_change", [None, *(values[path] for path in form.paths)])
    slots = dict(zip(form.paths, out[3:], strict=True))
    assert slots[FIELD]["visible"] is False, slots[FIELD]
    rewards = yaml.safe_load(out[0])["grpo"]["rewards"]
    assert rewards == [
        {"kind": "exact_match", "ignore_case": True},
        {"kind": "regex", "weight": 0.25, "pattern": "[A-Z][a-z]+ [0-9]{1,2}"},
        {"kind": "contains", "weight": 0.5, "text": "because", "absent": True},
    ]
