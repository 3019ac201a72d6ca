"""The dataset panel says the engine's dataset warnings in the page's language (studio.i18n.problems
.translate_warning reads each back into its template and values), and a tool-calling file's panel says how many rows
with tool calls train whole. The rows are LLaMA-Factory's real tool-calling demo file and the demo model's tokenizer.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engine.data.warnings import EVAL_FILE_PREFIX, EVAL_LABEL, WARNINGS, warning
from engine.store.paths import PROJECT_ROOT
from studio.form.values import default_values
from studio.i18n.catalog import LANGUAGES, SOURCE, placeholders, text
from studio.i18n.problems import translate_warning
from studio.train import dataset as dp

GLAIVE = (PROJECT_ROOT / "../shared/datasets/glaive_toolcall_en_demo.json").resolve()
OTHERS = [lang for lang in LANGUAGES if lang != SOURCE]


NUMBERS = {"count", "total", "whole", "max_length"}


def values_of(kind: str) -> dict[str, str]:
    """Values for a warning's placeholders, each distinct and easy to find again (counts are numbers)."""
    names = sorted(placeholders(WARNINGS[kind]))
    return {name: f"{index}0{index}" if name in NUMBERS else f"<{name}>" for index, name in enumerate(names, 3)}


@pytest.mark.parametrize("lang", OTHERS)
@pytest.mark.parametrize("kind", sorted(WARNINGS))
def test_every_dataset_warning_is_said_in_the_language_with_its_values(kind: str, lang: str) -> None:
    values = values_of(kind)
    english_text = warning(kind, **values)
    said = translate_warning(english_text, lang)
    assert said == text(f"warning.{kind}", lang, **values) != english_text
    assert all(value in said for value in values.values())


@pytest.mark.parametrize("lang", OTHERS)
def test_eval_rows_and_eval_file_warnings_name_the_eval_side_in_the_language(lang: str) -> None:
    values = {"count": "3", "total": "9", "max_length": "64"}
    eval_rows = translate_warning(warning("rows_too_long", label=EVAL_LABEL, **values), lang)
    assert text("warning.eval_label", lang) in eval_rows and EVAL_LABEL not in eval_rows
    on_file = translate_warning(f"{EVAL_FILE_PREFIX}: " + warning("rows_dropped", label="", **values), lang)
    assert on_file == f"{text('warning.eval_file', lang)}: {text('warning.rows_dropped', lang, label='', **values)}"
    # A warning that is not one of the templates stays as the engine wrote it.
    assert translate_warning("something else: entirely", lang) == "something else: entirely"


@pytest.fixture(scope="module")
def glaive() -> Path:
    if not GLAIVE.is_file():
        pytest.skip(f"shared datasets not found at {GLAIVE}")
    return GLAIVE


def form(path: Path, max_length: int) -> dict[str, Any]:
    values = default_values()
    values.update({"data.path": str(path), "data.eval_path": "", "data.eval_size": 0, "train.max_length": max_length})
    return values


def test_a_tool_calling_file_in_chinese_counts_its_tool_rows_and_keeps_no_english_warning(glaive: Path) -> None:
    rows = json.loads(glaive.read_text(encoding="utf-8"))
    calling = sum(any(turn["from"] == "function_call" for turn in row["conversations"]) for row in rows)

    check = dp.check_dataset(form(glaive, 512), workspace=glaive.parent, lang="zh-CN")

    assert check.error == ""
    assert f"**含工具调用的行** {calling}，其中 " in check.summary
    for words in ("rows are longer than", "rows with tool calls fit whole", "and will be truncated", "are dropped"):
        assert words not in check.summary, check.summary
    assert "将被截断" in check.summary
    # The preview starts with a row whose call trains (the file's first rows are plain chats).
    assert "&lt;tool_call&gt;" in check.examples.split('class="ts-example"')[1]


def test_the_same_file_at_the_demo_models_context_is_refused_naming_the_tool_rows(glaive: Path) -> None:
    rows = json.loads(glaive.read_text(encoding="utf-8"))
    calling = sum(any(turn["from"] == "function_call" for turn in row["conversations"]) for row in rows)
    check = dp.check_dataset(form(glaive, 256), workspace=glaive.parent)
    assert f"none of the {calling} rows with tool calls fits whole in max_length 256" in check.error


def test_the_refusal_is_said_in_chinese_naming_the_file(glaive: Path) -> None:
    rows = json.loads(glaive.read_text(encoding="utf-8"))
    calling = sum(any(turn["from"] == "function_call" for turn in row["conversations"]) for row in rows)
    check = dp.check_dataset(form(glaive, 256), workspace=glaive.parent, lang="zh-CN")
    said = text("warning.tool_rows_none", "zh-CN", count=str(calling), max_length="256")
    assert f"{glaive}: {said}" in check.error and "rows with tool calls" not in check.error
