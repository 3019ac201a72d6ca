"""The trackers on the Train tab: ``train.report_to`` is a multiselect of tensorboard / wandb / trackio beside
trackio's project and Space (in the Advanced group), the form reads them back, Start refuses a tracker the machine
lacks at its field, and a demo shows them fixed off and refuses trackio."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gradio as gr
import pytest

from engine.config import parse_config
from engine.training import trackers
from studio.context import StudioContext
from studio.demo.caller import Caller
from studio.form.schema import leaf_specs
from studio.form.values import config_to_values, from_widget, values_to_config
from studio.train import actions, starting
from studio.train.tab import build_train_tab
from tests.helpers.visitors import ALICE, DEMO

TRACKER_FIELDS = ("train.report_to", "train.trackio_project", "train.trackio_space")
NOT_IN_DEMO = "fixed to none in this demo (it runs on a small shared CPU)"


def train_tab(workspace: Path, demo: bool) -> dict[str, Any]:
    """The Train tab's components by config path, built as the studio builds it (in demo mode or not)."""
    with gr.Blocks():
        policy = DEMO if demo else StudioContext.policy
        ctx = StudioContext(workspace, gr.State(None), gr.Tabs(), policy=policy, visitor=gr.State(None))
        return build_train_tab(ctx).components


def test_the_train_tab_offers_trackers_as_a_multiselect(tmp_path: Path) -> None:
    widgets = train_tab(tmp_path, demo=False)
    picker = widgets["train.report_to"]
    assert isinstance(picker, gr.Dropdown) and picker.multiselect and picker.interactive is not False
    assert [value for _, value in picker.choices] == ["tensorboard", "wandb", "trackio"]
    assert picker.value == []  # no tracker unless one is picked
    assert isinstance(widgets["train.trackio_project"], gr.Textbox)
    assert isinstance(widgets["train.trackio_space"], gr.Textbox)


def test_a_demo_shows_every_tracker_field_fixed(tmp_path: Path) -> None:
    widgets = train_tab(tmp_path, demo=True)
    for path in TRACKER_FIELDS:
        assert widgets[path].interactive is False, path
        assert widgets[path].info.endswith("Fixed in this demo."), path


def test_the_form_reads_trackers_back() -> None:
    config = parse_config(
        {"train": {"report_to": ["trackio", "tensorboard"], "trackio_project": "dates", "trackio_space": "me/board"}}
    )
    values = config_to_values(config)
    assert values["train.report_to"] == ["trackio", "tensorboard"]
    assert values_to_config(values) == config
    spec = next(spec for spec in leaf_specs() if spec.path == "train.report_to")
    assert (from_widget(spec, None), from_widget(spec, ""), from_widget(spec, "wandb")) == ([], [], ["wandb"])
    with pytest.raises(ValueError, match="pick values from the list"):
        from_widget(spec, 3)


def test_start_refuses_a_tracker_this_machine_lacks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trackers, "installed", lambda module: module != "trackio")
    values = {**actions.starting_values(), "train.max_steps": 5, "train.report_to": ["tensorboard", "trackio"]}
    started: list[Path] = []
    result = starting.start_run(Caller(tmp_path), values, started.append)
    assert result.run_dir is None and started == []
    assert result.errors == {"train.report_to": "trackio is not installed here (pip install trackio)"}


def test_a_demo_refuses_trackio_and_resets_it(tmp_path: Path) -> None:
    values = {**actions.starting_values(), "train.report_to": ["trackio"], "train.trackio_project": "mine"}
    refused = actions.preview(Caller(tmp_path, DEMO, ALICE), values).errors
    assert refused == {"train.report_to": NOT_IN_DEMO, "train.trackio_project": NOT_IN_DEMO.replace("none", "empty")}
    restricted, changed = DEMO.restrict_values(values, None)
    assert set(changed) == {"train.report_to", "train.trackio_project"}
    assert (restricted["train.report_to"], restricted["train.trackio_project"]) == ([], "")
