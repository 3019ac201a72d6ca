"""What a reload brings back of the Train form (studio.train.kept_form): the browser's stored values are a
visitor's input, read as a loaded config is: known fields of the widget's kind only, no run to continue from, and in
demo mode the fields the demo fixes set back. The browser round trip itself is tests/e2e/test_train_tab_browser.py,
and a visitor typing while it comes back tests/e2e/test_kept_form_browser.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import gradio as gr

from studio.demo.caller import Caller
from studio.demo.policy import PICKED, DemoPolicy
from studio.form.values import default_values
from studio.train.kept_form import parse_stored, read_script, restored_text, restored_values


def test_the_stored_form_comes_back_as_it_was(tmp_path: Path) -> None:
    stored = {**default_values(), "method": "kto", "train.max_steps": 77, "train.report_to": ["tensorboard"]}
    restored = restored_values(Caller(tmp_path), stored)
    assert restored["method"] == "kto" and restored["train.max_steps"] == 77
    assert restored["train.report_to"] == ["tensorboard"]
    assert set(restored) == set(default_values()) - {"model.init_from"}


def test_what_no_widget_shows_is_left_out(tmp_path: Path) -> None:
    stored = {
        "method": "not-a-method",  # not among the choices
        "train.max_steps": "77; rm -rf /",  # text where a number goes
        "adapter.use_rslora": "yes",  # text where a checkbox goes
        "train.report_to": ["tensorboard", "evil"],  # a choice the list does not offer
        "data.path": {"nested": ["object"]},  # an object where text goes
        "model.init_from": "someone-elses-run",  # never brought back
        "no.such.field": 1,
        "train.learning_rate": 0.002,  # the one value that fits
    }
    assert restored_values(Caller(tmp_path), stored) == {"train.learning_rate": 0.002}
    assert restored_values(Caller(tmp_path), ["not", "a", "mapping"]) == {}
    assert restored_values(Caller(tmp_path), None) == {}


def test_a_demo_visitor_gets_the_demos_fixed_fields_back(tmp_path: Path) -> None:
    demo = DemoPolicy(enabled=True)
    stored = {**default_values(), "model.name_or_path": "/etc/some-model", "method": "dpo", "quantization.mode": "4bit"}
    restored = restored_values(Caller(tmp_path, demo, None), stored)
    assert restored["method"] == "dpo"  # the visitor's own choice
    assert restored["model.name_or_path"] == PICKED["model.name_or_path"][0] != stored["model.name_or_path"]
    assert restored["quantization.mode"] == "none"


def test_what_the_page_stored_is_read_as_json_or_not_at_all() -> None:
    assert parse_stored('{"method": "kto"}') == {"method": "kto"}
    assert parse_stored("") is None and parse_stored(None) is None and parse_stored("{not json") is None


def test_the_restored_form_goes_to_the_page_as_its_widgets_show_it() -> None:
    with gr.Blocks():
        components = {"train.max_steps": gr.Number(precision=0, elem_id="cfg-train-max_steps"), "name": gr.Textbox()}
    assert json.loads(restored_text(components, {"train.max_steps": 77.0, "name": 5})) == {
        "train.max_steps": 77,
        "name": "5",
    }
    # The page finds a field by its widget's element id; one without an id is never noted as changed.
    script = read_script(components)
    assert '{"cfg-train-max_steps": "train.max_steps"}' in script
