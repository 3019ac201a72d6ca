"""The Train tab: a form generated from RunConfig, a dataset check, a live YAML / CLI preview, and Start.

Layout: the form on the left (model, quantization, adapter, the dataset panel, the training loop and launch,
in two to four columns); actions on the right (run name and Start, estimate, preview, config files).
Handlers are thin: they turn positional widget values into ``path -> value`` and call the plain functions of
studio.train_actions and studio.dataset_panel. Form events use ``preprocess=False`` so that an out-of-range
number reaches pydantic and comes back as a message next to its field instead of a Gradio error toast.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import gradio as gr

from studio import dataset_panel as dp
from studio import train_actions as actions
from studio.context import StudioContext
from studio.form import FieldSpec
from studio.train_form_view import ConfigForm, make_widget

START_LABEL = "Start training"
# The tab's events are UI plumbing with ~70 positional inputs, not an API worth publishing.
PRIVATE: dict[str, Any] = {"api_visibility": "private"}
# Raw widget values: Gradio's Number preprocessing would turn an out-of-range value into an error toast.
RAW: dict[str, Any] = {"preprocess": False, **PRIVATE}


def _model_picker(ctx: StudioContext) -> Any:
    """model.name_or_path as a combo box: the demo model and recent ones, or any path / hub id typed in."""

    def factory(spec: FieldSpec, value: Any) -> gr.Dropdown:
        return gr.Dropdown(
            choices=actions.model_choices(ctx.workspace),
            value=value,
            allow_custom_value=True,
            label="Base model",
            info=spec.help + " Pick a recent one or type a path / hub id.",
            elem_id="cfg-model-name_or_path",
        )

    return factory


def _relabel(label: str) -> Any:
    """The default widget under another label."""
    return lambda spec, value: make_widget(dataclasses.replace(spec, label=label), value)


@dataclasses.dataclass
class Sidebar:
    """The right-hand column: Start, estimate, preview and config files."""

    start: Any
    start_message: Any
    problems: Any  # problems that belong to no single field
    estimate_button: Any
    estimate: Any
    yaml: Any
    command: Any
    config_choice: Any
    config_upload: Any
    save_name: Any
    download: Any
    config_message: Any


def build_train_tab(ctx: StudioContext) -> ConfigForm:
    """Build the Train tab's components and events inside the current ``gr.Tab``; returns the form."""
    overrides = {"model.name_or_path": _model_picker(ctx), "data.path": _relabel("Dataset file or hub id")}
    first = actions.starting_values()
    form = ConfigForm(overrides=overrides, initial=first)
    with gr.Row(equal_height=False):
        with gr.Column(scale=3, min_width=520):
            form.render_section("model", columns=2)
            form.render_section("quantization", columns=4, open=False)
            form.render_section("adapter", columns=3)
            panel = dp.build_dataset_panel(form)
            form.render_section("train", columns=3, title="Training")
            form.render_section("launch", columns=3)
            form.render_rest(columns=3, skip=["name"])
        with gr.Column(scale=2, min_width=360):
            side = _build_sidebar(ctx, form, first)
    _wire_form(ctx, form, panel, side)
    _wire_files(ctx, form, panel, side)
    _wire_start(ctx, form, panel, side)
    return form


def _build_sidebar(ctx: StudioContext, form: ConfigForm, values: dict[str, Any]) -> Sidebar:
    first = actions.preview(values, ctx.workspace)
    with gr.Group():
        form.render_fields(["name"])
        start = gr.Button(START_LABEL, variant="primary", size="lg", elem_id="train-start")
    start_message = gr.Markdown(elem_id="train-start-message")
    problems = gr.Markdown(elem_classes=["ts-problems"])
    with gr.Accordion("Size and memory", open=True):
        estimate_button = gr.Button("Estimate parameters and memory", size="sm")
        estimate = gr.Markdown("Counts trainable parameters on a weightless copy of the model.")
    with gr.Tabs():
        with gr.Tab("YAML"):
            yaml_code = gr.Code(
                first.yaml, language="yaml", lines=14, max_lines=30, interactive=False, show_label=False
            )
        with gr.Tab("Command line"):
            command = gr.Code(
                first.command, language="shell", lines=2, interactive=False, wrap_lines=True, show_label=False
            )
    with gr.Accordion("Config files", open=True):
        with gr.Row(equal_height=False):
            config_choice = gr.Dropdown(
                choices=actions.config_files(ctx.workspace),
                value=None,
                label="Load a preset or saved config",
                scale=3,
            )
            config_upload = gr.UploadButton("Upload YAML…", file_types=[".yaml", ".yml"], size="sm", scale=1)
        save_name = gr.Textbox(
            label="Save the form as",
            placeholder="name (saved in the workspace's configs/)",
            submit_btn="Save",
            max_lines=1,
        )
        download = gr.File(label="Download", interactive=False, visible=False, height=60)
        config_message = gr.Markdown()
    return Sidebar(
        start=start,
        start_message=start_message,
        problems=problems,
        estimate_button=estimate_button,
        estimate=estimate,
        yaml=yaml_code,
        command=command,
        config_choice=config_choice,
        config_upload=config_upload,
        save_name=save_name,
        download=download,
        config_message=config_message,
    )


def _then_check(event: Any, form: ConfigForm, panel: dp.DatasetPanel, workspace: Path) -> None:
    """After ``event``, check the dataset: rows first (fast), then tokens and examples (loads the tokenizer)."""

    def quick(*args: Any) -> list[Any]:
        return dp.check_outputs(dp.check_dataset(form.values(args), with_tokens=False, workspace=workspace))

    def full(*args: Any) -> list[Any]:
        return dp.check_outputs(dp.check_dataset(form.values(args), with_tokens=True, workspace=workspace))

    event.then(quick, form.inputs, panel.outputs, **RAW).then(full, form.inputs, panel.outputs, **RAW)


