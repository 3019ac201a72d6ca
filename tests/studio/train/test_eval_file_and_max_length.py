"""After a new training file the dataset panel neither keeps the eval file of the one before nor leaves most rows
cut short without a word: the eval path follows the training path (studio.train.eval_pairing), and the check
suggests a max length from the token counts it already has (studio.train.lengths), with a button that uses it.

The numbers come from the real bundled sets, the real LLaMA-Factory files beside the repository and the demo
model's tokenizer; the expected suggestion is counted here from lengths tokenized without truncation.
"""

from __future__ import annotations

import asyncio
import json
import math
import shutil
from pathlib import Path
from typing import Any

import gradio as gr
import pytest
from gradio.state_holder import SessionState

from engine.config import RunConfig
from engine.config.data import DataSection
from engine.data.pipeline import select_rows, tokenize_rows
from engine.data.preview import check_tokens
from engine.store.paths import PROJECT_ROOT
from studio.context import StudioContext
from studio.demo.policy import DemoPolicy
from studio.form.values import default_values, values_to_config
from studio.i18n.widgets import marked
from studio.train import actions
from studio.train import dataset as dp
from studio.train.eval_pairing import HOLD_OUT, LOADED, follow_training_path, training_partner
from studio.train.lengths import TRUNCATED_SHARE, suggest_max_length
from studio.train.tab import build_train_tab

SHARED = (PROJECT_ROOT / "../shared/datasets").resolve()
BUNDLED = PROJECT_ROOT / "assets" / "datasets"
DEMO_TRAIN = "assets/datasets/demo_sft_train.jsonl"
DEMO_EVAL = "assets/datasets/demo_sft_eval.jsonl"
PREFERENCE = "assets/datasets/demo_preference.jsonl"
NO_CUT = 1_000_000  # a max_length no row reaches: every length counted whole


@pytest.fixture(scope="module")
def shared() -> Path:
    """The real LLaMA-Factory demo files beside the repository; skipped where they are absent."""
    if not SHARED.is_dir():
        pytest.skip(f"shared datasets not found at {SHARED}")
    return SHARED


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    """The demo model's tokenizer, as the dataset panel loads it."""
    return dp.get_tokenizer(RunConfig())


def form(path: str | Path, max_length: int = 64, eval_path: str = "") -> dict[str, Any]:
    """The Train form's widget values with a training file, eval file and max length."""
    values = default_values()
    values.update({"data.path": str(path), "data.eval_path": eval_path, "train.max_length": max_length})
    return values


def whole_lengths(path: Path, tokenizer: Any) -> list[int]:
    """Tokens of every training row of a file, none truncated."""
    data = DataSection(path=str(path))
    loaded, indices, _, _ = select_rows(data, 42)
    return [row.length for row in tokenize_rows(loaded, indices, tokenizer, data, NO_CUT).rows]


def shortest_fit(lengths: list[int]) -> int:
    """The smallest multiple of 8 that leaves at most TRUNCATED_SHARE of the rows longer (counted one by one)."""
    tokens = 8
    while sum(length > tokens for length in lengths) > TRUNCATED_SHARE * len(lengths):
        tokens += 8
    return tokens


def demo_context() -> int:
    """The demo model's context length, from its config.json."""
    return json.loads((PROJECT_ROOT / "assets" / "demo-model" / "config.json").read_text())["max_position_embeddings"]


# --- the eval file follows the training file ---------------------------------------------------------------------


def test_a_bundled_eval_file_pairs_with_its_training_file_by_name(tmp_path: Path) -> None:
    assert training_partner(DEMO_EVAL) == (BUNDLED / "demo_sft_train.jsonl").resolve()
    assert training_partner(DEMO_TRAIN) is None and training_partner(PREFERENCE) is None
    for eval_name, train_name in (("set-TEST.jsonl", "set-TRAIN.jsonl"), ("qa_val.json", "qa_train.json")):
        (tmp_path / eval_name).write_text("{}\n")
        assert training_partner(str(tmp_path / eval_name)) is None  # no training file of that name yet
        (tmp_path / train_name).write_text("{}\n")
        assert training_partner(str(tmp_path / eval_name)) == (tmp_path / train_name).resolve()
    (tmp_path / "medieval.jsonl").write_text("{}\n")
    (tmp_path / "medtrain.jsonl").write_text("{}\n")
    assert training_partner(str(tmp_path / "medieval.jsonl")) is None  # "eval" inside a word is no eval word


