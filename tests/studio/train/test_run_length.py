"""How long a run is: max_steps 0 is refused at the field and by the config (transformers trained one step, the
Monitor showed "step 1 / ?" and the run ended COMPLETED), and a warm-up as long as the run or longer is warned of
before Start: beside Start for a run of max_steps, in the dataset check for a run of epochs (its steps are known once
the rows are counted)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gradio as gr
import pytest

from engine.config import ConfigError, parse_config
from engine.store.workspace import runs_dir
from studio.context import StudioContext
from studio.demo.caller import Caller
from studio.i18n.catalog import text
from studio.train import actions, starting
from studio.train.run_length import WARMUP_TOO_LONG
from studio.train.tab import build_train_tab
from tests.helpers.pages import call_event as call

NO_STEP = "0 runs no step: give the number of optimizer steps (1 or more), or -1 to run num_epochs"


@pytest.fixture(scope="module")
def tab(tmp_path_factory: pytest.TempPathFactory) -> tuple[gr.Blocks, Any]:
    with gr.Blocks() as blocks:
        ctx = StudioContext(tmp_path_factory.mktemp("ws"), gr.State(None), gr.Tabs(), visitor=gr.State(None))
        form = build_train_tab(ctx)
    return blocks, form


def preset_with(**changes: Any) -> dict[str, Any]:
    """The demo preset the page opens with (600 steps, warm-up 0.05), with some fields changed."""
    values = actions.starting_values()
    values.update({path.replace("__", "."): value for path, value in changes.items()})
    return values


def test_the_config_refuses_max_steps_0_and_takes_1_and_minus_1() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config({"train": {"max_steps": 0}})
    assert caught.value.by_field() == {"train.max_steps": NO_STEP}
    assert parse_config({"train": {"max_steps": 1}}).train.max_steps == 1
    assert parse_config({"train": {"max_steps": -1}}).train.max_steps == -1


def test_max_steps_0_is_refused_at_its_field_and_starts_nothing(tab: Any, tmp_path: Path) -> None:
    blocks, form = tab
    values = preset_with(train__max_steps=0)
    out = call(blocks, "on_change", [None, *(values[path] for path in form.paths)])
    slot = dict(zip(form.paths, out[3:], strict=True))["train.max_steps"]
    assert slot["visible"] is True and NO_STEP in slot["value"]
    started: list[Path] = []
    result = starting.start_run(Caller(tmp_path), values, started.append)
    assert result.message.startswith("✗ Not started") and result.errors == {"train.max_steps": NO_STEP}
    assert started == [] and not runs_dir(tmp_path).exists()


def test_a_warmup_longer_than_the_run_is_warned_of_beside_start(tab: Any) -> None:
    blocks, form = tab
    warning = text(WARMUP_TOO_LONG, "en", warmup="700", steps="600")
    assert warning.startswith("The warm-up (700 steps) is as long as the run (600 steps) or longer")
    values = preset_with(train__warmup=700)
    out = call(blocks, "on_change", [None, *(values[path] for path in form.paths)])
    assert out[2] == f"⚠ {warning}  " and not out[0].startswith("# The form has problems")  # a warning, no error
    japanese = call(blocks, "on_change", [None, *(values[path] for path in form.paths)], lang="ja")[2]
    assert japanese == f"⚠ {text(WARMUP_TOO_LONG, 'ja', warmup='700', steps='600')}  " != out[2]
    as_long = actions.preview(Caller(Path("unused")), preset_with(train__warmup=600)).warnings
    assert as_long == [text(WARMUP_TOO_LONG, "en", warmup="600", steps="600")]
    for fits in (599, 0.5, 0.99, 0):  # fewer steps, or a fraction of the run
        assert actions.preview(Caller(Path("unused")), preset_with(train__warmup=fits)).warnings == [], fits
    assert call(blocks, "on_change", [None, *(preset_with()[path] for path in form.paths)])[2] == ""


def test_an_epoch_runs_warmup_is_weighed_once_the_rows_are_counted(tmp_path: Path) -> None:
    # The demo set: 2,000 rows, 200 of them held out; 1,800 in batches of 16 are 113 steps an epoch.
    values = preset_with(train__max_steps=-1, train__num_epochs=1, train__warmup=120)
    assert actions.preview(Caller(tmp_path), values).warnings == []  # the rows are not counted yet
    summary = actions.check_data(Caller(tmp_path), {**values, "data.eval_path": "", "data.eval_size": 200}, False)
    assert "**rows** 1,800 train / 200 eval" in summary.summary
    assert f"⚠ {text(WARMUP_TOO_LONG, 'en', warmup='120', steps='113')}" in summary.summary
    two_epochs = {**values, "data.eval_path": "", "data.eval_size": 200, "train.num_epochs": 2}
    assert "warm-up" not in actions.check_data(Caller(tmp_path), two_epochs, False).summary  # 226 steps
    whole = {**values, "data.eval_path": "", "train.warmup": 125}  # all 2,000 rows: 125 steps
    assert "warm-up" not in actions.check_data(Caller(tmp_path), {**whole, "train.warmup": 124}, False).summary
    in_korean = actions.check_data(Caller(tmp_path, language="ko"), whole, False)
    assert text(WARMUP_TOO_LONG, "ko", warmup="125", steps="125") in in_korean.summary
