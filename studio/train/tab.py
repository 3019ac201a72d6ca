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
import pandas as pd

from studio import lanes
from studio.context import StudioContext
from studio.demo.policy import LOCKED, VISITOR_DATA_FIELDS, visitor_uploads
from studio.form.schema import FieldSpec, leaf_specs
from studio.form.widgets import ConfigForm, make_widget
from studio.i18n.catalog import SOURCE, key, text
from studio.i18n.widgets import marked, request_language, t
from studio.train import actions, eval_pairing, starting
from studio.train import dataset as dp
from studio.train import dataset_list as dl
from studio.train import rewards as rw

START_LABEL, STARTING = "train.start", "train.starting"  # keys of the Start button's two labels
FIX_FIRST, USE_MAX_LENGTH = key("train.estimate.fix_first"), key("train.use_max_length")
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
            label=t("train.base_model"),
            info=ctx.policy.help_for(spec) if demo else t("train.base_model.help"),
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
            label=t("train.init_from"),
            info=ctx.policy.help_for(spec) if demo else t("field.model.init_from.help"),
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
    labels = {"data.path": t("train.demo_dataset"), "data.eval_path": t("train.demo_eval_file")}

    def factory(spec: FieldSpec, value: Any) -> Any:
        words = {"label": labels[spec.path]} if spec.path in labels else {}
        if policy.has_own_help(spec):  # in English here: said again in the page's language as it loads
            words["info"] = policy.help_for(spec)
        interactive = spec.path not in (*LOCKED, *VISITOR_DATA_FIELDS)
        return make_widget(spec, value, interactive=interactive, **words)

    return dict.fromkeys([*LOCKED, *VISITOR_DATA_FIELDS, *policy.caps()], factory)


def _relabel(label: str) -> Any:
    """The default widget under another label (a key)."""
    return lambda spec, value: make_widget(spec, value, label=t(label))


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


def build_dataset_panel(form: ConfigForm, title: str = "train.dataset") -> DatasetPanel:
    """Render the data section (from the schema) beside the check results; returns the panel's components.
    ``title`` is the key of its heading."""
    with gr.Accordion(t(title), open=True, elem_classes=["ts-section"]), gr.Row(equal_height=False):
        with gr.Column(scale=1, min_width=320):
            with gr.Row(equal_height=False):
                bundled = gr.Dropdown(
                    choices=dp.bundled_datasets(),
                    value=None,
                    label=t("train.bundled"),
                    info=t("train.bundled.help"),
                    elem_id="train-bundled",
                    scale=2,
                )
                upload = gr.UploadButton(
                    t("train.upload"), file_types=list(dp.UPLOAD_SUFFIXES), size="sm", scale=1, min_width=120
                )
            form.render_fields(["data.path"], columns=1)
            datasets = _build_dataset_list(form.components["data.path"].value)
            form.render_fields(["data.format"], columns=1)
            form.render_children(form.section("data"), columns=2)
        with gr.Column(scale=1, min_width=320):
            check_button = gr.Button(t("train.check_dataset"), size="sm", elem_id="train-check-dataset")
            notice = gr.Markdown(elem_classes=["ts-data-notice"])
            error = gr.Markdown(visible=True, elem_classes=["ts-data-error"])
            summary = gr.Markdown(t("train.check_dataset.hint"))
            use_max_length = gr.Button(
                t("train.use_max_length"), size="sm", visible=False, elem_id="train-use-max-length"
            )
            examples = gr.HTML(js_on_load=None, elem_classes=["ts-examples"])
    seen = gr.State((form.components["data.path"].value, form.components["data.eval_path"].value))
    parts = {"use_max_length": use_max_length, "suggestion": gr.State(None), "notice": notice, "seen": seen}
    parts["datasets"] = datasets
    return DatasetPanel(form.components["data.path"], upload, bundled, check_button, summary, examples, error, **parts)


