"""The Train tab's components: the form's pickers (base model, the run to start from) and its fields in demo mode,
the method picker with each method's section and reward picker, the sections only some models read (vision), the
dataset panel, and the sidebar (Start, estimate, preview, config files). Built here; studio.train.tab lays them out
and wires their events.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import gradio as gr

from studio.context import StudioContext
from studio.demo.caller import Caller
from studio.demo.policy import LOCKED, VISITOR_DATA_FIELDS
from studio.form.schema import FieldSpec, SectionSpec
from studio.i18n.catalog import key
from studio.i18n.widgets import marked, t
from studio.train import actions
from studio.train import dataset as dp
from studio.train import dataset_list as dl
from studio.train import model_sections as ms
from studio.train import rewards as rw
from studio.train.form_widgets import ConfigForm, field_words, make_widget, widget_id

START_LABEL, STARTING = "train.start", "train.starting"  # keys of the Start button's two labels
USE_MAX_LENGTH = key("train.use_max_length")
# The tab's events are UI plumbing with ~70 positional inputs, not an API worth publishing.
PRIVATE: dict[str, Any] = {"api_visibility": "private"}
# Raw widget values: Gradio's Number preprocessing would turn an out-of-range value into an error toast.
RAW: dict[str, Any] = {"preprocess": False, **PRIVATE}


def _model_picker(ctx: StudioContext) -> Any:
    """model.name_or_path as a combo box: the bundled demo models and recent ones, or any path / hub id typed in
    (in demo mode a pick among the bundled ones)."""

    def factory(spec: FieldSpec, value: Any) -> gr.Dropdown:
        demo = ctx.policy.enabled
        return gr.Dropdown(
            choices=actions.model_choices(ctx.workspace, ctx.policy),
            value=value,
            allow_custom_value=not demo,
            label=t("train.base_model"),
            info=ctx.policy.help_for(spec) if demo else t("train.base_model.help"),
            elem_id="cfg-model-name_or_path",
        )

    return factory


def _init_from_picker(ctx: StudioContext) -> Any:
    """model.init_from as a combo box: the workspace's finished runs with weights (listed again each time it gets
    the focus, see studio.train.tab), or a run directory / checkpoint path typed in."""

    demo = ctx.policy.enabled

    def factory(spec: FieldSpec, value: Any) -> gr.Dropdown:
        return gr.Dropdown(
            # In the demo nobody is known at build time: the visitor's own runs are listed on focus.
            choices=actions.init_from_choices(Caller(ctx.workspace, ctx.policy)),
            value=value,
            allow_custom_value=not demo,  # a visitor names no path on the server
            label=t("train.init_from"),
            info=ctx.policy.help_for(spec) if demo else t("field.model.init_from.help"),
            elem_id="cfg-model-init_from",
        )

    return factory


def _model_or_run_picker(ctx: StudioContext) -> Any:
    """A field that names a model or a run (distill's teacher) as a combo box: the models and the workspace's
    finished runs (listed again each time it gets the focus, see studio.train.tab), or any path / hub id typed in
    (in demo mode a pick among the bundled models and the visitor's own runs)."""

    demo = ctx.policy.enabled

    def factory(spec: FieldSpec, value: Any) -> gr.Dropdown:
        words = field_words(spec)
        if demo:
            words["info"] = ctx.policy.help_for(spec)
        return gr.Dropdown(
            # In the demo nobody is known at build time: the visitor's own runs are listed on focus.
            choices=actions.model_or_run_choices(Caller(ctx.workspace, ctx.policy)),
            value=value,
            allow_custom_value=not demo,
            elem_id=widget_id(spec.path),
            **words,
        )

    return factory


def _watched_metric_picker(spec: FieldSpec, value: Any) -> gr.Dropdown:
    """Early stopping's metric as a combo box: the held-out metrics the methods list (eval_loss, a sampling
    method's eval_reward, ...; picking a method sets its own: Method.fitted), or any other eval key typed in."""
    from engine.api import METHODS

    listed = dict.fromkeys(metric.key for method in METHODS.values() for metric in method.held_out_metrics())
    return gr.Dropdown(
        choices=list(listed),
        value=value,
        allow_custom_value=True,
        elem_id=widget_id(spec.path),
        **field_words(spec),
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


def _rewards_boxes(ctx: StudioContext) -> dict[str, Any]:
    """Outside demo mode, each method's rewards box with help that says where a custom reward's relative file is
    read from (the workspace, where "Upload reward file" stores files); the demo takes no custom file."""
    from engine.api import METHODS

    if ctx.policy.enabled:
        return {}
    fields = [field for field in map(rw.rewards_field, METHODS.values()) if field is not None]
    return dict.fromkeys(fields, lambda spec, value: make_widget(spec, value, info=t("train.rewards.help")))


def field_overrides(ctx: StudioContext) -> dict[str, Any]:
    """The form's widgets other than the schema's own: the pickers, the rewards boxes, and in demo mode the fixed and
    capped fields."""
    return {
        **_demo_overrides(ctx),
        **_rewards_boxes(ctx),
        "model.name_or_path": _model_picker(ctx),
        **({} if ctx.policy.enabled else {"data.path": _relabel("train.dataset_path")}),
        "model.init_from": _init_from_picker(ctx),
        "train.early_stopping.metric": _watched_metric_picker,
        **dict.fromkeys(actions.MODEL_OR_RUN_FIELDS, _model_or_run_picker(ctx)),
    }


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
    fit: Any  # under the pickers: how many rows fit whole in max_length (studio.train.lengths.rows_that_fit)
    seen: Any  # gr.State: the (training path, eval path) of the last check
    datasets: DatasetList  # the controls of several datasets in data.path

    @property
    def outputs(self) -> list[Any]:
        """The components a dataset check writes."""
        return [self.summary, self.examples, self.error, self.use_max_length, self.suggestion, self.fit]


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
    accordion = gr.Accordion(t(title), open=True, elem_classes=["ts-section"])
    with accordion, form.within(title), gr.Row(equal_height=False):
        with gr.Column(scale=1, min_width=320):
            with gr.Row(equal_height=False):
                first = dp.bundled_datasets()
                bundled = gr.Dropdown(
                    choices=first,
                    # The set in use; an upload is listed, and shown, once the page has loaded (studio.train.tab).
                    value=dl.choice_in_use([(path, path) for path in first], form.initial("data.path")),
                    label=t("train.bundled"),
                    info=t("train.bundled.help"),
                    elem_id="train-bundled",
                    scale=2,
                )
                upload = gr.UploadButton(
                    t("train.upload"), file_types=list(dp.UPLOAD_SUFFIXES), size="sm", scale=1, min_width=120
                )
            fit = gr.Markdown(elem_id="train-rows-fit")  # said where the dataset is picked
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
    parts = {"use_max_length": use_max_length, "suggestion": gr.State(None), "notice": notice, "seen": seen, "fit": fit}
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
    return [result.summary, result.examples, result.error, button, tokens, result.fit]


def render_method(ctx: StudioContext, form: ConfigForm, first: dict[str, Any]) -> tuple[list[RewardPicker], Any]:
    """The method picker with the chosen method's own knobs below it; the other methods' sections stay hidden
    (a section per method that has knobs: ``dpo:`` for dpo, ...). A method's rewards get their picker and check.
    Returns the pickers and the note that says what the pick changed elsewhere (studio.train.method_fit)."""
    from engine.api import METHODS

    pickers = []
    with gr.Accordion(t("train.method"), open=True, elem_classes=["ts-section"]), form.within("train.method"):
        form.render_fields(["method"])
        note = gr.Markdown(elem_id="train-method-note")
        boxes: dict[str, Any] = {}
        for name, method in METHODS.items():
            if any(path.startswith(f"{name}.") for path in form.paths):
                with gr.Column(visible=first["method"] == name, elem_id=f"ts-method-{name}") as boxes[name]:
                    field = rw.rewards_field(method)
                    if field is not None:  # the rewards first, across the section, with their picker below
                        form.render_fields([field])
                        pickers.append(_render_reward_picker(ctx, field))
                    form.render_children(form.section(name), columns=3)

    # The page shows the picked method's section itself: a script, no server event (each costs the page a walk of
    # its component tree per output and status: studio.train.tab._wire_form).
    show = f"(method) => {json.dumps(list(boxes))}.map((name) => ({{__type__: 'update', visible: method === name}}))"
    form.components["method"].change(None, form.components["method"], list(boxes.values()), js=show, **PRIVATE)
    return pickers, note


def render_modality_sections(ctx: StudioContext, form: ConfigForm, first: dict[str, Any]) -> dict[str, Any]:
    """The config's sections named after a modality (the vision section), each in a box shown while the model field
    names a model of that modality, or one whose modality is unknown (studio.train.model_sections). Returns
    section -> box; studio.train.tab shows and hides them as the model changes."""
    sections = [child.path for child in form.tree.children if isinstance(child, SectionSpec)]
    names = ms.modality_sections(sections)
    shown = ms.shown_sections(first["model.name_or_path"], first["model.revision"], ctx.workspace, names)
    boxes: dict[str, Any] = {}
    for name in names:
        with gr.Column(visible=shown[name], elem_id=f"ts-modality-{name}") as boxes[name]:
            form.render_section(name, columns=2, hideable=True)
    return boxes


def build_sidebar(ctx: StudioContext, form: ConfigForm, values: dict[str, Any]) -> Sidebar:
    """The right-hand column: the run's name and Start, the size estimate, the YAML and command-line preview of
    ``values``, and the config files (load one, save the form as one)."""
    first = actions.preview(Caller(ctx.workspace), values)
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


@dataclasses.dataclass
class RewardPicker:
    """Below a method's rewards box (``field``): a kind to add, Add, Check, the upload of a reward file (None in demo
    mode, where custom rewards are refused), and the result of a check or upload."""

    field: str
    kind: Any
    add: Any
    check: Any
    result: Any
    upload: Any = None


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
        upload = None
        if not ctx.policy.enabled:  # strangers never run code in the demo
            upload = gr.UploadButton(
                t("train.reward_upload"),
                file_types=[".py"],
                size="sm",
                scale=1,
                elem_id=f"reward-upload-{owner}",
            )
    result = gr.Markdown(elem_id=f"reward-check-result-{owner}")
    return RewardPicker(field, kind, add, check, result, upload)
