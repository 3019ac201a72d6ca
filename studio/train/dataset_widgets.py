"""The Train tab's dataset panel wired to the form: the check that follows every event that may change the data
(rows first, then tokens), and the list of datasets whose table follows the data.path box."""

from __future__ import annotations

from typing import Any

import gradio as gr
import pandas as pd

from studio import lanes
from studio.context import StudioContext
from studio.demo.caller import Caller
from studio.train import actions, eval_pairing
from studio.train import dataset_list as dl
from studio.train.form_widgets import ConfigForm
from studio.train.widgets import PRIVATE, RAW, DatasetPanel, check_outputs


def then_check(event: Any, ctx: StudioContext, form: ConfigForm, panel: DatasetPanel, source: str = "") -> None:
    """After ``event``, check the dataset: rows first (fast), then tokens and examples (loads the tokenizer).

    The rows check first lets the eval path follow a new training path (studio.train.eval_pairing; ``source``
    says what made the event), so both checks see the eval path that stays. The form's preview follows the rows check
    (ConfigForm.after_write): the event may have written the form, and the rows check may have moved the eval path;
    not after a config's load, which keeps the config's eval path and has its preview follow the load itself.
    """

    def check_rows(caller: Caller, seen: Any, *args: Any) -> list[Any]:
        values = form.values(args)
        paths = values["data.path"], values["data.eval_path"]
        holds_out = eval_pairing.holds_out(values)
        follow = eval_pairing.follow_training_path(seen, *paths, source, caller.language, holds_out)
        values["data.eval_path"] = values["data.eval_path"] if follow.eval_path is None else follow.eval_path
        if follow.eval_size is not None:
            values["data.eval_size"] = follow.eval_size
        shown = [or_skip(follow.eval_path), or_skip(follow.eval_size), follow.seen, or_skip(follow.note)]
        return check_outputs(actions.check_data(caller, values, with_tokens=False)) + shown

    def check_tokens(caller: Caller, *args: Any) -> list[Any]:
        return check_outputs(actions.check_data(caller, form.values(args), with_tokens=True))

    # The check's progress shows on its summary alone (one progress target: see studio.train.tab._wire_form).
    lane = {"show_progress_on": panel.summary, **RAW, **lanes.DATASET_CHECK}
    follow_outputs = [form.components["data.eval_path"], form.components["data.eval_size"], panel.seen, panel.notice]
    rows = ctx.inputs(panel.seen, *form.inputs)
    quick = event.then(ctx.handler(check_rows), rows, panel.outputs + follow_outputs, **lane)
    quick.then(ctx.handler(check_tokens), ctx.inputs(*form.inputs), panel.outputs, **lane)
    if source != eval_pairing.LOADED:  # a loaded config keeps its eval path: its preview follows the load itself
        form.after_write(quick)


def or_skip(value: Any) -> Any:
    """``value`` as an output, or leave the component as it is for None."""
    return gr.skip() if value is None else value


def wire_dataset_list(ctx: StudioContext, form: ConfigForm, panel: DatasetPanel) -> None:
    """The list of datasets: its table follows the data.path box; add, set and remove rewrite the box, then check."""
    controls = panel.datasets

    def show(caller: Caller, path: Any) -> list[Any]:
        lang = caller.language
        rows = dl.table_rows(path, lang)
        table = pd.DataFrame(rows, columns=dl.table_headers(lang))  # its header in the page's language too
        return [table, gr.update(choices=dl.entry_choices(path), value=None), gr.update(visible=bool(rows))]

    def start_list(caller: Caller, path: Any) -> tuple[Any, str]:
        return dl.start_list(path, caller.language)

    def set_dataset(caller: Caller, path: Any, index: Any, weight: Any, cap: Any) -> tuple[Any, str]:
        return dl.set_dataset(path, index, weight, cap, caller.language)

    def remove_dataset(caller: Caller, path: Any, index: Any) -> tuple[Any, str]:
        return dl.remove_dataset(path, index, caller.language)

    quiet = {"show_progress": "hidden", **PRIVATE}
    panel.path.change(
        ctx.handler(show), ctx.inputs(panel.path), [controls.table, controls.entry, controls.box], **quiet
    )
    controls.entry.input(dl.entry_settings, [panel.path, controls.entry], [controls.weight, controls.cap], **quiet)
    noted = [panel.path, controls.note]
    edits = [
        controls.add.click(ctx.handler(start_list), ctx.inputs(panel.path), noted, **RAW),
        controls.apply.click(
            ctx.handler(set_dataset),
            ctx.inputs(panel.path, controls.entry, controls.weight, controls.cap),
            noted,
            **RAW,
        ),
        controls.remove.click(ctx.handler(remove_dataset), ctx.inputs(panel.path, controls.entry), noted, **RAW),
    ]
    for edit in edits:
        then_check(edit, ctx, form, panel)