def _build_dataset_list(path: Any) -> DatasetList:
    """ "+ Add another dataset", and while data.path holds a list: its table, and each dataset's weight and cap."""
    rows = dl.table_rows(path)
    add = gr.Button(t("train.add_dataset"), size="sm", elem_id="train-add-dataset")
    note = gr.Markdown(elem_id="train-dataset-list-note")
    with gr.Group(visible=bool(rows), elem_id="train-dataset-list") as box:
        table = gr.Dataframe(value=rows, headers=dl.TABLE_HEADERS, interactive=False, show_label=False)
        with gr.Row(equal_height=False):
            entry = gr.Dropdown(choices=dl.entry_choices(path), value=None, label=t("train.entry"), scale=2)
            entry_field = {"root": "dataset_field"}  # the words of a listed dataset's fields (DatasetEntry)
            weight = make_widget(dl.entry_spec("weight"), 1.0, elem_id="train-dataset-weight", **entry_field)
            cap = make_widget(dl.entry_spec("max_samples"), "", elem_id="train-dataset-max-samples", **entry_field)
        with gr.Row():
            apply = gr.Button(t("train.entry.apply"), size="sm", elem_id="train-dataset-apply")
            remove = gr.Button(t("train.entry.remove"), size="sm", variant="stop", elem_id="train-dataset-remove")
    return DatasetList(add, box, table, entry, weight, cap, apply, remove, note)


def check_outputs(result: dp.DatasetCheck) -> list[Any]:
    """Outputs for ``DatasetPanel.outputs``."""
    tokens = result.max_length
    label = marked(USE_MAX_LENGTH)
    button = gr.update(visible=bool(tokens), value=f"{label} {tokens:,}" if tokens else label)
    return [result.summary, result.examples, result.error, button, tokens]


def build_train_tab(ctx: StudioContext) -> ConfigForm:
    """Build the Train tab's components and events inside the current ``gr.Tab``; returns the form."""
    overrides = {
        **_demo_overrides(ctx),
        "model.name_or_path": _model_picker(ctx),
        **({} if ctx.policy.enabled else {"data.path": _relabel("train.dataset_path")}),
        "model.init_from": _init_from_picker(ctx),
    }
    first = actions.starting_values()
    form = ConfigForm(overrides=overrides, initial=first)
    with gr.Row(equal_height=False):
        with gr.Column(scale=3, min_width=520):
            form.render_section("model", columns=2)
            pickers = _render_method(ctx, form, first)
            form.render_section("quantization", columns=4, open=False)
            form.render_section("adapter", columns=3)
            panel = build_dataset_panel(form)
            form.render_section("train", columns=3, title="train.training")
            form.render_section("launch", columns=3)
            form.render_rest(columns=3, skip=["name"])
        with gr.Column(scale=2, min_width=360):
            side = _build_sidebar(ctx, form, first)
    _wire_form(ctx, form, panel, side)
    _wire_files(ctx, form, panel, side)
    _wire_dataset_list(ctx, form, panel)
    _wire_start(ctx, form, panel, side)
    _wire_init_from(ctx, form)
    for picker in pickers:
        _wire_reward_picker(ctx, form, picker)
    _wire_demo_help(ctx, form)
    return form


def _wire_demo_help(ctx: StudioContext, form: ConfigForm) -> None:
    """In demo mode, the fields whose help has a note of the demo's (its limits, with the demo's numbers, which the
    page's own translation cannot fill in) are built with it in English: said again in the page's language as the
    page loads."""
    policy = ctx.policy
    if not policy.enabled:
        return
    specs = [spec for spec in leaf_specs() if spec.path in form.components and policy.has_own_help(spec)]
    widgets = [form.components[spec.path] for spec in specs]

    def said(request: gr.Request) -> list[Any]:
        lang = request_language(request)
        if lang == SOURCE:
            return [gr.skip()] * len(widgets)
        return [gr.update(info=policy.help_for(spec, lang)) for spec in specs]

    gr.on(None, said, None, widgets, show_progress="hidden", concurrency_limit=None, **PRIVATE)


