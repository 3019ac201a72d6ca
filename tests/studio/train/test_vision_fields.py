"""The Train tab's vision section shows only for a vision-language model: hidden for the text demo model, shown for
the vision demo model and for a model whose modality cannot be told; its fields are the schema's vision section."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gradio as gr
import pytest

from studio.context import StudioContext
from studio.form.schema import leaf_specs
from studio.train import model_sections as ms
from studio.train.tab import build_train_tab
from tests.helpers.pages import call_event

TEXT_MODEL, VISION_MODEL = "assets/demo-model", "assets/demo-vlm"


@pytest.fixture(scope="module")
def tab(tmp_path_factory: pytest.TempPathFactory) -> tuple[gr.Blocks, Any]:
    with gr.Blocks() as demo:
        ctx = StudioContext(tmp_path_factory.mktemp("ws"), gr.State(None), gr.Tabs(), visitor=gr.State(None))
        form = build_train_tab(ctx)
    return demo, form


def box_of(demo: gr.Blocks, section: str) -> gr.Column:
    return next(b for b in demo.blocks.values() if isinstance(b, gr.Column) and b.elem_id == f"ts-modality-{section}")


def inside(component: Any, box: Any) -> bool:
    parent = component.parent
    while parent is not None and parent is not box:
        parent = parent.parent
    return parent is box


def test_the_vision_fields_are_the_schemas_and_sit_in_one_box(tab: Any) -> None:
    demo, form = tab
    box = box_of(demo, "vision")
    vision_paths = {spec.path for spec in leaf_specs() if spec.path.startswith("vision.")}
    assert len(vision_paths) >= 4  # max_pixels and the three parts that train
    assert {path for path, component in form.components.items() if inside(component, box)} == vision_paths
    # The tab opens on the demo preset, a text model: the box is hidden.
    assert box.visible is False


@pytest.mark.parametrize(
    ("model", "shown"),
    [(TEXT_MODEL, False), (VISION_MODEL, True), ("some-org/not-in-the-cache-vl", True), ("", True)],
)
def test_the_box_follows_the_model_field(tab: Any, model: str, shown: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    demo, _ = tab
    [update] = call_event(demo, "on_model", [None, model, ""])
    assert update["visible"] is shown


def test_a_model_the_page_may_not_name_is_not_read(tmp_path: Path) -> None:
    """A text model outside the folders the studio reads: its config.json is not opened, so nothing is learnt of it
    (the sections show, as for an unknown model); inside the workspace it is read."""
    outside, workspace = tmp_path / "elsewhere" / "model", tmp_path / "ws"
    for folder in (outside, workspace / "models" / "text"):
        folder.mkdir(parents=True)
        (folder / "config.json").write_text(json.dumps({"model_type": "llama"}), encoding="utf-8")
    assert ms.shown_sections(str(outside), None, workspace, ["vision"]) == {"vision": True}
    assert ms.model_reads(str(outside), None, workspace) is None
    inner = str(workspace / "models" / "text")
    assert ms.shown_sections(inner, None, workspace, ["vision"]) == {"vision": False}


def test_only_sections_named_after_a_modality_are_hidden() -> None:
    assert ms.modality_sections(["model", "adapter", "vision", "data", "train"]) == ["vision"]
    assert ms.model_reads(VISION_MODEL, None, None) == "vision"
    assert ms.model_reads(TEXT_MODEL, None, None) == "text"


def test_an_error_of_a_vision_field_is_said_again_beside_start(tab: Any) -> None:
    """The section may be hidden: its fields' errors are also listed among the lines beside Start."""
    _, form = tab
    slots, unplaced = form.error_updates({"vision.train_language_model": "nothing would train"})
    assert any("nothing would train" in line for line in unplaced)
    assert slots[form.paths.index("vision.train_language_model")]["visible"] is True
