"""The Train form's live preview: one per input of the visitor's, one after each event that writes the form.

A preview that followed every field's ``change`` ran once per written field: a loaded preset sent up to fifteen, and
the page took 12-23 s to show the preset's method section (each event walks the page's whole component tree per
input and output). These tests read the whole studio's wiring, every tab's events that write the form among them.
"""

from __future__ import annotations

from typing import Any

import gradio as gr
import pytest

from studio.app import build_app
from studio.train.kept_form import STORAGE_KEY


@pytest.fixture(scope="module")
def studio(tmp_path_factory: pytest.TempPathFactory) -> gr.Blocks:
    return build_app(tmp_path_factory.mktemp("workspace"))


def previews(demo: gr.Blocks) -> list[Any]:
    return [fn for fn in demo.fns.values() if fn.name == "on_change"]


def form_fields(demo: gr.Blocks) -> set[int]:
    """The ids of the form's widgets: the preview's inputs after the visitor's component."""
    return {component._id for component in previews(demo)[0].inputs[1:]}


def followers(demo: gr.Blocks, fn: Any) -> list[Any]:
    """Every event that runs after ``fn`` through ``then`` / ``success`` chains."""
    found, todo = [], [fn._id]
    while todo:
        before = todo.pop()
        after = [other for other in demo.fns.values() if other.trigger_after == before]
        found += after
        todo += [other._id for other in after]
    return found


def test_the_preview_follows_inputs_not_changes(studio: gr.Blocks) -> None:
    fields = form_fields(studio)
    assert len(fields) > 100  # the whole form
    for preview in previews(studio):
        assert all(event != "change" for _, event in preview.targets)
        assert STORAGE_KEY in (preview.js or "")  # the page stores what it previews
        assert len(preview.show_progress_on or preview.outputs) == 1  # see studio.train.tab._wire_form
    triggered = {target for preview in previews(studio) for target, event in preview.targets if event == "input"}
    fit = next(fn for fn in studio.fns.values() if fn.name == "on_method_fit")
    fitted = {target for target, event in fit.targets if event == "input"}
    assert "method" in {studio.blocks[target].elem_id.removeprefix("cfg-") for target in fitted}
    assert not triggered & fitted  # the method's fields are previewed once the fit has written the form
    assert triggered | fitted == fields  # every field of the form, in one or the other


def test_every_event_that_writes_the_form_is_followed_by_a_preview(studio: gr.Blocks) -> None:
    fields = form_fields(studio)
    writers = [fn for fn in studio.fns.values() if fields & {c._id for c in fn.outputs}]
    names = {fn.name for fn in writers}
    # A loaded config, the kept form's restore (a script: no name), a method's fit, a dataset picked or uploaded, a
    # dataset check's eval path, a reward added, a sweep's best run, a run to continue.
    expected = {"on_load", None, "on_method_fit", "on_pick", "on_upload", "check_rows", "on_add"}
    assert expected | {"best_run", "on_continue"} <= names
    loads = {fn._id for fn in writers if fn.name == "on_load"}
    for writer in writers:
        if writer.name in ("on_start", "runs_list"):  # they update a picker's choices, never a value
            continue
        if writer.name == "check_rows" and writer.trigger_after in loads:  # a loaded config keeps its eval path
            continue
        chain = followers(studio, writer)
        assert any(fn.name == "on_change" for fn in chain), writer.name
        many = writer.fn is not None and len(writer.outputs) > 20  # a script alone sets no loading status
        assert not many or len(writer.show_progress_on or writer.outputs) == 1, writer.name


def test_a_preset_loads_in_one_event_and_one_preview(studio: gr.Blocks) -> None:
    """The events a preset pick sets off: the load (once per pick: a dropdown's input fires twice), the rows check,
    one preview; no preview per changed field; and the method's section shown by the page, without the server."""
    load = next(fn for fn in studio.fns.values() if fn.name == "on_load" and len(fn.outputs) > 100)
    assert [event for _, event in load.targets] == ["select"]
    chain = followers(studio, load)
    assert [fn.name for fn in chain].count("on_change") == 1
    assert any(fn.name == "on_change" and fn.trigger_after == load._id for fn in chain)  # beside the checks
    method = next(field for field in load.outputs if field.elem_id == "cfg-method")
    shows = [fn for fn in studio.fns.values() if (method._id, "change") in fn.targets]
    assert shows and all(fn.fn is None and fn.js for fn in shows)