def test_an_upload_clears_the_demo_presets_eval_file_and_says_so(tmp_path: Path, shared: Path) -> None:
    start = actions.starting_values()  # the demo preset the page opens with
    assert (start["data.path"], start["data.eval_path"]) == (DEMO_TRAIN, DEMO_EVAL)
    upload = tmp_path / "upload" / "alpaca_en_demo.json"  # where Gradio leaves an upload
    upload.parent.mkdir()
    shutil.copyfile(shared / "alpaca_en_demo.json", upload)
    uploaded = str(dp.copy_upload(upload, tmp_path))

    follow = follow_training_path((DEMO_TRAIN, DEMO_EVAL), uploaded, DEMO_EVAL)
    assert follow.eval_path == "" and follow.seen == (uploaded, "")
    assert follow.note and f"`{DEMO_EVAL}` belonged to `demo_sft_train.jsonl`" in follow.note
    assert "cleared" in follow.note and "data.eval_size" in follow.note
    check = dp.check_dataset(form(uploaded, eval_path=follow.eval_path), with_tokens=False, workspace=tmp_path)
    assert check.error == "" and "999 train / 0 eval" in check.summary and "Eval file" not in check.summary
    # A second check of the same file (the path box losing focus again) changes nothing.
    again = follow_training_path(follow.seen, uploaded, "")
    assert (again.eval_path, again.note, again.seen) == (None, None, (uploaded, ""))


def test_an_eval_file_cleared_while_the_run_evaluates_is_replaced_by_held_out_rows(tmp_path: Path, shared: Path):
    """The demo preset evaluates every few steps: its eval file cleared with nothing held out would leave Start
    refusing the run ("evaluation needs eval data"), so part of the training rows is held out instead."""
    upload = tmp_path / "alpaca_en_demo.json"
    shutil.copyfile(shared / "alpaca_en_demo.json", upload)
    follow = follow_training_path((DEMO_TRAIN, DEMO_EVAL), str(upload), DEMO_EVAL, holds_out=False)
    assert (follow.eval_path, follow.eval_size) == ("", HOLD_OUT)
    assert f"cleared, and data.eval_size set to {HOLD_OUT}" in follow.note
    values = {**actions.starting_values(), "data.path": str(upload), "data.eval_path": "", "data.eval_size": HOLD_OUT}
    config = values_to_config(values)  # what Start validates: accepted
    assert config.train.eval_strategy == "steps" and config.data.eval_size == HOLD_OUT
    check = dp.check_dataset({**form(upload), "data.eval_size": HOLD_OUT}, with_tokens=False, workspace=tmp_path)
    assert check.error == "" and "899 train / 100 eval" in check.summary, check.summary


def test_a_bundled_pick_keeps_only_the_eval_file_of_the_picked_set() -> None:
    other = follow_training_path((DEMO_TRAIN, DEMO_EVAL), PREFERENCE, DEMO_EVAL)
    assert other.eval_path == "" and other.note and "cleared" in other.note
    # Coming back to the demo's training file with its eval file (a config had paired them otherwise): kept.
    back = follow_training_path((PREFERENCE, DEMO_EVAL), DEMO_TRAIN, DEMO_EVAL)
    assert (back.eval_path, back.note, back.seen) == (None, "", (DEMO_TRAIN, DEMO_EVAL))
    # The same file written another way is no change of training file.
    same = follow_training_path((DEMO_TRAIN, DEMO_EVAL), str(PROJECT_ROOT / DEMO_TRAIN), DEMO_EVAL)
    assert (same.eval_path, same.note) == (None, None)


