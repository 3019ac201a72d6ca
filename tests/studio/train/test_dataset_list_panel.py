"""Several datasets from the Train tab: the data.path box holds one path or a YAML list, "+ Add another dataset" starts
a list that picks and uploads join, each dataset's weight and cap are set by number, every path of a list is
confined (and in demo mode limited to bundled sets and the visitor's own uploads), and the eval file follows."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

import gradio as gr
import pytest
from gradio.state_holder import SessionState

from engine.config import ConfigError, parse_config
from engine.store.paths import PROJECT_ROOT
from engine.store.workspace import datasets_dir
from studio.context import StudioContext
from studio.demo.caller import Caller
from studio.demo.policy import DATA_REFUSAL, DemoPolicy, visitor_uploads
from studio.form.schema import leaf_specs
from studio.form.values import config_to_values, default_values, values_to_config
from studio.form.yaml_lists import dataset_paths
from studio.path_guard import guard_config
from studio.train import actions, starting
from studio.train import dataset as dp
from studio.train import dataset_list as dl
from studio.train.eval_pairing import follow_training_path
from studio.train.tab import build_train_tab

DEMO_TRAIN = "assets/datasets/demo_sft_train.jsonl"
DEMO_EVAL = "assets/datasets/demo_sft_eval.jsonl"
DPO_TRAIN = "assets/datasets/demo_dpo_train.jsonl"
PREFERENCE = "assets/datasets/demo_preference.jsonl"
TWO = f"[{{path: {DEMO_TRAIN}, max_samples: 10}}, {{path: {DEMO_EVAL}, weight: 2.0}}]"


def form(path: Any, **changes: Any) -> dict[str, Any]:
    """The default form's widget values with data.path (and dotted-path changes written with __)."""
    return {**default_values(), "data.path": path, **{key.replace("__", "."): value for key, value in changes.items()}}


# --- the form's box --------------------------------------------------------------------------------------------------


def test_the_path_field_is_one_box_that_reads_a_path_or_a_yaml_list() -> None:
    spec = next(spec for spec in leaf_specs() if spec.path == "data.path")
    assert spec.kind == "datasets"
    assert values_to_config(form(DEMO_TRAIN)).data.path == DEMO_TRAIN
    config = values_to_config(form(TWO))
    assert [(entry.path, entry.weight, entry.max_samples) for entry in config.data.path] == [
        (DEMO_TRAIN, 1.0, 10),
        (DEMO_EVAL, 2.0, None),
    ]
    assert config_to_values(config)["data.path"] == TWO  # one line of YAML, as written
    with pytest.raises(ConfigError) as caught:
        values_to_config(form("[{path: a.jsonl, weight: 0}, "))
    assert "not a valid YAML list of datasets" in caught.value.by_field()["data.path"]
    with pytest.raises(ConfigError) as caught:
        values_to_config(form("[{path: a.jsonl, weight: 0}]"))
    assert caught.value.by_field() == {"data.path.0.weight": "must be > 0.0"}


def test_form_round_trip_with_lists() -> None:
    for data in (
        {"path": [{"path": DEMO_TRAIN, "max_samples": 20}, {"path": DEMO_EVAL, "weight": 0.5}]},
        {"path": [{"path": "a.csv", "format": "alpaca", "columns": {"output": "answer"}, "split": "x"}]},
        {"path": [{"path": "dir with spaces/b: c.jsonl"}, {"path": "org/set"}], "eval_size": 2},
    ):
        config = parse_config({"data": data})
        assert values_to_config(config_to_values(config)) == config


def test_dataset_paths_reads_the_box() -> None:
    assert dataset_paths(DEMO_TRAIN) == [DEMO_TRAIN]
    assert dataset_paths(TWO) == [DEMO_TRAIN, DEMO_EVAL]
    assert dataset_paths("") == [] and dataset_paths(None) == []
    assert dataset_paths("[{path: 3}]") is None and dataset_paths("[") is None


# --- add, set, remove ---------------------------------------------------------------------------------------------


