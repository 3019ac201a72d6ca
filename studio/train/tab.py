"""The Train tab: a form generated from RunConfig, a dataset check, a live YAML / CLI preview, and Start.

Layout: the form on the left (model, quantization, adapter, the dataset panel, the training loop and launch,
in two to four columns); actions on the right (run name and Start, estimate, preview, config files).
The dataset panel's widgets are built here; its checks are plain functions in studio.train.dataset.
Handlers are thin: they turn positional widget values into ``path -> value`` and call the plain functions of
studio.train.actions and studio.train.dataset. Form events use ``preprocess=False`` so that an out-of-range
number reaches pydantic and comes back as a message next to its field instead of a Gradio error toast.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import gradio as gr

from studio import lanes
from studio.context import StudioContext
from studio.demo.policy import LOCKED, PATH_FIELDS, visitor_uploads
from studio.form.schema import FieldSpec
from studio.form.widgets import ConfigForm, make_widget
from studio.train import actions, eval_pairing, starting
from studio.train import dataset as dp
from studio.train import dataset_list as dl
from studio.train import rewards as rw

START_LABEL = "Start training"
# The tab's events are UI plumbing with ~70 positional inputs, not an API worth publishing.
PRIVATE: dict[str, Any] = {"api_visibility": "private"}
# Raw widget values: Gradio's Number preprocessing would turn an out-of-range value into an error toast.
RAW: dict[str, Any] = {"preprocess": False, **PRIVATE}


def _model_picker(ctx: StudioContext) -> Any:
    """model.name_or_path as a combo box: the demo model and recent ones, or any path / hub id typed in."""

    def factory(spec: FieldSpec, value: Any) -> gr.Dropdown:
        demo = ctx.policy.enabled
        return gr.Dropdown(
            choices=actions.model_choices(ctx.workspace, ctx.policy),
            value=value,
            allow_custom_value=not demo,
            interactive=not demo,
            label="Base model",
            info=ctx.policy.help_for(spec) if demo else spec.help + " Pick a recent one or type a path / hub id.",
            elem_id="cfg-model-name_or_path",
        )

    return factory


def _init_from_picker(ctx: StudioContext) -> Any:
    """model.init_from as a combo box: the workspace's finished runs with weights (listed again each time it gets
    the focus, see _wire_init_from), or a run directory / checkpoint path typed in."""

    demo = ctx.policy.enabled

    def factory(spec: FieldSpec, value: Any) -> gr.Dropdown:
        return gr.Dropdown(
            # In the demo nobody is known at build time: the visitor's own runs are listed on focus.
            choices=actions.init_from_choices(ctx.workspace, ctx.policy),
            value=value,
            allow_custom_value=not demo,  # a visitor names no path on the server
            label="Start from run",
            info=ctx.policy.help_for(spec),
            elem_id="cfg-model-init_from",
        )

    return factory


def _wire_init_from(ctx: StudioContext, form: ConfigForm) -> None:
    """List the runs to start from again when the picker gets the focus: runs finish while the page is open (in
    the demo, the visitor's own runs)."""
    picker = form.components["model.init_from"]
    picker.focus(
        lambda visitor: gr.update(choices=actions.init_from_choices(ctx.workspace, ctx.policy, visitor)),
        ctx.visitor,
        picker,
        show_progress="hidden",
        concurrency_limit=None,  # a directory listing: milliseconds
        **PRIVATE,
    )


def _demo_overrides(ctx: StudioContext) -> dict[str, Any]:
    """In demo mode: fixed fields and the dataset paths shown read-only, capped fields with their limit in the
    help text. Nothing outside demo mode."""
    policy = ctx.policy
    if not policy.enabled:
        return {}
    labels = {"data.path": "Dataset (a bundled set or your upload)", "data.eval_path": "Eval file (a bundled set)"}

    def factory(spec: FieldSpec, value: Any) -> Any:
        shown = dataclasses.replace(spec, help=policy.help_for(spec), label=labels.get(spec.path, spec.label))
        return make_widget(shown, value, interactive=spec.path not in (*LOCKED, *PATH_FIELDS))

    return dict.fromkeys([*LOCKED, *PATH_FIELDS, *policy.caps()], factory)


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


@dataclasses.dataclass
class DatasetPanel:
    """The components of the dataset panel that the tab wires to other events."""

    path: Any  # the data.path textbox (a form field)
    upload: Any
    bundled: Any
    check_button: Any
    summary: Any
    examples: Any
    error: Any
    use_max_length: Any  # a button that sets train.max_length to the check's suggestion, shown when there is one
    suggestion: Any  # gr.State: that suggestion
    notice: Any  # what the change of training file did to the eval file (studio.train.eval_pairing)
    seen: Any  # gr.State: the (training path, eval path) of the last check
    datasets: DatasetList  # the controls of several datasets in data.path

    @property
    def outputs(self) -> list[Any]:
        """The components a dataset check writes."""
        return [self.summary, self.examples, self.error, self.use_max_length, self.suggestion]


@dataclasses.dataclass
class DatasetList:
    """The controls that make data.path a list of datasets (studio.train.dataset_list) and edit each one's weight
    and cap; the list itself is the data.path box's YAML."""

    add: Any  # "+ Add another dataset"
    box: Any  # the group below, shown while data.path holds a list
    table: Any
    entry: Any  # which dataset the weight and cap below are for
    weight: Any
    cap: Any
    apply: Any
    remove: Any
    note: Any


def build_dataset_panel(form: ConfigForm, title: str = "Dataset") -> DatasetPanel:
    """Render the data section (from the schema) beside the check results; returns the panel's components."""
    with gr.Accordion(title, open=True, elem_classes=["ts-section"]), gr.Row(equal_height=False):
        with gr.Column(scale=1, min_width=320):
            with gr.Row(equal_height=False):
                bundled = gr.Dropdown(
                    choices=dp.bundled_datasets(),
                    value=None,
                    label="Bundled sets",
                    info="Demo data shipped with the studio, and the files uploaded before (listed after them).",
                    scale=2,
                )
                upload = gr.UploadButton(
                    "Upload a file…", file_types=list(dp.UPLOAD_SUFFIXES), size="sm", scale=1, min_width=120
                )
            form.render_fields(["data.path"], columns=1)
            datasets = _build_dataset_list(form.components["data.path"].value)
            form.render_fields(["data.format"], columns=1)
            form.render_children(form.section("data"), columns=2)
        with gr.Column(scale=1, min_width=320):
            check_button = gr.Button("Check dataset", size="sm")
            notice = gr.Markdown(elem_classes=["ts-data-notice"])
            error = gr.Markdown(visible=True, elem_classes=["ts-data-error"])
            summary = gr.Markdown(
                "Pick a dataset, then press **Check dataset** to see its rows as the model sees them."
            )
            use_max_length = gr.Button("Use max length", size="sm", visible=False, elem_id="train-use-max-length")
            examples = gr.HTML(js_on_load=None, elem_classes=["ts-examples"])
    seen = gr.State((form.components["data.path"].value, form.components["data.eval_path"].value))
    parts = {"use_max_length": use_max_length, "suggestion": gr.State(None), "notice": notice, "seen": seen}
    parts["datasets"] = datasets
    return DatasetPanel(form.components["data.path"], upload, bundled, check_button, summary, examples, error, **parts)


def _build_dataset_list(path: Any) -> DatasetList:
    """ "+ Add another dataset", and while data.path holds a list: its table, and each dataset's weight and cap."""
    rows = dl.table_rows(path)
    add = gr.Button("+ Add another dataset", size="sm", elem_id="train-add-dataset")
    note = gr.Markdown(elem_id="train-dataset-list-note")
    with gr.Group(visible=bool(rows), elem_id="train-dataset-list") as box:
        table = gr.Dataframe(value=rows, headers=dl.TABLE_HEADERS, interactive=False, show_label=False)
        with gr.Row(equal_height=False):
            entry = gr.Dropdown(choices=dl.entry_choices(path), value=None, label="Dataset to change", scale=2)
            weight = make_widget(dl.entry_spec("weight"), 1.0, elem_id="train-dataset-weight")
            cap = make_widget(dl.entry_spec("max_samples"), "", elem_id="train-dataset-max-samples")
        with gr.Row():
            apply = gr.Button("Set weight and max samples", size="sm")
            remove = gr.Button("Remove from the list", size="sm", variant="stop")
    return DatasetList(add, box, table, entry, weight, cap, apply, remove, note)


def check_outputs(result: dp.DatasetCheck) -> list[Any]:
    """Outputs for ``DatasetPanel.outputs``."""
    tokens = result.max_length
    button = gr.update(visible=bool(tokens), value=f"Use max length {tokens:,}" if tokens else "Use max length")
    return [result.summary, result.examples, result.error, button, tokens]


def build_train_tab(ctx: StudioContext) -> ConfigForm:
    """Build the Train tab's components and events inside the current ``gr.Tab``; returns the form."""
    overrides = {
        **_demo_overrides(ctx),
        "model.name_or_path": _model_picker(ctx),
        **({} if ctx.policy.enabled else {"data.path": _relabel("Dataset file or hub id")}),
        "model.init_from": _init_from_picker(ctx),
    }
    first = actions.starting_values()
    form = ConfigForm(overrides=overrides, initial=first)
    with gr.Row(equal_height=False):
        with gr.Column(scale=3, min_width=520):
            form.render_section("model", columns=2)
            picker = _render_method(ctx, form, first)
            form.render_section("quantization", columns=4, open=False)
            form.render_section("adapter", columns=3)
            panel = build_dataset_panel(form)
            form.render_section("train", columns=3, title="Training")
            form.render_section("launch", columns=3)
            form.render_rest(columns=3, skip=["name"])
        with gr.Column(scale=2, min_width=360):
            side = _build_sidebar(ctx, form, first)
    _wire_form(ctx, form, panel, side)
    _wire_files(ctx, form, panel, side)
    _wire_dataset_list(ctx, form, panel)
    _wire_start(ctx, form, panel, side)
    _wire_init_from(ctx, form)
    _wire_reward_picker(ctx, form, picker)
    return form


def _render_method(ctx: StudioContext, form: ConfigForm, first: dict[str, Any]) -> RewardPicker:
    """The method picker with the chosen method's own knobs below it; the other methods' sections stay hidden
    (a section per method that has knobs: ``dpo:`` for dpo, ...). GRPO's rewards get their picker and check."""
    from engine.training.methods import METHODS

    with gr.Accordion("Method", open=True, elem_classes=["ts-section"]):
        form.render_fields(["method"])
        boxes: dict[str, Any] = {}
        for name in METHODS:
            if any(path.startswith(f"{name}.") for path in form.paths):
                with gr.Column(visible=first["method"] == name, elem_id=f"ts-method-{name}") as boxes[name]:
                    if name == "grpo":  # the rewards first, across the section, with their picker below
                        form.render_fields([rw.FIELD])
                        picker = _render_reward_picker(ctx)
                    form.render_children(form.section(name), columns=3)

    def show(method: str) -> list[Any]:
        return [gr.Column(visible=method == name) for name in boxes]

    form.components["method"].change(show, form.components["method"], list(boxes.values()), **PRIVATE)
    return picker


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
                choices=actions.config_files(ctx.workspace, ctx.policy),
                value=None,
                label="Load a preset or saved config",
                scale=3,
                elem_id="train-config-choice",
            )
            config_upload = gr.UploadButton("Upload YAML…", file_types=[".yaml", ".yml"], size="sm", scale=1)
        save_name = gr.Textbox(
            label="Save the form as",
            placeholder="name (saved in the workspace's configs/)",
            submit_btn="Save",
            max_lines=1,
            visible=not ctx.policy.enabled,  # visitors share the server: nothing of theirs is saved there
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


def _then_check(event: Any, ctx: StudioContext, form: ConfigForm, panel: DatasetPanel, source: str = "") -> None:
    """After ``event``, check the dataset: rows first (fast), then tokens and examples (loads the tokenizer).

    The rows check first lets the eval path follow a new training path (studio.train.eval_pairing; ``source``
    says what made the event), so both checks see the eval path that stays.
    """

    def check(visitor: str | None, values: dict[str, Any], with_tokens: bool) -> list[Any]:
        return check_outputs(actions.check_data(values, ctx.workspace, ctx.policy, visitor, with_tokens))

    def check_rows(seen: Any, visitor: str | None, *args: Any) -> list[Any]:
        values = form.values(args)
        follow = eval_pairing.follow_training_path(seen, values["data.path"], values["data.eval_path"], source)
        values["data.eval_path"] = values["data.eval_path"] if follow.eval_path is None else follow.eval_path
        shown = [gr.skip() if follow.eval_path is None else follow.eval_path, follow.seen, _or_skip(follow.note)]
        return check(visitor, values, False) + shown

    inputs = [ctx.visitor, *form.inputs]
    lane = {**RAW, **lanes.DATASET_CHECK}
    follow_outputs = [form.components["data.eval_path"], panel.seen, panel.notice]
    quick = event.then(check_rows, [panel.seen, *inputs], panel.outputs + follow_outputs, **lane)
    quick.then(lambda visitor, *args: check(visitor, form.values(args), True), inputs, panel.outputs, **lane)


def _or_skip(value: Any) -> Any:
    """``value`` as an output, or leave the component as it is for None."""
    return gr.skip() if value is None else value


@dataclasses.dataclass
class RewardPicker:
    """Below GRPO's rewards box: a kind to add, Add, Check, and the check's result."""

    kind: Any
    add: Any
    check: Any
    result: Any


def _render_reward_picker(ctx: StudioContext) -> RewardPicker:
    with gr.Row(equal_height=True):
        kind = gr.Dropdown(
            rw.reward_choices(ctx.policy), value="exact_match", label="Reward to add", scale=3, elem_id="reward-kind"
        )
        add = gr.Button("Add reward", size="sm", scale=1, elem_id="reward-add")
        check = gr.Button("Check rewards", size="sm", scale=1, elem_id="reward-check")
    return RewardPicker(kind, add, check, gr.Markdown(elem_id="reward-check-result"))


def _wire_reward_picker(ctx: StudioContext, form: ConfigForm, picker: RewardPicker) -> None:
    """Add a filled-in reward of the picked kind to the rewards box; check every reward on the data's first rows
    (custom files load and run once) without starting anything."""
    box = form.components[rw.FIELD]

    def on_add(text: str, picked: str) -> Any:
        try:
            return rw.add_reward(text, picked)
        except ValueError as exc:
            gr.Warning(str(exc))
            return gr.skip()

    def on_check(visitor: str | None, *args: Any) -> str:
        return rw.check_rewards_message(form.values(args), ctx.workspace, ctx.policy, visitor)

    picker.add.click(on_add, [box, picker.kind], box, **RAW)
    picker.check.click(on_check, [ctx.visitor, *form.inputs], picker.result, **RAW, **lanes.REWARD_CHECK)


def _wire_form(ctx: StudioContext, form: ConfigForm, panel: DatasetPanel, side: Sidebar) -> None:
    """Live preview and per-field errors on every change; the dataset check; the estimate."""
    inputs = [ctx.visitor, *form.inputs]

    def checked(visitor: str | None, args: tuple[Any, ...]) -> actions.Preview:
        uploads = visitor_uploads(ctx.workspace, ctx.policy, visitor)
        return actions.preview(form.values(args), ctx.workspace, ctx.policy, uploads, visitor)

    def on_change(visitor: str | None, *args: Any) -> list[Any]:
        result = checked(visitor, args)
        slots, unplaced = form.error_updates(result.errors)
        return [result.yaml, result.command, _problems(unplaced), *slots]

    gr.on(
        [component.change for component in form.inputs],
        on_change,
        inputs=inputs,
        outputs=[side.yaml, side.command, side.problems, *form.slots],
        show_progress="hidden",
        trigger_mode="always_last",
        **RAW,
    )
    # Text fields trigger on blur / Enter, not on every keystroke; the format dropdown on a user's pick.
    columns = [form.components[p] for p in form.paths if p.startswith("data.columns.") or p == "data.eval_path"]
    # The method too: whether the data fits is a question of the method (preference data trains with dpo).
    picks = [form.components[path].input for path in ("data.format", "method")]
    triggers = [panel.path.submit, panel.path.blur, *picks, panel.check_button.click]
    _then_check(gr.on(triggers + [c.blur for c in columns], None, show_progress="hidden", **PRIVATE), ctx, form, panel)

    def on_use_max_length(tokens: int | None) -> Any:
        return tokens or gr.skip()

    use = panel.use_max_length.click(on_use_max_length, panel.suggestion, form.components["train.max_length"], **RAW)
    _then_check(use, ctx, form, panel)

    def on_estimate(visitor: str | None, *args: Any) -> list[Any]:
        from studio.train.estimate import estimate_run

        result = checked(visitor, args)
        outcome = estimate_run(result.config) if result.config is not None else None
        errors = outcome.errors if outcome else result.errors
        slots, unplaced = form.error_updates(ctx.policy.shown(errors, ctx.workspace))  # a dataset error names a file
        message = outcome.markdown if outcome else "❌ Fix the fields marked in the form first."
        return [ctx.policy.shown(message, ctx.workspace), _problems(unplaced), *slots]

    outputs = [side.estimate, side.problems, *form.slots]
    side.estimate_button.click(on_estimate, inputs, outputs, **RAW, **lanes.ESTIMATE)


def _wire_files(ctx: StudioContext, form: ConfigForm, panel: DatasetPanel, side: Sidebar) -> None:
    """Dataset upload / bundled pick, and config load / save."""
    visitor_input = ctx.visitor

    def on_upload(path: str | None, visitor: str | None, current: Any) -> list[Any]:
        if not path:
            return [gr.skip(), "", gr.skip()]
        copied, error = actions.upload_dataset(path, ctx.workspace, ctx.policy, visitor)
        # The upload is listed for reuse; while data.path holds a list of datasets it joins the list.
        choices = gr.update(choices=dl.dataset_choices(ctx.workspace, ctx.policy, visitor))
        return [gr.skip() if copied is None else dl.add_dataset(current, copied), error, choices]

    upload_outputs = [panel.path, panel.error, panel.bundled]
    upload = panel.upload.upload(on_upload, [panel.upload, visitor_input, panel.path], upload_outputs, **PRIVATE)
    _then_check(upload, ctx, form, panel)

    def on_pick(choice: str | None, current: Any) -> Any:
        return dl.add_dataset(current, choice) if choice else gr.skip()

    pick = panel.bundled.input(on_pick, [panel.bundled, panel.path], panel.path, **PRIVATE)
    _then_check(pick, ctx, form, panel)
    # Uploads of an earlier page life (or another tab) are listed each time the picker gets the focus.
    panel.bundled.focus(
        lambda visitor: gr.update(choices=dl.dataset_choices(ctx.workspace, ctx.policy, visitor)),
        visitor_input,
        panel.bundled,
        show_progress="hidden",
        concurrency_limit=None,  # a directory listing: milliseconds
        **PRIVATE,
    )

    def on_load(path: str | None, visitor: str | None) -> list[Any]:
        uploads = visitor_uploads(ctx.workspace, ctx.policy, visitor)
        values, message = actions.load_config_values(path, ctx.workspace, ctx.policy, uploads)
        return [message, *(form.value_updates(values) if values else [gr.skip()] * len(form.paths))]

    load_outputs = [side.config_message, *form.inputs]
    for source, trigger in (
        (side.config_choice, side.config_choice.input),
        (side.config_upload, side.config_upload.upload),
    ):
        loaded = trigger(on_load, [source, visitor_input], load_outputs, **PRIVATE)
        _then_check(loaded, ctx, form, panel, eval_pairing.LOADED)  # a config brings its own eval path

    def on_save(name: str, *args: Any) -> list[Any]:
        _, download, message = actions.save_config_as(form.values(args), name or "", ctx.workspace, ctx.policy)
        shown = gr.update(value=str(download), visible=True) if download else gr.update(visible=False)
        return [message, shown, gr.update(choices=actions.config_files(ctx.workspace, ctx.policy))]

    outputs = [side.config_message, side.download, side.config_choice]
    side.save_name.submit(on_save, [side.save_name, *form.inputs], outputs, **RAW)
    # The list is read again on every page load (no triggers: gr.on runs at load), so a config saved in an
    # earlier page life, or from another browser tab, is listed after a reload, not only those of server start.
    gr.on(
        None,
        lambda: gr.update(choices=actions.config_files(ctx.workspace, ctx.policy)),
        None,
        side.config_choice,
        show_progress="hidden",
        concurrency_limit=None,  # a directory listing: milliseconds
        **PRIVATE,
    )


def _wire_dataset_list(ctx: StudioContext, form: ConfigForm, panel: DatasetPanel) -> None:
    """The list of datasets: its table follows the data.path box; add, set and remove rewrite the box, then check."""
    controls = panel.datasets

    def show(path: Any) -> list[Any]:
        rows = dl.table_rows(path)
        return [rows, gr.update(choices=dl.entry_choices(path), value=None), gr.update(visible=bool(rows))]

    quiet = {"show_progress": "hidden", **PRIVATE}
    panel.path.change(show, panel.path, [controls.table, controls.entry, controls.box], **quiet)
    controls.entry.input(dl.entry_settings, [panel.path, controls.entry], [controls.weight, controls.cap], **quiet)
    edits = [
        controls.add.click(dl.start_list, panel.path, [panel.path, controls.note], **RAW),
        controls.apply.click(
            dl.set_dataset,
            [panel.path, controls.entry, controls.weight, controls.cap],
            [panel.path, controls.note],
            **RAW,
        ),
        controls.remove.click(dl.remove_dataset, [panel.path, controls.entry], [panel.path, controls.note], **RAW),
    ]
    for edit in edits:
        _then_check(edit, ctx, form, panel)


def _wire_start(ctx: StudioContext, form: ConfigForm, panel: DatasetPanel, side: Sidebar) -> None:
    """Start: disable the button, validate and start (one at a time; queued in demo mode), re-enable; on success
    show the Monitor."""
    links = [component for component in (ctx.current_run, ctx.tabs) if component is not None]

    def on_start(visitor: str | None, *args: Any) -> list[Any]:
        result = starting.start_run(form.values(args), ctx.workspace, policy=ctx.policy, visitor=visitor)
        slots, unplaced = form.error_updates(result.errors)
        data_error = dp.error_markdown(result.data_error) if result.data_error else gr.skip()
        linked: list[Any] = [gr.skip()] * len(links)
        picker: Any = gr.skip()
        if result.run_dir is not None:
            linked = [str(result.run_dir) if c is ctx.current_run else gr.Tabs(selected="monitor") for c in links]
            picker = gr.update(choices=actions.model_choices(ctx.workspace, ctx.policy))
            data_error = ""
        return [result.message, _problems(unplaced), data_error, picker, *slots, *linked]

    model = form.components["model.name_or_path"]
    outputs = [side.start_message, side.problems, panel.error, model, *form.slots, *links]
    quiet = {"show_progress": "hidden", **PRIVATE}
    disable = side.start.click(
        lambda: gr.update(interactive=False, value="Starting…"), None, side.start, queue=False, **quiet
    )
    started = disable.then(on_start, [ctx.visitor, *form.inputs], outputs, **RAW, **lanes.START)
    started.then(lambda: gr.update(interactive=True, value=START_LABEL), None, side.start, **quiet)


def _problems(lines: list[str]) -> str:
    """Problems that belong to no single field (cross-section rules, the whole file)."""
    return "\n".join(f"⚠️ {line}  " for line in lines)