def test_a_loaded_config_keeps_its_eval_file_and_an_unpaired_one_is_flagged_not_cleared(tmp_path: Path) -> None:
    loaded = follow_training_path((DEMO_TRAIN, DEMO_EVAL), PREFERENCE, DEMO_EVAL, LOADED)
    assert (loaded.eval_path, loaded.note, loaded.seen) == (None, "", (PREFERENCE, DEMO_EVAL))
    first, second, mine = (str(tmp_path / name) for name in ("first.jsonl", "second.jsonl", "holdout.jsonl"))
    Path(mine).write_text("{}\n")  # no training file pairs with it by name: whose it is cannot be told
    flagged = follow_training_path((first, mine), second, mine)
    assert flagged.eval_path is None and flagged.note and flagged.note.startswith("⚠")
    assert f"`{mine}` was chosen with the previous training file `first.jsonl`" in flagged.note
    cleared_by_hand = follow_training_path(flagged.seen, second, "")
    assert (cleared_by_hand.eval_path, cleared_by_hand.note) == (None, "")  # the flag goes with the eval file
    both = follow_training_path((first, ""), second, DEMO_EVAL)  # eval file set with the new training file
    assert (both.eval_path, both.note) == (None, "")


# --- a max length suggested from the token counts -----------------------------------------------------------------


def test_identity_rows_get_the_shortest_max_length_that_keeps_95_percent_whole(shared: Path, tokenizer: Any) -> None:
    lengths = whole_lengths(shared / "identity.json", tokenizer)
    expected = shortest_fit(lengths)
    assert 64 < expected < demo_context()  # the rows decide, not the model's context
    check = dp.check_dataset(form(shared / "identity.json"), workspace=shared)
    too_long = sum(length > 64 for length in lengths)
    assert f"{too_long} of {len(lengths)} rows are longer than max_length 64" in check.summary
    assert check.max_length == expected
    assert f"Suggested: **max length {expected}** (95% of the rows fit in it)" in check.summary
    # Using it ends the advice; 8 tokens fewer would not have done.
    used = dp.check_dataset(form(shared / "identity.json", max_length=expected), workspace=shared)
    assert used.error == "" and used.max_length is None and "cut short" not in used.summary
    assert sum(length > expected - 8 for length in lengths) > TRUNCATED_SHARE * len(lengths)


def test_alpaca_rows_are_suggested_the_models_context_at_most(shared: Path, tokenizer: Any) -> None:
    """The issue's case: alpaca_en_demo under the demo preset's max_length 64."""
    context = demo_context()
    lengths = whole_lengths(shared / "alpaca_en_demo.json", tokenizer)
    assert shortest_fit(lengths) > context  # the rows would take more than the model does
    check = dp.check_dataset(form(shared / "alpaca_en_demo.json"), workspace=shared)
    too_long = sum(length > 64 for length in lengths)
    assert f"{too_long} of {len(lengths)} rows" in check.summary and too_long / len(lengths) > 0.9
    assert check.max_length == context
    assert f"**max length {context}** (the model's context is {context} tokens" in check.summary
    at_context = dp.check_dataset(form(shared / "alpaca_en_demo.json", max_length=context), workspace=shared)
    assert at_context.max_length is None and "so max_length cannot grow" in at_context.summary


def test_the_demos_cap_bounds_the_suggestion(shared: Path, tokenizer: Any) -> None:
    cap = DemoPolicy().max_length
    lengths = whole_lengths(shared / "alpaca_en_demo.json", tokenizer)
    free = suggest_max_length(lengths, 0, 64)
    assert free is not None and free.measured and free.suggestion == shortest_fit(lengths)
    capped = suggest_max_length(lengths, 0, 64, {"the demo's limit": cap, "the model's context": None})
    assert capped is not None and capped.suggestion == min(shortest_fit(lengths), cap)
    none_left = suggest_max_length(lengths, 0, cap, {"the demo's limit": cap})
    assert none_left is not None and none_left.suggestion is None
    assert "The demo's limit is 1,024 tokens, so max_length cannot grow" in none_left.markdown()
    # Through the check, a cap below both the rows' need and the model's context decides.
    identity = dp.check_dataset(form(shared / "identity.json"), workspace=shared, max_length_cap=128)
    assert identity.max_length == 128 < shortest_fit(whole_lengths(shared / "identity.json", tokenizer))


