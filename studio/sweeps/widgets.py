"""The Sweeps tab's builder: a base run, the fields to vary with their ranges or choices, the objective and
budget, and the sweep YAML they edit (the YAML is the source of truth: each widget changes one key of it, a hand
edit shows in the widgets, and the whole text is checked as it changes, each problem naming its key).

The tab builds it in its "New sweep" section and wires its Start button (studio/sweeps/tab.py); the edits
themselves are plain functions (studio/sweeps/space_editor.py). Every event here takes milliseconds. The labels are
keys the page translates; the messages are said in the page's language (studio.i18n).
"""

from __future__ import annotations

from typing import Any

import gradio as gr

from studio.context import StudioContext
from studio.demo.caller import Caller
from studio.i18n.catalog import key
from studio.i18n.widgets import field_key, marked, t
from studio.markup import message_html
from studio.sweeps import actions, space_editor

PRIVATE: dict[str, Any] = {"api_visibility": "private"}
QUIET: dict[str, Any] = {"show_progress": "hidden", **PRIVATE}
PICK_FIELD, NO_FORM = key("sweeps.pick_field"), key("sweeps.no_form")


def edit_yaml(caller: Caller, change: Any, *args: Any) -> list[Any]:
    """Apply an editor change to the YAML; [yaml, message]: the YAML unchanged and why (in the caller's language),
    when it cannot apply."""
    try:
        return [change(*args), ""]
    except space_editor.EditorProblem as exc:
        return [gr.skip(), message_html(exc.said(caller.language), "warn")]
    except ValueError as exc:
        return [gr.skip(), message_html(str(exc), "warn")]


def field_choices() -> list[tuple[str, str]]:
    """The "Field to vary" picker's (label, path): each field's path and its label, which the page translates."""
    return [(f"{path} · {marked(field_key(path, 'label'))}", path) for _, path in space_editor.field_choices()]