def test_add_another_starts_a_list_that_picks_join_and_remove_returns_to_one_path() -> None:
    value, note = dl.start_list(DEMO_TRAIN)
    assert value == f"[{{path: {DEMO_TRAIN}}}]" and "joins the list" in note
    assert values_to_config(form(value)).data.path[0].path == DEMO_TRAIN  # a list of one is a valid config
    value = dl.add_dataset(value, PREFERENCE)
    assert dataset_paths(value) == [DEMO_TRAIN, PREFERENCE]
    assert dl.add_dataset(DEMO_TRAIN, PREFERENCE) == PREFERENCE  # no list: a pick replaces, as before
    value, note = dl.set_dataset(value, 1, 2.5, "30")
    assert note == "" and values_to_config(form(value)).data.path[1].model_dump(exclude_defaults=True) == {
        "path": PREFERENCE,
        "weight": 2.5,
        "max_samples": 30,
    }
    assert dl.table_rows(value) == [[0, "demo_sft_train.jsonl", 1, "all"], [1, "demo_preference.jsonl", 2.5, 30]]
    assert dl.entry_choices(value) == [("0: demo_sft_train.jsonl", 0), ("1: demo_preference.jsonl", 1)]
    assert dl.entry_settings(value, 1) == (2.5, "30") and dl.entry_settings(value, 0) == (1.0, "")
    unchanged, note = dl.set_dataset(value, 1, 1, "many")
    assert unchanged == value and "number" in note
    value, note = dl.remove_dataset(value, 1)
    assert (value, note) == (DEMO_TRAIN, "")  # one plain dataset left: a plain path again
    assert dl.remove_dataset(value, 0)[0] == value and "one dataset" in dl.remove_dataset(value, 0)[1]
    alone = dl.start_list(DEMO_TRAIN)[0]
    kept, note = dl.remove_dataset(alone, 0)
    assert kept == alone and "needs a dataset" in note


def test_earlier_uploads_are_listed_in_demo_mode_only_the_visitors_own(tmp_path: Path) -> None:
    datasets_dir(tmp_path).mkdir(parents=True)
    mine = shutil.copyfile(PROJECT_ROOT / DEMO_EVAL, datasets_dir(tmp_path) / "mine.jsonl")
    (datasets_dir(tmp_path) / "notes.md").write_text("not a dataset")
    choices = dl.dataset_choices(Caller(tmp_path, DemoPolicy()))
    assert choices[: len(dp.bundled_datasets())] == [(path, path) for path in dp.bundled_datasets()]
    assert choices[len(dp.bundled_datasets()) :] == [(f"{dl.UPLOAD} mine.jsonl", str(mine.resolve()))]
    demo = DemoPolicy(enabled=True).bound_to(tmp_path)
    visitor, other = demo.new_visitor("10.0.0.1"), demo.new_visitor("10.0.0.2")
    folder = visitor_uploads(tmp_path, demo, visitor)
    folder.mkdir(parents=True)
    shutil.copyfile(PROJECT_ROOT / DEMO_EVAL, folder / "own.jsonl")
    assert dl.dataset_choices(Caller(tmp_path, demo, visitor))[-1] == (f"{dl.YOUR_UPLOAD} own.jsonl", "own.jsonl")
    assert [label for label, _ in dl.dataset_choices(Caller(tmp_path, demo, other))] == dp.bundled_datasets()
    assert [label for label, _ in dl.dataset_choices(Caller(tmp_path, demo))] == dp.bundled_datasets()


# --- paths of a list are confined ------------------------------------------------------------------------------


def test_every_path_of_a_list_is_confined(tmp_path: Path) -> None:
    config = parse_config({"data": {"path": [{"path": DEMO_TRAIN}, {"path": "/etc/passwd"}]}})
    with pytest.raises(ConfigError) as caught:
        guard_config(config, tmp_path)
    assert list(caught.value.by_field()) == ["data.path.1"]
    assert guard_config(parse_config({"data": {"path": [{"path": DEMO_TRAIN}]}}), tmp_path)
    preview = actions.preview(Caller(tmp_path), form(f"[{{path: {DEMO_TRAIN}}}, {{path: /etc/passwd}}]"))
    assert list(preview.errors) == ["data.path.1"] and preview.config is None