def _render_method(ctx: StudioContext, form: ConfigForm, first: dict[str, Any]) -> list[RewardPicker]:
    """The method picker with the chosen method's own knobs below it; the other methods' sections stay hidden
    (a section per method that has knobs: ``dpo:`` for dpo, ...). A method's rewards get their picker and check."""
    from engine.api import METHODS

    pickers = []
    with gr.Accordion(t("train.method"), open=True, elem_classes=["ts-section"]):
        form.render_fields(["method"])
        boxes: dict[str, Any] = {}
        for name, method in METHODS.items():
            if any(path.startswith(f"{name}.") for path in form.paths):
                with gr.Column(visible=first["method"] == name, elem_id=f"ts-method-{name}") as boxes[name]:
                    field = rw.rewards_field(method)
                    if field is not None:  # the rewards first, across the section, with their picker below
                        form.render_fields([field])
                        pickers.append(_render_reward_picker(ctx, field))
                    form.render_children(form.section(name), columns=3)

    def show(method: str) -> list[Any]:
        return [gr.Column(visible=method == name) for name in boxes]

    form.components["method"].change(show, form.components["method"], list(boxes.values()), **PRIVATE)
    return pickers


def _build_sidebar(ctx: StudioContext, form: ConfigForm, values: dict[str, Any]) -> Sidebar:
    first = actions.preview(values, ctx.workspace)
    with gr.Group():
        form.render_fields(["name"])
        start = gr.Button(t(START_LABEL), variant="primary", size="lg", elem_id="train-start")
    start_message = gr.Markdown(elem_id="train-start-message")
    problems = gr.Markdown(elem_classes=["ts-problems"])
    with gr.Accordion(t("train.size"), open=True):
        estimate_button = gr.Button(t("train.estimate"), size="sm")
        estimate = gr.Markdown(t("train.estimate.hint"))
    with gr.Tabs():
        with gr.Tab("YAML"):
            yaml_code = gr.Code(
                first.yaml, language="yaml", lines=14, max_lines=30, interactive=False, show_label=False
            )
        with gr.Tab(t("train.command_line")):
            command = gr.Code(
                first.command, language="shell", lines=2, interactive=False, wrap_lines=True, show_label=False
            )
    with gr.Accordion(t("train.config_files"), open=True):
        with gr.Row(equal_height=False):
            config_choice = gr.Dropdown(
                choices=actions.config_files(ctx.workspace, ctx.policy),
                value=None,
                label=t("train.config_choice"),
                scale=3,
                elem_id="train-config-choice",
            )
            config_upload = gr.UploadButton(t("train.upload_yaml"), file_types=[".yaml", ".yml"], size="sm", scale=1)
        save_name = gr.Textbox(
            label=t("train.save_as"),
            placeholder=t("train.save_as.placeholder"),
            submit_btn=t("train.save"),
            max_lines=1,
            visible=not ctx.policy.enabled,  # visitors share the server: nothing of theirs is saved there
        )
        download = gr.File(label=t("train.download"), interactive=False, visible=False, height=60)
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

    def check(visitor: str | None, values: dict[str, Any], with_tokens: bool, lang: str) -> list[Any]:
        return check_outputs(actions.check_data(values, ctx.workspace, ctx.policy, visitor, with_tokens, lang))

    def check_rows(request: gr.Request, seen: Any, visitor: str | None, *args: Any) -> list[Any]:
        lang = request_language(request)
        values = form.values(args)
        paths = values["data.path"], values["data.eval_path"]
        follow = eval_pairing.follow_training_path(seen, *paths, source, lang)
        values["data.eval_path"] = values["data.eval_path"] if follow.eval_path is None else follow.eval_path
        shown = [gr.skip() if follow.eval_path is None else follow.eval_path, follow.seen, _or_skip(follow.note)]
        return check(visitor, values, False, lang) + shown

    def check_tokens(request: gr.Request, visitor: str | None, *args: Any) -> list[Any]:
        return check(visitor, form.values(args), True, request_language(request))

    inputs = [ctx.visitor, *form.inputs]
    lane = {**RAW, **lanes.DATASET_CHECK}
    follow_outputs = [form.components["data.eval_path"], panel.seen, panel.notice]
    quick = event.then(check_rows, [panel.seen, *inputs], panel.outputs + follow_outputs, **lane)
    quick.then(check_tokens, inputs, panel.outputs, **lane)


def _or_skip(value: Any) -> Any:
    """``value`` as an output, or leave the component as it is for None."""
    return gr.skip() if value is None else value


@dataclasses.dataclass
class RewardPicker:
    """Below a method's rewards box (``field``): a kind to add, Add, Check, and the check's result."""

    field: str
    kind: Any
    add: Any
    check: Any
    result: Any