class SweepEditor:
    """The builder's components and their events (its ``start`` button and ``yaml`` are wired by the tab)."""

    def __init__(self, ctx: StudioContext):
        self.ctx = ctx
        self._build(actions.starting_yaml(ctx.workspace))
        self._wire()

    def _build(self, text: str) -> None:
        workspace = self.ctx.workspace
        with gr.Row(equal_height=False):
            with gr.Column(scale=2, min_width=360):
                with gr.Row(equal_height=True, elem_classes="ts-pick-row"):
                    self.base = gr.Dropdown(
                        actions.base_choices(workspace, self.ctx.policy),
                        value=actions.FROM_FORM,
                        label=t("sweeps.start_from"),
                        scale=3,
                        elem_id="ts-sweep-base",
                    )
                    self.use_base = gr.Button(t("sweeps.use"), scale=0, min_width=80, elem_id="ts-sweep-use-base")
                self.field = gr.Dropdown(field_choices(), value=None, label=t("sweeps.field"), elem_id="ts-sweep-field")
                # No minimum on the numbers: the sweep's own checks name a bad value in the YAML's problems.
                with gr.Row(equal_height=True, elem_classes="ts-pick-row"):
                    self.low = gr.Number(label=t("sweeps.low"), min_width=90, elem_id="ts-sweep-low")
                    self.high = gr.Number(label=t("sweeps.high"), min_width=90, elem_id="ts-sweep-high")
                    self.step = gr.Number(1, label=t("sweeps.step"), precision=0, min_width=70, elem_id="ts-sweep-step")
                    self.log = gr.Checkbox(label=t("sweeps.log"), min_width=90, elem_id="ts-sweep-log")
                self.choices = gr.Textbox(
                    label=t("sweeps.choices"), placeholder=t("sweeps.choices.placeholder"), elem_id="ts-sweep-choices"
                )
                with gr.Row():
                    self.add = gr.Button(t("sweeps.add"), variant="secondary", elem_id="ts-sweep-add")
                    self.remove = gr.Button(t("sweeps.remove"), elem_id="ts-sweep-remove")
                self._build_settings(text)
            with gr.Column(scale=3, min_width=420):
                self.yaml = gr.Code(
                    text,
                    language="yaml",
                    lines=22,
                    max_lines=40,
                    interactive=True,
                    label=t("sweeps.yaml"),
                    elem_id="ts-sweep-yaml",
                )
                self.problems = gr.HTML(
                    actions.check_html(Caller(workspace), text), elem_classes="ts-html", elem_id="ts-sweep-check"
                )
                self.start = gr.Button(t("sweeps.start"), variant="primary", size="lg", elem_id="ts-sweep-start")
                self.start_message = gr.HTML(elem_classes="ts-html", elem_id="ts-sweep-start-message")

    def _build_settings(self, text: str) -> None:
        shown = space_editor.settings_of(text) or {}
        with gr.Row(equal_height=True):
            name = gr.Textbox(shown.get("name"), label=t("sweeps.name"), min_width=140, elem_id="ts-sweep-name")
            # The base's method's metrics, and any other key its runs log (typed in).
            metric = gr.Dropdown(
                space_editor.metric_choices(text),
                value=shown.get("metric"),
                allow_custom_value=True,
                label=t("sweeps.objective"),
                min_width=140,
                elem_id="ts-sweep-metric",
            )
            # The YAML's own values (minimize, tpe, median, ...): the words the sweep file is written in.
            direction = gr.Radio(["minimize", "maximize"], value=shown.get("direction"), label=t("sweeps.direction"))
        with gr.Row(equal_height=True):
            trials = gr.Number(shown.get("trials"), label=t("sweeps.trials"), precision=0, elem_id="ts-sweep-trials")
            sampler = gr.Dropdown(["tpe", "random", "grid"], value=shown.get("sampler"), label=t("sweeps.sampler"))
            pruner = gr.Dropdown(
                ["median", "successive_halving", "none"], value=shown.get("pruner"), label=t("sweeps.pruner")
            )
            budget = gr.Number(0, label=t("sweeps.budget"), elem_id="ts-sweep-budget")
        self.settings = dict(
            zip(space_editor.SETTINGS, [name, metric, direction, trials, sampler, pruner, budget], strict=True)
        )

    def _wire(self) -> None:
        ctx = self.ctx
        yaml_out = [self.yaml, self.start_message]
        row = [self.low, self.high, self.log, self.step, self.choices]
        pick = lambda text, path: space_editor.field_row(text, path) if path else [gr.skip()] * len(row)  # noqa: E731
        self.field.input(pick, [self.yaml, self.field], row, **PRIVATE)

        def add(
            caller: Caller, sweep: str, path: str | None, low: Any, high: Any, log: bool, step: Any, choices: str
        ) -> list[Any]:
            if not path:
                return [gr.skip(), message_html(caller.say(PICK_FIELD), "warn")]
            entry = space_editor.EntryRow(path, low, high, bool(log), int(step or 1), choices or "")
            return edit_yaml(caller, space_editor.with_entry, sweep, entry)

        self.add.click(ctx.handler(add), ctx.inputs(self.yaml, self.field, *row), yaml_out, **PRIVATE)

        def remove(caller: Caller, sweep: str, path: str | None) -> list[Any]:
            return edit_yaml(caller, space_editor.without_entry, sweep, path or "")

        self.remove.click(ctx.handler(remove), ctx.inputs(self.yaml, self.field), yaml_out, **PRIVATE)
        for setting, widget in self.settings.items():

            def change(caller: Caller, sweep: str, value: Any, setting: str = setting) -> list[Any]:
                return edit_yaml(caller, space_editor.with_setting, sweep, setting, value)

            edit = {"fn": ctx.handler(change), "inputs": ctx.inputs(self.yaml, widget), "outputs": yaml_out, **PRIVATE}
            if isinstance(widget, gr.Textbox):  # the name: once typed, not at every key
                widget.blur(**edit)
                widget.submit(**edit)
            else:
                edited = widget.input(**edit)
                if setting == "metric":  # a metric the methods list sets its direction too: show it
                    edited.then(**self._sync())
        self.yaml.blur(**self._sync())  # a hand edit of the YAML shows in the widgets

        check = ctx.handler(actions.check_html)
        self.yaml.change(check, ctx.inputs(self.yaml), [self.problems], **QUIET)
        # The first check was written at build time in English: again in the page's language when it loads.
        gr.on(None, check, ctx.inputs(self.yaml), [self.problems], concurrency_limit=None, **QUIET)
        self._wire_base()

    def _sync(self) -> dict[str, Any]:
        """An event's arguments that show the YAML's settings in their widgets (after a hand edit, a picked metric)."""
        return {"fn": self._shown_settings, "inputs": [self.yaml], "outputs": list(self.settings.values()), **QUIET}

    def _shown_settings(self, text: str) -> list[Any]:
        """The settings widgets' updates for the YAML ``text`` (the metric's choices are its base's metrics); none
        when it cannot be read."""
        found = space_editor.settings_of(text)
        if not found:
            return [gr.skip()] * len(self.settings)
        shown = {**found, "metric": gr.update(choices=space_editor.metric_choices(text), value=found["metric"])}
        return [shown[key] for key in self.settings]

    def _wire_base(self) -> None:
        """Use: the base from the Train tab's form (its values as Start reads them) or from a file."""
        ctx, form = self.ctx, self.ctx.train_form

        skipped = [gr.skip()] * len(self.settings)

        def use(caller: Caller, choice: str | None, sweep: str, *values: Any) -> list[Any]:
            if choice == actions.FROM_FORM:
                if form is None:
                    return [gr.skip(), message_html(caller.say(NO_FORM), "warn"), *skipped]
                new, outcome = actions.yaml_from_form(caller, sweep, form.values(values))
            else:
                new, outcome = actions.yaml_from_file(caller, sweep, choice)
            # The settings in the same answer as the YAML: shown by a later step, they landed after a number typed
            # meanwhile and showed the YAML's old one in its box.
            settings = self._shown_settings(new) if new is not None else skipped
            return [new if new is not None else gr.skip(), actions.outcome_html(outcome), *settings]

        inputs = ctx.inputs(self.base, self.yaml, *(form.inputs if form is not None else []))
        outputs = [self.yaml, self.start_message, *self.settings.values()]
        self.use_base.click(ctx.handler(use), inputs, outputs, preprocess=False, **PRIVATE)