def test_demo_mode_takes_lists_of_bundled_sets_and_own_uploads_only(tmp_path: Path) -> None:
    demo = DemoPolicy(enabled=True).bound_to(tmp_path)
    visitor = demo.new_visitor("10.0.0.1")
    uploads = visitor_uploads(tmp_path, demo, visitor)
    uploads.mkdir(parents=True)
    own = shutil.copyfile(PROJECT_ROOT / DEMO_EVAL, uploads / "own.jsonl")
    steps = {"max_steps": 10}  # the demo's other limits hold
    allowed = parse_config({"data": {"path": [{"path": DEMO_TRAIN}, {"path": str(own)}]}, "train": steps})
    assert demo.problems(allowed, uploads) == []
    foreign = parse_config(
        {"data": {"path": [{"path": DEMO_TRAIN}, {"path": str(tmp_path / "x.jsonl")}]}, "train": steps}
    )
    assert [(problem.field, problem.message) for problem in demo.problems(foreign, uploads)] == [
        ("data.path.1", DATA_REFUSAL)
    ]
    # The form names an upload by its file name, in a list too; a path elsewhere is refused before it is read.
    named, caller = form(f"[{{path: {DEMO_TRAIN}}}, {{path: own.jsonl, weight: 2.0}}]"), Caller(tmp_path, demo, visitor)
    assert caller.uploads == uploads
    mapped = actions.upload_paths(caller, named)
    assert dataset_paths(mapped["data.path"]) == [DEMO_TRAIN, str(own)]
    assert actions.upload_names(caller, mapped)["data.path"] == named["data.path"]
    assert actions.demo_data_problems(caller, named) == {}
    assert actions.demo_data_problems(caller, form("[{path: /etc/passwd}]")) == {"data.path": DATA_REFUSAL}
    # A loaded config keeps an allowed list, and a list naming anything else is set back to the default set.
    kept, changed = demo.restrict_values(mapped, uploads)  # as load_config_values calls it: uploads by path
    assert kept["data.path"] == mapped["data.path"] and "data.path" not in changed
    reset, changed = demo.restrict_values(form("[{path: /etc/passwd}]"), uploads)
    assert reset["data.path"] == DEMO_TRAIN and "data.path" in changed


def test_the_check_reports_each_dataset(tmp_path: Path) -> None:
    check = dp.check_dataset(form(TWO), with_tokens=False, workspace=tmp_path)
    assert check.error == "" and check.format == "conversational"
    assert "**rows** 410 train / 0 eval (the datasets give 410 after their caps and weights)" in check.summary
    assert f"- `data.path.0: {PROJECT_ROOT / DEMO_TRAIN}: conversational, 10 rows used (the first 10 of 2,000)`" in (
        check.summary
    )
    assert "400 rows used (200 in the file, weight 2)`" in check.summary
    tokens = dp.check_dataset(form(TWO), with_tokens=True, workspace=tmp_path)
    assert "demo_sft_train.jsonl row 1 · " in tokens.examples  # an example names its file in a list
    refused = dp.check_dataset(form(f"[{{path: {DEMO_TRAIN}}}, {{path: {DPO_TRAIN}}}]"), False, workspace=tmp_path)
    assert f"data.path.1: {PROJECT_ROOT / DPO_TRAIN} is preference data" in refused.error
    start = starting.start_run(Caller(tmp_path), form(f"[{{path: {DEMO_TRAIN}}}, {{path: {DPO_TRAIN}}}]"), list)
    assert start.run_dir is None and list(start.errors) == ["data.path.1"]


# --- the eval file follows a list ---------------------------------------------------------------------------------


