"""The Train tab: a form generated from RunConfig, a dataset check, a live YAML / CLI preview, and Start.

Layout: the form on the left (model, quantization, adapter, vision while the model reads images, the dataset panel,
the training loop and launch, in two to four columns); actions on the right (run name and Start, estimate, preview,
config files). Its components are built in studio.train.widgets (the dataset panel's among them); its dataset checks
are plain functions in studio.train.dataset; here they are laid out and wired.
Handlers are thin: they turn positional widget values into ``path -> value`` and call the plain functions of
studio.train.actions and studio.train.dataset. Form events use ``preprocess=False`` so that an out-of-range
number reaches pydantic and comes back as a message next to its field instead of a Gradio error toast.
"""

from __future__ import annotations

from typing import Any

import gradio as gr
from gradio.context import get_blocks_context

from studio import lanes
from studio.context import StudioContext
from studio.demo.caller import Caller
from studio.form.schema import leaf_specs
from studio.i18n.catalog import SOURCE, key
from studio.i18n.widgets import marked
from studio.train import actions, eval_pairing, kept_form, method_fit, starting
from studio.train import dataset as dp
from studio.train import dataset_list as dl
from studio.train import model_sections as ms
from studio.train import rewards as rw
from studio.train.dataset_widgets import or_skip, then_check, wire_dataset_list
from studio.train.form_widgets import ConfigForm
from studio.train.widgets import (
    PRIVATE,
    RAW,
    START_LABEL,
    STARTING,
    DatasetPanel,
    RewardPicker,
    Sidebar,
    build_dataset_panel,
    build_sidebar,
    field_overrides,
    render_method,
    render_modality_sections,
)

FIX_FIRST = key("train.estimate.fix_first")


def build_train_tab(ctx: StudioContext) -> ConfigForm:
    """Build the Train tab's components and events inside the current ``gr.Tab``; returns the form."""
    first = actions.starting_values()
    form = ConfigForm(overrides=field_overrides(ctx), initial=first)
    with gr.Row(equal_height=False):
        with gr.Column(scale=3, min_width=520):
            form.render_section("model", columns=2)
            pickers, method_note = render_method(ctx, form, first)
            form.render_section("quantization", columns=4, open=False)
            form.render_section("adapter", columns=3)
            modality_boxes = render_modality_sections(ctx, form, first)
            panel = build_dataset_panel(form)
            form.render_section("train", columns=3, title="train.training")
            form.render_section("launch", columns=3)
            form.render_rest(columns=3, skip=["name"])
        with gr.Column(scale=2, min_width=360):
            side = build_sidebar(ctx, form, first)
    _wire_form(ctx, form, panel, side)
    _wire_files(ctx, form, panel, side)
    wire_dataset_list(ctx, form, panel)
    _wire_start(ctx, form, panel, side)
    _wire_init_from(ctx, form)
    _wire_method_fit(ctx, form, method_note)
    _wire_modality_sections(ctx, form, modality_boxes)
    for picker in pickers:
        _wire_reward_picker(ctx, form, picker)
    _wire_demo_help(ctx, form)
    _wire_kept_form(ctx, form)
    return form


def _wire_kept_form(ctx: StudioContext, form: ConfigForm) -> None:
    """Keep the form in the browser (studio.train.kept_form): stored by the page itself before each live preview
    (wired in _wire_form), sent back to the server once, when the page loads, checked there as any input is, and
    shown again by the page, which leaves a field the visitor changed while the answer was on the way as it is.

    Stored by a script, not by an event that outputs to a gr.BrowserState: that round trip made the form's change
    events fire again, so an open page sent its form to the server several times a second, without end.
    """
    stored = gr.Textbox(visible=False)  # carries the stored form to the load event below
    restored = gr.Textbox(visible=False)  # carries what may come back of it to the page's script

    def restore(caller: Caller, text: str | None) -> str:
        values = kept_form.restored_values(caller, kept_form.parse_stored(text))
        return kept_form.restored_text(form.components, values)

    page = get_blocks_context().root_block
    quiet = {"js": kept_form.read_script(form.components), "show_progress": "hidden", **PRIVATE}
    answered = page.load(ctx.handler(restore), ctx.inputs(stored), restored, **quiet)
    shown = answered.then(None, restored, form.inputs, js=kept_form.apply_script(form.paths), **PRIVATE)
    form.after_write(shown)
    shown.then(None, None, None, js=kept_form.READY_SCRIPT, **PRIVATE)