def test_rows_dropped_uncounted_make_a_longer_suggestion_to_check_again(shared: Path, tokenizer: Any) -> None:
    config = RunConfig.model_validate(
        {"data": {"path": str(shared / "alpaca_en_demo.json")}, "train": {"max_length": 64}}
    )
    checked = check_tokens(config, tokenizer)  # the counts the panel has: dropped rows have none
    dropped = checked.report.num_dropped
    assert dropped > TRUNCATED_SHARE * (len(checked.lengths) + dropped)
    advice = suggest_max_length(checked.lengths, dropped, 64)
    assert advice is not None and not advice.measured and advice.suggestion is not None
    assert advice.suggestion >= max(checked.lengths) and advice.suggestion % 8 == 0
    assert "check again" in advice.markdown()


def test_no_advice_when_few_rows_are_cut(tokenizer: Any) -> None:
    lengths = whole_lengths(BUNDLED / "demo_sft_train.jsonl", tokenizer)
    assert max(lengths) <= 64
    check = dp.check_dataset(form(DEMO_TRAIN))
    assert check.error == "" and check.max_length is None and "cut short" not in check.summary
    fits = shortest_fit(lengths)
    assert suggest_max_length(lengths, 0, fits) is None
    assert suggest_max_length(lengths, 0, math.floor(fits / 2)) is not None


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


def widgets(form_: Any, values: dict[str, Any]) -> list[Any]:
    """Widget values in the order of the form's inputs."""
    return [values[path] for path in form_.paths]


def after(demo: gr.Blocks, fn: Any) -> Any:
    """The event chained with .then after ``fn``."""
    return next(other for other in demo.fns.values() if other.trigger_after == fn._id)


def by_elem(demo: gr.Blocks, kind: type, **props: Any) -> Any:
    """The page's component of ``kind`` whose attributes hold ``props``."""
    return next(
        c for c in demo.blocks.values() if isinstance(c, kind) and all(getattr(c, k) == v for k, v in props.items())
    )


def test_a_bundled_pick_on_the_page_clears_the_eval_field_and_shows_why(tab: Any) -> None:
    demo, form_, _ = tab
    bundled = by_elem(demo, gr.Dropdown, elem_id="train-bundled")
    pick = next(fn for fn in demo.fns.values() if (bundled._id, "input") in fn.targets)
    rows_check = after(demo, pick)
    state = SessionState(demo)
    values = {**actions.starting_values(), "data.path": PREFERENCE}  # what the pick wrote into the path field
    out = call(demo, rows_check, [None, None, *widgets(form_, values)], state)
    eval_out, eval_size_out, _, notice = out[-4:]
    assert eval_out == "" and "`demo_sft_train.jsonl`, not to this dataset: cleared" in notice
    assert eval_size_out == HOLD_OUT  # the preset evaluates and held nothing out: rows are held out instead
    assert "demo_preference.jsonl is preference data" in out[2]  # the check ran on the picked file
    seen = next(i for i in rows_check.inputs if isinstance(i, gr.State) and i.value == (DEMO_TRAIN, DEMO_EVAL))
    assert state[seen._id] == (PREFERENCE, "")


def test_use_max_length_button_sets_the_suggestion(tab: Any, shared: Path, tokenizer: Any) -> None:
    demo, form_, ctx = tab
    (ctx.workspace / "datasets").mkdir(exist_ok=True)
    identity = shutil.copyfile(shared / "identity.json", ctx.workspace / "datasets" / "identity.json")
    expected = shortest_fit(whole_lengths(identity, tokenizer))
    button = by_elem(demo, gr.Button, elem_id="train-use-max-length")
    check_button = by_elem(demo, gr.Button, elem_id="train-check-dataset")
    trigger = next(fn for fn in demo.fns.values() if (check_button._id, "click") in fn.targets)
    tokens_check = after(demo, after(demo, trigger))
    state = SessionState(demo)
    out = call(demo, tokens_check, [None, *widgets(form_, form(identity))], state)
    assert out[3]["visible"] is True and out[3]["value"] == f"{marked('train.use_max_length')} {expected:,}"
    use = next(fn for fn in demo.fns.values() if (button._id, "click") in fn.targets)
    assert call(demo, use, [None], state) == [expected]  # the suggestion waits in the session's state
    # The press checks again with the new max_length (the click's outputs are in the widgets by then): no advice.
    rows_check = after(demo, use)
    used = widgets(form_, form(identity, max_length=expected))
    call(demo, rows_check, [None, None, *used], state)
    assert call(demo, after(demo, rows_check), [None, *used], state)[3]["visible"] is False