def _render_reward_picker(ctx: StudioContext, field: str) -> RewardPicker:
    owner = field.partition(".")[0]  # each method's picker has ids of its own: reward-add-<method>
    with gr.Row(equal_height=True):
        kind = gr.Dropdown(
            rw.reward_choices(ctx.policy),
            value="exact_match",
            label=t("train.reward_kind"),
            scale=3,
            elem_id=f"reward-kind-{owner}",
        )
        add = gr.Button(t("train.reward_add"), size="sm", scale=1, elem_id=f"reward-add-{owner}")
        check = gr.Button(t("train.reward_check"), size="sm", scale=1, elem_id=f"reward-check-{owner}")
    return RewardPicker(field, kind, add, check, gr.Markdown(elem_id=f"reward-check-result-{owner}"))


def _wire_reward_picker(ctx: StudioContext, form: ConfigForm, picker: RewardPicker) -> None:
    """Add a filled-in reward of the picked kind to the rewards box; check every reward on the data's first rows
    (custom files load and run once) without starting anything."""
    box = form.components[picker.field]

    def on_add(box: str, picked: str, request: gr.Request) -> Any:
        try:
            return rw.add_reward(box, picked)
        except rw.RewardBoxError as exc:
            gr.Warning(exc.said(request_language(request)))
            return gr.skip()

    def on_check(request: gr.Request, visitor: str | None, *args: Any) -> str:
        lang = request_language(request)
        return rw.check_rewards_message(form.values(args), ctx.workspace, ctx.policy, visitor, lang)

    picker.add.click(on_add, [box, picker.kind], box, **RAW)
    picker.check.click(on_check, [ctx.visitor, *form.inputs], picker.result, **RAW, **lanes.REWARD_CHECK)


def _wire_form(ctx: StudioContext, form: ConfigForm, panel: DatasetPanel, side: Sidebar) -> None:
    """Live preview and per-field errors on every change; the dataset check; the estimate."""
    inputs = [ctx.visitor, *form.inputs]

    def checked(visitor: str | None, args: tuple[Any, ...], lang: str) -> actions.Preview:
        uploads = visitor_uploads(ctx.workspace, ctx.policy, visitor)
        return actions.preview(form.values(args), ctx.workspace, ctx.policy, uploads, visitor, lang)

    def on_change(request: gr.Request, visitor: str | None, *args: Any) -> list[Any]:
        lang = request_language(request)
        result = checked(visitor, args, lang)
        slots, unplaced = form.error_updates(result.errors, lang)
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

    def on_estimate(request: gr.Request, visitor: str | None, *args: Any) -> list[Any]:
        from studio.train.estimate import estimate_run

        lang = request_language(request)
        result = checked(visitor, args, lang)
        outcome = estimate_run(result.config, lang) if result.config is not None else None
        errors = outcome.errors if outcome else result.errors
        slots, unplaced = form.error_updates(ctx.policy.shown(errors, ctx.workspace), lang)  # errors may name files
        message = outcome.markdown if outcome else text(FIX_FIRST, lang)
        return [ctx.policy.shown(message, ctx.workspace), _problems(unplaced), *slots]

    outputs = [side.estimate, side.problems, *form.slots]
    side.estimate_button.click(on_estimate, inputs, outputs, **RAW, **lanes.ESTIMATE)


