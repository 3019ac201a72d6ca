"""The list of datasets ("Bundled sets") shows the set in use, bundled or uploaded, whatever put it in the path box
(it stayed blank), and a training set picked from it comes with its own eval set: picking demo_dpo_train pairs
demo_dpo_eval instead of clearing the eval file with a note."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

import gradio as gr
import pytest
from gradio.state_holder import SessionState

from engine.store.paths import PROJECT_ROOT
from studio.context import StudioContext
from studio.demo.caller import Caller
from studio.i18n.catalog import text
from studio.train import actions
from studio.train import dataset_list as dl
from studio.train.eval_pairing import PAIRED, PICKED, eval_partner, follow_training_path
from studio.train.tab import build_train_tab
from tests.helpers.pages import page_request
from tests.helpers.visitors import ALICE, DEMO

SFT_TRAIN, SFT_EVAL = "assets/datasets/demo_sft_train.jsonl", "assets/datasets/demo_sft_eval.jsonl"
DPO_TRAIN, DPO_EVAL = "assets/datasets/demo_dpo_train.jsonl", "assets/datasets/demo_dpo_eval.jsonl"
PREFERENCE = "assets/datasets/demo_preference.jsonl"


@pytest.fixture(scope="module")
def tab(tmp_path_factory: pytest.TempPathFactory) -> tuple[gr.Blocks, Any, Path]:
    workspace = tmp_path_factory.mktemp("ws")
    with gr.Blocks() as blocks:
        form = build_train_tab(StudioContext(workspace, gr.State(None), gr.Tabs(), visitor=gr.State(None)))
    return blocks, form, workspace


def run(blocks: gr.Blocks, fn: Any, args: list[Any], state: SessionState, lang: str | None = None) -> list[Any]:
    request = page_request(lang) if lang else None
    return asyncio.run(blocks.process_api(fn, args, state=state, request=request))["data"]


def named(blocks: gr.Blocks, name: str) -> Any:
    return next(fn for fn in blocks.fns.values() if fn.name == name)


def bundled_list(blocks: gr.Blocks) -> gr.Dropdown:
    return next(c for c in blocks.blocks.values() if isinstance(c, gr.Dropdown) and c.elem_id == "train-bundled")


# --- pairing ----------------------------------------------------------------------------------------------------


def test_a_training_file_names_its_eval_file_as_it_is_written(tmp_path: Path) -> None:
    assert eval_partner(DPO_TRAIN) == DPO_EVAL and eval_partner(SFT_TRAIN) == SFT_EVAL
    assert eval_partner(str(PROJECT_ROOT / DPO_TRAIN)) == str(PROJECT_ROOT / DPO_EVAL)
    assert eval_partner(PREFERENCE) is None and eval_partner(DPO_EVAL) is None and eval_partner("") is None
    (tmp_path / "qa-TRAIN.json").write_text("[]")
    assert eval_partner(str(tmp_path / "qa-TRAIN.json")) is None  # no eval file beside it yet
    (tmp_path / "qa-TEST.json").write_text("[]")
    assert eval_partner(str(tmp_path / "qa-TRAIN.json")) == str(tmp_path / "qa-TEST.json")
    (tmp_path / "retrain.json").write_text("[]")
    (tmp_path / "reeval.json").write_text("[]")
    assert eval_partner(str(tmp_path / "retrain.json")) is None  # "train" inside a word is no train word


def test_a_set_with_an_eval_set_takes_it_in_place_of_another_sets_eval_file() -> None:
    paired = follow_training_path((SFT_TRAIN, SFT_EVAL), DPO_TRAIN, SFT_EVAL, PICKED)
    note = text(PAIRED, "en", eval_file="demo_dpo_eval.jsonl", train_file="demo_dpo_train.jsonl")
    assert paired.eval_path == DPO_EVAL and paired.note == note and paired.seen == (DPO_TRAIN, DPO_EVAL)
    assert note == "ℹ Eval file set to `demo_dpo_eval.jsonl`, the eval set that goes with `demo_dpo_train.jsonl`."
    typed = follow_training_path((SFT_TRAIN, SFT_EVAL), DPO_TRAIN, SFT_EVAL)  # typed: the same, it is sure
    assert typed.eval_path == DPO_EVAL
    in_ja = follow_training_path((SFT_TRAIN, SFT_EVAL), DPO_TRAIN, SFT_EVAL, PICKED, "ja").note
    assert in_ja == text(PAIRED, "ja", eval_file="demo_dpo_eval.jsonl", train_file="demo_dpo_train.jsonl") != note
    # An empty eval path is filled for a pick from the list only; a set without an eval set still clears.
    assert follow_training_path((PREFERENCE, ""), DPO_TRAIN, "", PICKED).eval_path == DPO_EVAL
    assert follow_training_path((PREFERENCE, ""), DPO_TRAIN, "").eval_path is None
    cleared = follow_training_path((SFT_TRAIN, SFT_EVAL), PREFERENCE, SFT_EVAL, PICKED)
    assert cleared.eval_path == "" and "cleared" in (cleared.note or "")
    # An eval file chosen with the new set, or one of the user's own, is not replaced.
    assert follow_training_path((SFT_TRAIN, SFT_EVAL), DPO_TRAIN, PREFERENCE, PICKED).eval_path is None


def test_picking_demo_dpo_train_on_the_page_pairs_demo_dpo_eval(tab: Any) -> None:
    blocks, form, _ = tab
    bundled = bundled_list(blocks)
    pick = next(fn for fn in blocks.fns.values() if (bundled._id, "input") in fn.targets)
    rows_check = next(fn for fn in blocks.fns.values() if fn.trigger_after == pick._id)
    state = SessionState(blocks)
    assert run(blocks, pick, [DPO_TRAIN, SFT_TRAIN], state) == [DPO_TRAIN]
    values = {**actions.starting_values(), "data.path": DPO_TRAIN, "method": "dpo"}  # what the pick wrote
    out = run(blocks, rows_check, [None, None, *(values[path] for path in form.paths)], state)
    eval_out, eval_size_out, _, notice = out[-4:]
    assert eval_out == DPO_EVAL and eval_size_out == {"__type__": "update"}  # paired: nothing held out
    assert notice == text(PAIRED, "en", eval_file="demo_dpo_eval.jsonl", train_file="demo_dpo_train.jsonl")
    assert "**Eval file** `" in out[0] and out[0].split("**Eval file** `")[1].startswith(str(PROJECT_ROOT / DPO_EVAL))


# --- the list shows the set in use ------------------------------------------------------------------------------


def test_the_list_shows_the_set_the_page_opens_with(tab: Any) -> None:
    blocks, form, _ = tab
    assert form.components["data.path"].value == SFT_TRAIN
    assert bundled_list(blocks).value == SFT_TRAIN


def test_the_list_follows_the_path_box_bundled_or_uploaded(tab: Any) -> None:
    blocks, _, workspace = tab
    follow = named(blocks, "bundled_in_use")
    state = SessionState(blocks)

    def shown(path: Any) -> Any:
        update = run(blocks, follow, [None, path], state)[0]
        return update["value"], [value for _, value in update["choices"]]

    assert shown(DPO_TRAIN)[0] == DPO_TRAIN
    assert shown(str(PROJECT_ROOT / PREFERENCE))[0] == PREFERENCE  # the same file, written as a full path
    source = workspace / "incoming" / "mine.jsonl"
    source.parent.mkdir()
    shutil.copyfile(PROJECT_ROOT / SFT_TRAIN, source)
    copied, error = actions.upload_dataset(Caller(workspace), source)
    assert error == "" and copied is not None
    value, choices = shown(copied)
    assert value == copied and copied in choices  # an upload is listed and shown
    assert shown(f"[{{path: {DPO_TRAIN}}}, {{path: {SFT_TRAIN}}}]")[0] is None  # a list of datasets: none of them
    assert shown("")[0] is None and shown(str(workspace / "elsewhere.jsonl"))[0] is None


def test_the_demos_list_shows_a_visitors_upload_by_its_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRADIO_TEMP_DIR", str(tmp_path / "gradio"))  # where a browser's upload lands
    caller = Caller(tmp_path / "workspace", DEMO, ALICE)
    source = tmp_path / "gradio" / "upload" / "notes.jsonl"
    source.parent.mkdir(parents=True)
    shutil.copyfile(PROJECT_ROOT / SFT_TRAIN, source)
    name, error = actions.upload_dataset(caller, source)
    assert error == "" and name == "notes.jsonl"
    assert dl.in_use(caller, name)[1] == "notes.jsonl" and dl.in_use(caller, DPO_TRAIN)[1] == DPO_TRAIN
    assert dl.in_use(Caller(tmp_path / "workspace", DEMO, None), name)[1] is None  # nobody's upload: not listed