def _wire_init_from(ctx: StudioContext, form: ConfigForm) -> None:
    """List the runs again when a picker that offers them gets the focus (the runs to start from, and those a field
    that names a model or a run offers): runs finish while the page is open (in the demo, the visitor's own)."""
    pickers = {"model.init_from": actions.init_from_choices}
    pickers.update(dict.fromkeys(actions.MODEL_OR_RUN_FIELDS, actions.model_or_run_choices))
    for path, choices in pickers.items():
        picker = form.components[path]

        def runs_list(caller: Caller, choices: Any = choices) -> Any:
            return gr.update(choices=choices(caller))

        picker.focus(
            ctx.handler(runs_list),
            ctx.inputs(),
            picker,
            show_progress="hidden",
            concurrency_limit=None,  # a directory listing: milliseconds
            **PRIVATE,
        )


def _wire_method_fit(ctx: StudioContext, form: ConfigForm, note: Any) -> None:
    """When the user picks a method, or changes a number of a method's section, set the fields of other sections
    that the method's rules refuse to what they take (studio.train.method_fit), and say so below the picker."""

    def on_method_fit(caller: Caller, *args: Any) -> list[Any]:
        changes, said = method_fit.fitted_values(form.values(args), caller.language)
        return [said, *form.value_updates(changes)]

    triggers = [form.components[path].input for path in _method_fit_paths()]
    outputs = [note, *form.inputs]
    inputs = ctx.inputs(*form.inputs)
    quiet = {"show_progress": "hidden", "show_progress_on": note}  # one progress target: see _wire_form
    form.after_write(gr.on(triggers, ctx.handler(on_method_fit), inputs, outputs, **quiet, **RAW))


def _method_fit_paths() -> list[str]:
    """The fields whose input makes the form fit the method (studio.train.method_fit): the method, and the numbers
    of the methods' own sections."""
    from engine.api import METHODS

    numbers = [
        spec.path
        for spec in leaf_specs()
        if spec.path.partition(".")[0] in METHODS and spec.kind in ("int", "float") and not spec.text_number
    ]
    return ["method", *numbers]


def _wire_modality_sections(ctx: StudioContext, form: ConfigForm, boxes: dict[str, Any]) -> None:
    """Show each modality's section (vision) while the model field names a model of that modality, or one whose
    modality cannot be told; whatever changed the field (a pick, a typed path, a loaded config, the kept form)."""
    if not boxes:
        return
    model, revision = form.components["model.name_or_path"], form.components["model.revision"]

    def on_model(caller: Caller, name: Any, rev: Any) -> dict[Any, Any]:
        shown = ms.shown_sections(name, rev, caller.workspace, list(boxes))
        return {box: gr.Column(visible=shown[section]) for section, box in boxes.items()}  # one box or several

    triggers = [model.change, revision.change]
    inputs = ctx.inputs(model, revision)
    gr.on(triggers, ctx.handler(on_model), inputs, list(boxes.values()), show_progress="hidden", **RAW)


def _wire_demo_help(ctx: StudioContext, form: ConfigForm) -> None:
    """In demo mode, the fields whose help has a note of the demo's (its limits, with the demo's numbers, which the
    page's own translation cannot fill in) are built with it in English: said again in the page's language as the
    page loads."""
    policy = ctx.policy
    if not policy.enabled:
        return
    specs = [spec for spec in leaf_specs() if spec.path in form.components and policy.has_own_help(spec)]
    widgets = [form.components[spec.path] for spec in specs]

    def said(caller: Caller) -> list[Any]:
        if caller.language == SOURCE:
            return [gr.skip()] * len(widgets)
        return [gr.update(info=policy.help_for(spec, caller.language)) for spec in specs]

    gr.on(None, ctx.handler(said), ctx.inputs(), widgets, show_progress="hidden", concurrency_limit=None, **PRIVATE)


def _wire_reward_picker(ctx: StudioContext, form: ConfigForm, picker: RewardPicker) -> None:
    """Add a filled-in reward of the picked kind to the rewards box; check every reward on the data's first rows
    (custom files load and run once) without starting anything; store an uploaded reward file in the workspace,
    add its function and check the rewards (not in demo mode)."""
    box = form.components[picker.field]

    def on_add(caller: Caller, box: str, picked: str) -> Any:
        try:
            return rw.add_reward(box, picked)
        except rw.RewardBoxError as exc:
            gr.Warning(exc.said(caller.language))
            return gr.skip()

    def on_check(caller: Caller, *args: Any) -> str:
        return rw.check_rewards_message(caller, form.values(args))

    form.after_write(picker.add.click(ctx.handler(on_add), ctx.inputs(box, picker.kind), box, **RAW))
    check_inputs = ctx.inputs(*form.inputs)
    picker.check.click(ctx.handler(on_check), check_inputs, picker.result, **RAW, **lanes.REWARD_CHECK)
    if picker.upload is None:  # demo mode: no custom reward files
        return

    def on_reward_upload(caller: Caller, upload: Any, *args: Any) -> list[Any]:
        # Raw values (the form's numbers must reach pydantic as typed): the upload comes as Gradio's FileData.
        path = upload.get("path") if isinstance(upload, dict) else upload
        box_text, said = rw.upload_reward_file(caller, path, form.values(args), picker.field)
        return [or_skip(box_text), said]

    upload_inputs = ctx.inputs(picker.upload, *form.inputs)
    outputs = [box, picker.result]
    uploaded = picker.upload.upload(ctx.handler(on_reward_upload), upload_inputs, outputs, **RAW, **lanes.REWARD_CHECK)
    form.after_write(uploaded)