def _wire_files(ctx: StudioContext, form: ConfigForm, panel: DatasetPanel, side: Sidebar) -> None:
    """Dataset upload / bundled pick, and config load / save."""
    visitor_input = ctx.visitor

    def on_upload(path: str | None, visitor: str | None, current: Any, request: gr.Request) -> list[Any]:
        if not path:
            return [gr.skip(), "", gr.skip()]
        copied, error = actions.upload_dataset(path, ctx.workspace, ctx.policy, visitor, request_language(request))
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

    def on_load(path: str | None, visitor: str | None, request: gr.Request) -> list[Any]:
        uploads = visitor_uploads(ctx.workspace, ctx.policy, visitor)
        lang = request_language(request)
        values, message = actions.load_config_values(path, ctx.workspace, ctx.policy, uploads, lang)
        return [message, *(form.value_updates(values) if values else [gr.skip()] * len(form.paths))]

    load_outputs = [side.config_message, *form.inputs]
    for source, trigger in (
        (side.config_choice, side.config_choice.input),
        (side.config_upload, side.config_upload.upload),
    ):
        loaded = trigger(on_load, [source, visitor_input], load_outputs, **PRIVATE)
        _then_check(loaded, ctx, form, panel, eval_pairing.LOADED)  # a config brings its own eval path

    def on_save(request: gr.Request, name: str, *args: Any) -> list[Any]:
        values, lang = form.values(args), request_language(request)
        _, download, message = actions.save_config_as(values, name or "", ctx.workspace, ctx.policy, lang)
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

    def show(path: Any, request: gr.Request) -> list[Any]:
        lang = request_language(request)
        rows = dl.table_rows(path, lang)
        table = pd.DataFrame(rows, columns=dl.table_headers(lang))  # its header in the page's language too
        return [table, gr.update(choices=dl.entry_choices(path), value=None), gr.update(visible=bool(rows))]

    def start_list(path: Any, request: gr.Request) -> tuple[Any, str]:
        return dl.start_list(path, request_language(request))

    def set_dataset(path: Any, index: Any, weight: Any, cap: Any, request: gr.Request) -> tuple[Any, str]:
        return dl.set_dataset(path, index, weight, cap, request_language(request))

    def remove_dataset(path: Any, index: Any, request: gr.Request) -> tuple[Any, str]:
        return dl.remove_dataset(path, index, request_language(request))

    quiet = {"show_progress": "hidden", **PRIVATE}
    panel.path.change(show, panel.path, [controls.table, controls.entry, controls.box], **quiet)
    controls.entry.input(dl.entry_settings, [panel.path, controls.entry], [controls.weight, controls.cap], **quiet)
    edits = [
        controls.add.click(start_list, panel.path, [panel.path, controls.note], **RAW),
        controls.apply.click(
            set_dataset,
            [panel.path, controls.entry, controls.weight, controls.cap],
            [panel.path, controls.note],
            **RAW,
        ),
        controls.remove.click(remove_dataset, [panel.path, controls.entry], [panel.path, controls.note], **RAW),
    ]
    for edit in edits:
        _then_check(edit, ctx, form, panel)


def _wire_start(ctx: StudioContext, form: ConfigForm, panel: DatasetPanel, side: Sidebar) -> None:
    """Start: disable the button, validate and start (one at a time; queued in demo mode), re-enable; on success
    show the Monitor."""
    links = [component for component in (ctx.current_run, ctx.tabs) if component is not None]

    def on_start(request: gr.Request, visitor: str | None, *args: Any) -> list[Any]:
        lang = request_language(request)
        result = starting.start_run(form.values(args), ctx.workspace, policy=ctx.policy, visitor=visitor, lang=lang)
        slots, unplaced = form.error_updates(result.errors, lang)
        data_error = dp.error_markdown(result.data_error) if result.data_error else gr.skip()
        linked: list[Any] = [gr.skip()] * len(links)
        picker: Any = gr.skip()
        if result.run_dir is not None:
            linked = [str(result.run_dir) if c is ctx.current_run else gr.Tabs(selected="monitor") for c in links]
            picker = gr.update(choices=actions.model_choices(ctx.workspace, ctx.policy))
            data_error = ""
        return [result.message, _problems(unplaced), data_error, picker, *slots, *linked, enabled()]

    model = form.components["model.name_or_path"]
    outputs = [side.start_message, side.problems, panel.error, model, *form.slots, *links, side.start]
    quiet = {"show_progress": "hidden", **PRIVATE}
    busy, idle = marked(STARTING), marked(START_LABEL)  # the page translates them

    def enabled() -> Any:
        return gr.update(interactive=True, value=idle)

    disable = side.start.click(lambda: gr.update(interactive=False, value=busy), None, side.start, queue=False, **quiet)
    started = disable.then(on_start, [ctx.visitor, *form.inputs], outputs, **RAW, **lanes.START)
    # Start comes back enabled with on_start's answer, not in an event of its own (each costs the browser's main
    # thread 65 ms or more, while the new run's first points are on their way); after a crash, by this one.
    started.failure(enabled, None, side.start, **quiet)


def _problems(lines: list[str]) -> str:
    """Problems that belong to no single field (cross-section rules, the whole file)."""
    return "\n".join(f"⚠️ {line}  " for line in lines)
