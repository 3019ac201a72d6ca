"""The config form is generated from RunConfig's schema: widgets, bounds, labels, round trips, new fields."""

from __future__ import annotations

import types
from typing import Any, Literal, Union, get_args, get_origin

import annotated_types as at
import gradio as gr
import pytest
from gradio.i18n import I18nData
from pydantic import BaseModel, Field

from engine.config import ConfigError, RunConfig, load_config, parse_config
from engine.config.schema import Section, advanced
from engine.config.sections import TrainSection
from engine.store.paths import PROJECT_ROOT
from studio.form.schema import humanise, leaf_specs
from studio.form.values import config_to_values, default_values, from_widget, values_to_config
from studio.i18n import catalog
from studio.train.form_widgets import ConfigForm, place_errors


def schema_leaves(model: type[BaseModel], prefix: str = "") -> dict[str, Any]:
    """Leaf fields found by walking model_fields here, independently of studio.form.schema."""
    leaves = {}
    for name, info in model.model_fields.items():
        path = f"{prefix}{name}"
        if isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel):
            leaves.update(schema_leaves(info.annotation, path + "."))
        else:
            leaves[path] = info
    return leaves


def render(model: type[BaseModel] = RunConfig) -> ConfigForm:
    """A form rendered through its generic path (every section, then whatever is left)."""
    with gr.Blocks():
        form = ConfigForm(model)
        for child in form.tree.children:
            if hasattr(child, "children"):
                form.render_section(child.path, columns=3)
        form.render_rest()
    return form


@pytest.fixture(scope="module")
def form() -> ConfigForm:
    return render()


def has_advanced_ancestor(component: Any) -> bool:
    parent = component.parent
    while parent is not None:
        if isinstance(parent, gr.Accordion) and getattr(parent.label, "key", None) == "form.advanced":
            return True
        parent = parent.parent
    return False


def test_every_leaf_field_has_one_widget(form: ConfigForm) -> None:
    assert set(form.components) == set(schema_leaves(RunConfig))
    assert set(form.error_slots) == set(form.components)
    assert form.paths == list(schema_leaves(RunConfig))  # schema order: the order of event arguments


def test_widget_types_bounds_and_choices_follow_the_schema(form: ConfigForm) -> None:
    for path, info in schema_leaves(RunConfig).items():
        component = form.components[path]
        annotation = info.annotation
        optional = get_origin(annotation) in (Union, types.UnionType) and type(None) in get_args(annotation)
        base = next(arg for arg in get_args(annotation) if arg is not type(None)) if optional else annotation
        if get_origin(base) is Literal:
            assert isinstance(component, gr.Dropdown), path
            assert [value for _, value in component.choices] == list(get_args(base)), path
        elif get_origin(base) is list and get_origin(get_args(base)[0]) is Literal:  # several of fixed values
            assert isinstance(component, gr.Dropdown) and component.multiselect, path
            assert [value for _, value in component.choices] == list(get_args(get_args(base)[0])), path
        elif base is bool:
            assert isinstance(component, gr.Checkbox), path
        elif base in (int, float) and not optional:
            assert isinstance(component, gr.Number), path
            assert component.precision == (0 if base is int else None), path
            low = next(
                (m.ge if isinstance(m, at.Ge) else m.gt for m in info.metadata if isinstance(m, (at.Ge, at.Gt))), None
            )
            high = next(
                (m.le if isinstance(m, at.Le) else m.lt for m in info.metadata if isinstance(m, (at.Le, at.Lt))), None
            )
            if base is int and any(isinstance(m, at.Gt) for m in info.metadata):
                low += 1
            if base is int and any(isinstance(m, at.Lt) for m in info.metadata):
                high -= 1
            assert (component.minimum, component.maximum) == (low, high), path
        else:  # text, lists, mappings and optional numbers (empty = None) are typed as text
            assert isinstance(component, gr.Textbox), path


def english_of(words: Any) -> str:
    """A component's text as an English page shows it: the catalog's English of its key (studio.i18n)."""
    return catalog.english()[words.key] if isinstance(words, I18nData) else words


def test_labels_and_help_come_from_the_field(form: ConfigForm) -> None:
    """Each label and help is the field's key, which the page shows in its language; the English is the schema's."""
    for path, info in schema_leaves(RunConfig).items():
        component = form.components[path]
        assert component.label.key == f"field.{path}.label", path
        assert component.info.key == f"field.{path}.help", path
        assert english_of(component.label) == humanise(path.rsplit(".", 1)[-1]), path
        assert english_of(component.info) == info.description and info.description, path
    assert english_of(form.components["train.learning_rate"].label) == "Learning rate"
    assert english_of(form.components["train.lr_scheduler"].label) == "LR scheduler"


def test_advanced_fields_sit_in_the_collapsed_advanced_group(form: ConfigForm) -> None:
    marked = {
        path
        for path, info in schema_leaves(RunConfig).items()
        if isinstance(info.json_schema_extra, dict) and info.json_schema_extra.get("advanced")
    }
    assert marked and form.advanced_paths == marked
    for path, component in form.components.items():
        assert has_advanced_ancestor(component) == (path in marked), path