def _wire_form(ctx: StudioContext, form: ConfigForm, panel: DatasetPanel, side: Sidebar) -> None:
    """Live preview and per-field errors on every input of the visitor's and after every write of the studio's
    (ConfigForm.after_write); the dataset check; the estimate."""
    inputs = ctx.inputs(*form.inputs)

    def on_change(caller: Caller, *args: Any) -> list[Any]:
        result = actions.preview(caller, form.values(args))
        slots, unplaced = form.error_updates(result.errors, caller.language)
        return [result.yaml, result.command, _problems(unplaced + result.warnings), *slots]

    preview = {
        "fn": ctx.handler(on_change),
        "inputs": inputs,
        "outputs": [side.yaml, side.command, side.problems, *form.slots],
        "js": kept_form.store_script(form.paths),  # the page keeps what it previews
        "show_progress": "hidden",
        # One output shows the progress (of none): the page keeps a loading status for every output any event
        # has had, and walks its whole component tree for each at every status change of every event.
        "show_progress_on": side.yaml,
        "trigger_mode": "always_last",
        **RAW,
    }
    form.follow_writes(lambda event: event.then(**preview))
    fitted = set(_method_fit_paths())  # previewed once the method's fit has written the form
    gr.on([form.components[p].input for p in form.paths if p not in fitted], **preview)
    # Text fields trigger on blur / Enter, not on every keystroke; the format dropdown on a user's pick.
    columns = [form.components[p] for p in form.paths if p.startswith("data.columns.") or p == "data.eval_path"]
    # The method too: whether the data fits is a question of the method (preference data trains with dpo).
    picks = [form.components[path].input for path in ("data.format", "method")]
    triggers = [panel.path.submit, panel.path.blur, *picks, panel.check_button.click]
    then_check(gr.on(triggers + [c.blur for c in columns], None, show_progress="hidden", **PRIVATE), ctx, form, panel)

    def on_use_max_length(tokens: int | None) -> Any:
        return tokens or gr.skip()

    use = panel.use_max_length.click(on_use_max_length, panel.suggestion, form.components["train.max_length"], **RAW)
    then_check(use, ctx, form, panel)

    def on_estimate(caller: Caller, *args: Any) -> list[Any]:
        from studio.train.estimate import estimate_run

        lang = caller.language
        result = actions.preview(caller, form.values(args))
        outcome = estimate_run(result.config, lang) if result.config is not None else None
        errors = outcome.errors if outcome else result.errors
        slots, unplaced = form.error_updates(caller.shown(errors), lang)  # errors may name files
        message = outcome.markdown if outcome else caller.say(FIX_FIRST)
        return [caller.shown(message), _problems(unplaced + result.warnings), *slots]

    outputs = [side.estimate, side.problems, *form.slots]
    estimate = {"show_progress_on": side.estimate, **RAW, **lanes.ESTIMATE}  # one progress target: see above
    side.estimate_button.click(ctx.handler(on_estimate), inputs, outputs, **estimate)


