"""Where a dataset is picked, the Train tab says how many of its training rows fit whole in max_length and how many
are longer than the model's context (the demo model reads 256 tokens, which cuts most rows of real datasets), in the
page's language, once the dataset check has counted the tokens.

The counts come from the real LLaMA-Factory alpaca demo file beside the repository and the demo model's tokenizer;
the expected ones are counted here from lengths tokenized without truncation.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
from pathlib import Path

import gradio as gr
import pytest
from gradio.state_holder import SessionState

from engine.config import RunConfig
from engine.config.data import DataSection
from engine.data.pipeline import select_rows, tokenize_rows
from engine.store.paths import PROJECT_ROOT
from studio.context import StudioContext
from studio.demo.caller import Caller
from studio.i18n.catalog import text
from studio.train import actions
from studio.train import dataset as dp
from studio.train.lengths import FIT_CONTEXT, FIT_ROWS, rows_that_fit
from studio.train.tab import build_train_tab
from tests.helpers.pages import page_request

ALPACA = (PROJECT_ROOT / "../shared/datasets/alpaca_en_demo.json").resolve()
NO_CUT = 1_000_000  # a max_length no row reaches: every length counted whole


@pytest.fixture(scope="module")
def alpaca() -> Path:
    if not ALPACA.is_file():
        pytest.skip(f"the shared alpaca demo file is not at {ALPACA}")
    return ALPACA


@pytest.fixture(scope="module")
def whole(alpaca: Path) -> list[int]:
    """Tokens of every training row of the alpaca file, none truncated, with the demo model's tokenizer."""
    tokenizer = dp.get_tokenizer(RunConfig())
    data = DataSection(path=str(alpaca))
    loaded, indices, _, _ = select_rows(data, 42)
    return [row.length for row in tokenize_rows(loaded, indices, tokenizer, data, NO_CUT).rows]


def demo_context() -> int:
    return json.loads((PROJECT_ROOT / "assets" / "demo-model" / "config.json").read_text())["max_position_embeddings"]


def expected(lengths: list[int], max_length: int, lang: str = "en") -> tuple[str, str]:
    """What the panel says, when max_length reaches the model's context (every longer row is cut or dropped), up to
    the count of rows cut (which of them are dropped the check decides), and its last sentence."""
    fit, over = sum(n <= max_length for n in lengths), sum(n > max_length for n in lengths)
    counts = {"fit": f"{fit:,}", "rows": f"{len(lengths):,}", "max_length": f"{max_length:,}"}
    head = text(FIT_ROWS, lang, **counts, cut="CUT", dropped="DROPPED").split("CUT")[0]
    return head, text(FIT_CONTEXT, lang, over=f"{over:,}", context=f"{demo_context():,}")


def test_the_counts_are_said_from_the_checks_lengths() -> None:
    said = rows_that_fit([10, 20, 300, 200], 1, 100, 256)
    assert said == (
        "⚠ **2 of 5 training rows fit whole in max_length 100 tokens**: 2 are cut short and 1 dropped (truncation "
        "left them no token to learn from). 1 of them are longer than the model's context (256 tokens): no "
        "max_length keeps those whole with this model; pick shorter rows or a model with a longer context."
    )
    assert rows_that_fit([10, 20], 0, 100, 256) == ""  # every row fits: nothing to say
    assert "context" not in rows_that_fit([10, 200], 0, 100, None)  # a model whose context is not known
    assert "context" not in rows_that_fit([10, 200], 0, 100, 4096)
    # max_length at the context: a dropped row is longer than the context too.
    assert text(FIT_CONTEXT, "en", over="2", context="256") in rows_that_fit([10, 300], 1, 256, 256)


def test_alpaca_rows_on_the_demo_model_are_counted_where_the_dataset_is_picked(
    alpaca: Path, whole: list[int], tmp_path: Path
) -> None:
    context = demo_context()
    assert context == 256 and sum(n > context for n in whole) > len(whole) / 2  # most real rows do not fit
    values = {**actions.starting_values(), "data.eval_path": "", "train.max_length": context}
    values["data.path"] = str(dp.copy_upload(shutil.copy(alpaca, tmp_path / alpaca.name), tmp_path))
    result = actions.check_data(Caller(tmp_path), values)
    rows_part, context_part = expected(whole, context)
    assert result.fit.startswith(rows_part) and result.fit.endswith(context_part)
    assert f"**{sum(n <= context for n in whole):,} of {len(whole):,} training rows fit whole" in result.fit
    cut, dropped = re.search(r"(\d+) are cut short and (\d+) dropped", result.fit).groups()  # type: ignore[union-attr]
    assert int(cut) + int(dropped) == sum(n > context for n in whole) and int(dropped) > 0
    in_korean = actions.check_data(Caller(tmp_path, language="ko"), values).fit
    rows_ko, context_ko = expected(whole, context, "ko")
    assert in_korean.startswith(rows_ko) and in_korean.endswith(context_ko) and in_korean != result.fit
    # The demo preset's own set fits its max_length: nothing is said.
    assert actions.check_data(Caller(tmp_path), actions.starting_values()).fit == ""


def test_the_page_shows_the_count_under_the_pickers(alpaca: Path, whole: list[int], tmp_path: Path) -> None:
    with gr.Blocks() as blocks:
        form = build_train_tab(StudioContext(tmp_path, gr.State(None), gr.Tabs(), visitor=gr.State(None)))
    fit_box = next(c for c in blocks.blocks.values() if getattr(c, "elem_id", None) == "train-rows-fit")
    tokens = next(fn for fn in blocks.fns.values() if fn.name == "check_tokens")
    assert tokens.outputs[-1] is fit_box
    rows = next(fn for fn in blocks.fns.values() if fn.name == "check_rows")
    assert fit_box in rows.outputs  # a new dataset's rows check clears the count of the one before
    values = {**actions.starting_values(), "data.eval_path": "", "train.max_length": 256}
    values["data.path"] = str(dp.copy_upload(shutil.copy(alpaca, tmp_path / alpaca.name), tmp_path))
    request = page_request("ja")
    args = [None, *(values[path] for path in form.paths)]
    said = asyncio.run(blocks.process_api(tokens, args, state=SessionState(blocks), request=request))["data"][-1]
    rows_ja, context_ja = expected(whole, 256, "ja")
    assert said.startswith(rows_ja) and said.endswith(context_ja)