def test_config_to_widgets_to_config_round_trip() -> None:
    preset = load_config(PROJECT_ROOT / "assets" / "presets" / "demo.yaml")
    busy = parse_config(
        {
            "name": "x",
            "adapter": {"target_modules": ["q_proj", "v_proj"], "modules_to_save": ["lm_head"]},
            "data": {"placeholders": {"name": "Ada", "author": "B=C"}, "columns": {"output": "answer"}},
            "train": {"neftune_noise_alpha": 5.0, "save_total_limit": None, "max_steps": 7},
            "launch": {"threads_per_process": 2},
        }
    )
    for config in (RunConfig(), preset, busy):
        values = config_to_values(config)
        assert values_to_config(values) == config


def test_widget_text_is_read_back_into_config_values() -> None:
    specs = {spec.path: spec for spec in leaf_specs()}
    assert from_widget(specs["adapter.target_modules"], " q_proj, v_proj ") == "q_proj, v_proj"
    assert from_widget(specs["adapter.modules_to_save"], "lm_head, embed_tokens,") == ["lm_head", "embed_tokens"]
    assert from_widget(specs["data.placeholders"], "name = Ada\n\nauthor=Bo") == {"name": "Ada", "author": "Bo"}
    assert from_widget(specs["data.placeholders"], '{"name": "Ada"}') == {"name": "Ada"}
    assert from_widget(specs["data.max_samples"], "") is None
    assert from_widget(specs["data.max_samples"], "12") == 12
    assert from_widget(specs["train.max_steps"], 3.0) == 3  # the browser sends 3.0 for an int field
    assert from_widget(specs["model.revision"], "") is None
    values = default_values()
    values.update({"adapter.target_modules": "q_proj,v_proj", "name": ""})
    config = values_to_config(values)
    assert config.adapter.target_modules == ["q_proj", "v_proj"] and config.name is None


def test_bad_values_give_one_message_per_field() -> None:
    values = default_values()
    values.update(
        {
            "train.learning_rate": -1,
            "train.max_steps": 2.5,
            "data.placeholders": "no equals sign",
            "data.max_samples": "many",
            "adapter.r": None,
        }
    )
    with pytest.raises(ConfigError) as caught:
        values_to_config(values)
    errors = caught.value.by_field()
    assert errors["train.learning_rate"] == "must be > 0.0"
    assert errors["train.max_steps"] == "must be a whole number"
    assert errors["data.placeholders"] == "line 1: write key=value"
    assert errors["data.max_samples"] == "must be a number"
    assert errors["adapter.r"]


def test_cross_field_errors_land_on_their_field() -> None:
    values = default_values()
    values.update({"quantization.mode": "4bit", "adapter.method": "full"})
    with pytest.raises(ConfigError) as caught:
        values_to_config(values)
    placed, unplaced = place_errors(caught.value.by_field(), [spec.path for spec in leaf_specs()])
    assert "quantization.mode" in placed and not unplaced
    placed, unplaced = place_errors({"adapter.modules_to_save.0": "bad", "": "whole file"}, ["adapter.modules_to_save"])
    assert placed == {"adapter.modules_to_save": "bad"} and unplaced == ["whole file"]


def test_error_slots_show_messages_next_to_their_fields(form: ConfigForm) -> None:
    updates, unplaced = form.error_updates({"train.learning_rate": "must be > 0.0", "": "general"})
    by_path = dict(zip(form.paths, updates, strict=True))
    assert by_path["train.learning_rate"]["visible"] is True
    assert "must be &gt; 0.0" in by_path["train.learning_rate"]["value"]  # escaped: messages may quote input
    assert all(update["visible"] is False for path, update in by_path.items() if path != "train.learning_rate")
    assert unplaced == ["general"]


class TrainPlus(TrainSection):
    """The train section with a knob added after the studio was written."""

    new_knob: int = Field(3, ge=1, le=9, description="A knob added later.", json_schema_extra=advanced())
    new_mode: Literal["a", "b"] = Field("a", description="A mode added later.")


class ExtraSection(Section):
    """A section added later."""

    level: float = Field(0.5, gt=0, lt=1, description="How much.")


class RunConfigPlus(RunConfig):
    train: TrainPlus = Field(default_factory=TrainPlus, description="The training loop.")
    extra: ExtraSection = Field(default_factory=ExtraSection, description="Something new.")


def test_a_field_or_section_added_to_the_config_gets_its_widget_without_other_edits() -> None:
    form = render(RunConfigPlus)
    assert set(form.components) == set(schema_leaves(RunConfigPlus))
    knob = form.components["train.new_knob"]
    assert isinstance(knob, gr.Number) and (knob.minimum, knob.maximum, knob.precision) == (1, 9, 0)
    assert knob.label == "New knob" and knob.info == "A knob added later."
    assert has_advanced_ancestor(knob)
    assert isinstance(form.components["train.new_mode"], gr.Dropdown)
    assert isinstance(form.components["extra.level"], gr.Number)
    config = RunConfigPlus(train=TrainPlus(new_knob=7, new_mode="b"), extra=ExtraSection(level=0.25))
    assert values_to_config(config_to_values(config), RunConfigPlus) == config
    values = config_to_values(config)
    values["train.new_knob"] = 12
    with pytest.raises(ConfigError) as caught:
        values_to_config(values, RunConfigPlus)
    assert caught.value.by_field() == {"train.new_knob": "must be <= 9"}


def test_render_rest_places_fields_the_layout_forgot() -> None:
    with gr.Blocks():
        form = ConfigForm()
        form.render_section("model")
        form.render_rest()
    assert set(form.components) == set(form.paths)