def _wire_files(ctx: StudioContext, form: ConfigForm, panel: DatasetPanel, side: Sidebar) -> None:
    """Dataset upload / bundled pick, and config load / save."""

    def on_upload(caller: Caller, path: str | None, current: Any) -> list[Any]:
        if not path:
            return [gr.skip(), "", gr.skip()]
        copied, error = actions.upload_dataset(caller, path)
        # The upload is listed for reuse; while data.path holds a list of datasets it joins the list.
        choices = gr.update(choices=dl.dataset_choices(caller))
        return [gr.skip() if copied is None else dl.add_dataset(current, copied), error, choices]

    upload_outputs = [panel.path, panel.error, panel.bundled]
    upload_inputs = ctx.inputs(panel.upload, panel.path)
    upload = panel.upload.upload(ctx.handler(on_upload), upload_inputs, upload_outputs, **PRIVATE)
    then_check(upload, ctx, form, panel)

    def on_pick(choice: str | None, current: Any) -> Any:
        return dl.add_dataset(current, choice) if choice else gr.skip()

    pick = panel.bundled.input(on_pick, [panel.bundled, panel.path], panel.path, **PRIVATE)
    then_check(pick, ctx, form, panel, eval_pairing.PICKED)  # a picked set comes with its own eval set

    def bundled_in_use(caller: Caller, path: Any) -> Any:
        choices, value = dl.in_use(caller, path)
        return gr.update(choices=choices, value=value)

    # The list shows the dataset in use, whatever put it in the path box (a pick, an upload, a typed path, a load).
    panel.path.change(
        ctx.handler(bundled_in_use),
        ctx.inputs(panel.path),
        panel.bundled,
        show_progress="hidden",
        concurrency_limit=None,  # a directory listing: milliseconds
        **PRIVATE,
    )

    def dataset_list(caller: Caller) -> Any:
        return gr.update(choices=dl.dataset_choices(caller))

    # Uploads of an earlier page life (or another tab) are listed each time the picker gets the focus.
    panel.bundled.focus(
        ctx.handler(dataset_list),
        ctx.inputs(),
        panel.bundled,
        show_progress="hidden",
        concurrency_limit=None,  # a directory listing: milliseconds
        **PRIVATE,
    )

    def on_load(caller: Caller, path: str | None) -> list[Any]:
        values, message = actions.load_config_values(caller, path)
        return [message, *(form.value_updates(values) if values else [gr.skip()] * len(form.paths))]

    load_outputs = [side.config_message, *form.inputs]
    for source, trigger in (
        (side.config_choice, side.config_choice.select),  # a pick: once (its input event fires twice a pick)
        (side.config_upload, side.config_upload.upload),
    ):
        progress = {"show_progress_on": side.config_message}  # one progress target: see _wire_form
        loaded = trigger(ctx.handler(on_load), ctx.inputs(source), load_outputs, **progress, **PRIVATE)
        form.after_write(loaded)  # beside the dataset check, not after it: the preview shows a second sooner
        then_check(loaded, ctx, form, panel, eval_pairing.LOADED)  # a config brings its own eval path

    def on_save(caller: Caller, name: str, *args: Any) -> list[Any]:
        _, download, message = actions.save_config_as(caller, form.values(args), name or "")
        shown = gr.update(value=str(download), visible=True) if download else gr.update(visible=False)
        return [message, shown, gr.update(choices=actions.config_files(caller.workspace, caller.policy))]

    outputs = [side.config_message, side.download, side.config_choice]
    side.save_name.submit(ctx.handler(on_save), ctx.inputs(side.save_name, *form.inputs), outputs, **RAW)
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


def _wire_start(ctx: StudioContext, form: ConfigForm, panel: DatasetPanel, side: Sidebar) -> None:
    """Start: disable the button and clear the last answer, validate and start (one at a time; queued in demo
    mode), re-enable; on success show the Monitor."""
    links = [component for component in (ctx.current_run, ctx.tabs) if component is not None]

    def on_start(caller: Caller, *args: Any) -> list[Any]:
        result = starting.start_run(caller, form.values(args))
        slots, unplaced = form.error_updates(result.errors, caller.language)
        data_error = dp.error_markdown(result.data_error) if result.data_error else gr.skip()
        linked: list[Any] = [gr.skip()] * len(links)
        picker: Any = gr.skip()
        if result.run_dir is not None:
            linked = [str(result.run_dir) if c is ctx.current_run else gr.Tabs(selected="monitor") for c in links]
            picker = gr.update(choices=actions.model_choices(caller.workspace, caller.policy))
            data_error = ""
        return [result.message, _problems(unplaced), data_error, picker, *slots, *linked, enabled()]

    model = form.components["model.name_or_path"]
    outputs = [side.start_message, side.problems, panel.error, model, *form.slots, *links, side.start]
    quiet = {"show_progress": "hidden", **PRIVATE}
    busy, idle = marked(STARTING), marked(START_LABEL)  # the page translates them

    def enabled() -> Any:
        return gr.update(interactive=True, value=idle)

    def starting_view() -> list[Any]:
        """At the click, before the form is checked: Start busy, and the last Start's answer and problems gone (a
        refusal left on screen would read as this start's answer while it is checked)."""
        return [gr.update(interactive=False, value=busy), "", ""]

    answer = [side.start, side.start_message, side.problems]
    disable = side.start.click(starting_view, None, answer, queue=False, **quiet)
    progress = {"show_progress_on": side.start_message}  # one progress target: see _wire_form
    started = disable.then(ctx.handler(on_start), ctx.inputs(*form.inputs), outputs, **progress, **RAW, **lanes.START)
    # Start comes back enabled with on_start's answer, not in an event of its own (each costs the browser's main
    # thread 65 ms or more, while the new run's first points are on their way); after a crash, by this one.
    started.failure(enabled, None, side.start, **quiet)


def _problems(lines: list[str]) -> str:
    """Problems that belong to no single field (cross-section rules, the whole file)."""
    return "\n".join(f"⚠ {line}  " for line in lines)