def _wire_form(ctx: StudioContext, form: ConfigForm, panel: dp.DatasetPanel, side: Sidebar) -> None:
    """Live preview and per-field errors on every change; the dataset check; the estimate."""

    def on_change(*args: Any) -> list[Any]:
        result = actions.preview(form.values(args), ctx.workspace)
        slots, unplaced = form.error_updates(result.errors)
        return [result.yaml, result.command, _problems(unplaced), *slots]

    gr.on(
        [component.change for component in form.inputs],
        on_change,
        inputs=form.inputs,
        outputs=[side.yaml, side.command, side.problems, *form.slots],
        show_progress="hidden",
        trigger_mode="always_last",
        **RAW,
    )
    # Text fields trigger on blur / Enter, not on every keystroke; the format dropdown on a user's pick.
    columns = [form.components[p] for p in form.paths if p.startswith("data.columns.") or p == "data.eval_path"]
    triggers = [panel.path.submit, panel.path.blur, form.components["data.format"].input, panel.check_button.click]
    _then_check(
        gr.on(triggers + [c.blur for c in columns], None, show_progress="hidden", **PRIVATE), form, panel, ctx.workspace
    )

    def on_estimate(*args: Any) -> list[Any]:
        from studio.train_estimate import estimate_run

        result = actions.preview(form.values(args), ctx.workspace)
        outcome = estimate_run(result.config) if result.config is not None else None
        errors = outcome.errors if outcome else result.errors
        slots, unplaced = form.error_updates(errors)
        message = outcome.markdown if outcome else "❌ Fix the fields marked in the form first."
        return [message, _problems(unplaced), *slots]

    outputs = [side.estimate, side.problems, *form.slots]
    side.estimate_button.click(on_estimate, form.inputs, outputs, **RAW)


def _wire_files(ctx: StudioContext, form: ConfigForm, panel: dp.DatasetPanel, side: Sidebar) -> None:
    """Dataset upload / bundled pick, and config load / save."""

    def on_upload(path: str | None) -> list[Any]:
        if not path:
            return [gr.skip(), ""]
        try:
            return [str(dp.copy_upload(path, ctx.workspace)), ""]
        except (ValueError, OSError) as exc:
            return [gr.skip(), dp.error_markdown(str(exc))]

    _then_check(
        panel.upload.upload(on_upload, panel.upload, [panel.path, panel.error], **PRIVATE), form, panel, ctx.workspace
    )
    pick = panel.bundled.input(lambda choice: choice or gr.skip(), panel.bundled, panel.path, **PRIVATE)
    _then_check(pick, form, panel, ctx.workspace)

    def on_load(path: str | None) -> list[Any]:
        values, message = actions.load_config_values(path, ctx.workspace)
        return [message, *(form.value_updates(values) if values else [gr.skip()] * len(form.paths))]

    load_outputs = [side.config_message, *form.inputs]
    _then_check(
        side.config_choice.input(on_load, side.config_choice, load_outputs, **PRIVATE), form, panel, ctx.workspace
    )
    _then_check(
        side.config_upload.upload(on_load, side.config_upload, load_outputs, **PRIVATE), form, panel, ctx.workspace
    )

    def on_save(name: str, *args: Any) -> list[Any]:
        _, download, message = actions.save_config_as(form.values(args), name or "", ctx.workspace)
        shown = gr.update(value=str(download), visible=True) if download else gr.update(visible=False)
        return [message, shown, gr.update(choices=actions.config_files(ctx.workspace))]

    outputs = [side.config_message, side.download, side.config_choice]
    side.save_name.submit(on_save, [side.save_name, *form.inputs], outputs, **RAW)


def _wire_start(ctx: StudioContext, form: ConfigForm, panel: dp.DatasetPanel, side: Sidebar) -> None:
    """Start: disable the button, validate and start (one at a time), re-enable; on success show the Monitor."""
    links = [component for component in (ctx.current_run, ctx.tabs) if component is not None]

    def on_start(*args: Any) -> list[Any]:
        result = actions.start_run(form.values(args), ctx.workspace)
        slots, unplaced = form.error_updates(result.errors)
        data_error = dp.error_markdown(result.data_error) if result.data_error else gr.skip()
        linked: list[Any] = [gr.skip()] * len(links)
        picker: Any = gr.skip()
        if result.run_dir is not None:
            linked = [str(result.run_dir) if c is ctx.current_run else gr.Tabs(selected="monitor") for c in links]
            picker = gr.update(choices=actions.model_choices(ctx.workspace))
            data_error = ""
        return [result.message, _problems(unplaced), data_error, picker, *slots, *linked]

    model = form.components["model.name_or_path"]
    outputs = [side.start_message, side.problems, panel.error, model, *form.slots, *links]
    quiet = {"show_progress": "hidden", **PRIVATE}
    disable = side.start.click(
        lambda: gr.update(interactive=False, value="Starting…"), None, side.start, queue=False, **quiet
    )
    started = disable.then(on_start, form.inputs, outputs, concurrency_limit=1, **RAW)
    started.then(lambda: gr.update(interactive=True, value=START_LABEL), None, side.start, **quiet)


def _problems(lines: list[str]) -> str:
    """Problems that belong to no single field (cross-section rules, the whole file)."""
    return "\n".join(f"⚠️ {line}  " for line in lines)