def test_the_eval_file_follows_a_list() -> None:
    seen = (DEMO_TRAIN, DEMO_EVAL)
    grown = dl.add_dataset(dl.start_list(DEMO_TRAIN)[0], PREFERENCE)
    # Its training file still trains beside another: the eval file stays, without a note.
    kept = follow_training_path(seen, grown, DEMO_EVAL)
    assert (kept.eval_path, kept.note) == (None, "")
    # A list without its training file: the eval file belonged to that one, and is cleared.
    others = dl.add_dataset(dl.start_list(PREFERENCE)[0], DPO_TRAIN)
    cleared = follow_training_path(seen, others, DEMO_EVAL)
    assert cleared.eval_path == "" and "not to these datasets: cleared" in cleared.note
    # Weights change, the files stay: nothing happens.
    same = follow_training_path((grown, DEMO_EVAL), dl.set_dataset(grown, 1, 3, "")[0], DEMO_EVAL)
    assert (same.eval_path, same.note) == (None, None)
    # An eval file of unknown owner stays while a file it was chosen with trains, and is flagged when none does.
    odd = "assets/datasets/demo_dpo_eval.jsonl"  # its partner demo_dpo_train.jsonl is not in these lists
    stays = follow_training_path((PREFERENCE, "x/unknown.jsonl"), grown, "x/unknown.jsonl")
    assert (stays.eval_path, stays.note) == (None, "")
    flagged = follow_training_path((grown, "x/unknown.jsonl"), DPO_TRAIN, "x/unknown.jsonl")
    assert flagged.eval_path is None and "previous training files `demo_sft_train.jsonl`" in flagged.note
    assert follow_training_path((DEMO_TRAIN, odd), others, odd).eval_path is None  # its partner trains now


# --- through the page's events ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tab(tmp_path_factory: pytest.TempPathFactory) -> tuple[gr.Blocks, Any, StudioContext]:
    with gr.Blocks() as demo:
        ctx = StudioContext(tmp_path_factory.mktemp("ws"), gr.State(None), gr.Tabs(), visitor=gr.State(None))
        form_ = build_train_tab(ctx)
    return demo, form_, ctx


def call(demo: gr.Blocks, fn: Any, args: list[Any], state: SessionState) -> list[Any]:
    """Run one event the way the server does (preprocess, fn, postprocess), without a browser."""
    return asyncio.run(demo.process_api(fn, args, state=state))["data"]


def event_of(demo: gr.Blocks, component: Any, trigger: str) -> Any:
    return next(fn for fn in demo.fns.values() if (component._id, trigger) in fn.targets)


def by_elem(demo: gr.Blocks, kind: type, **props: Any) -> Any:
    return next(
        c for c in demo.blocks.values() if isinstance(c, kind) and all(getattr(c, k) == v for k, v in props.items())
    )


def test_the_page_adds_picks_into_the_list_and_shows_its_table(tab: Any) -> None:
    demo, form_, _ = tab
    state = SessionState(demo)
    path_box = form_.components["data.path"]
    add = by_elem(demo, gr.Button, elem_id="train-add-dataset")
    value, note = call(demo, event_of(demo, add, "click"), [None, DEMO_TRAIN], state)
    assert value == f"[{{path: {DEMO_TRAIN}}}]" and "joins the list" in note
    bundled = by_elem(demo, gr.Dropdown, elem_id="train-bundled")
    (picked,) = call(demo, event_of(demo, bundled, "input"), [PREFERENCE, value], state)
    assert dataset_paths(picked) == [DEMO_TRAIN, PREFERENCE]
    show = next(fn for fn in demo.fns.values() if (path_box._id, "change") in fn.targets and len(fn.outputs) == 3)
    table, entries, box = call(demo, show, [None, picked], state)
    assert table["data"] == [[0, "demo_sft_train.jsonl", 1, "all"], [1, "demo_preference.jsonl", 1, "all"]]
    assert entries["choices"] == [["0: demo_sft_train.jsonl", 0], ["1: demo_preference.jsonl", 1]]
    assert box["visible"] is True
    apply = by_elem(demo, gr.Button, elem_id="train-dataset-apply")
    value, note = call(demo, event_of(demo, apply, "click"), [None, picked, 0, 2, "5"], state)
    assert note == "" and dl.table_rows(value)[0] == [0, "demo_sft_train.jsonl", 2, 5]
    remove = by_elem(demo, gr.Button, elem_id="train-dataset-remove")
    value, _ = call(demo, event_of(demo, remove, "click"), [None, value, 1], state)
    assert dl.table_rows(value) == [[0, "demo_sft_train.jsonl", 2, 5]]
    table, _, box = call(demo, show, [None, DEMO_TRAIN], state)  # one path again: no table
    assert table["data"] == [] and box["visible"] is False
