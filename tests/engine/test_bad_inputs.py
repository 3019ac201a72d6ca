"""The bad-input corpus through the engine: ``inspect_dataset`` in process, ``python -m engine check`` as a user
runs it. Every broken file ends in a message naming the row or the field, never a traceback or a write."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from engine.config import RunConfig, parse_config
from engine.data import DataError, inspect_dataset
from tests.data.bad_inputs.corpus import CASES, MAX_LENGTH, Case, build_corpus
from tests.helpers.engine_cli import run_check
from tests.helpers.side_effects import repo_new_files, tree


def data_section(case: Case, corpus: Path) -> dict[str, Any]:
    """The data settings that point the config at the case's file (as the training or the eval file)."""
    key = "eval_path" if case.as_eval else "path"
    return {key: str(corpus / case.file), **case.data}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_corpus(tmp_path_factory.mktemp("bad-inputs"))


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    """The demo model's tokenizer (the one a default run uses), loaded once."""
    from engine.training.modeling import load_tokenizer

    return load_tokenizer(RunConfig())


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_inspect_dataset_names_the_problem(case: Case, corpus: Path, tokenizer: Any) -> None:
    before = tree(corpus)
    data = parse_config({"data": data_section(case, corpus)}).data
    if case.expect:
        with pytest.raises(DataError) as caught:
            inspect_dataset(data, tokenizer, MAX_LENGTH)
        message = str(caught.value)
        assert all(fragment in message for fragment in case.expect), message
        assert "Traceback" not in message
    else:
        report = inspect_dataset(data, tokenizer, MAX_LENGTH)
        assert report.num_rows >= 1
        assert not case.warning or any(case.warning in warning for warning in report.warnings), report.warnings
    assert tree(corpus) == before


def test_a_multi_megabyte_row_is_cut_without_tokenizing_all_of_it(corpus: Path, tokenizer: Any) -> None:
    import time

    data = parse_config({"data": {"path": str(corpus / "huge_line.jsonl")}}).data
    started = time.perf_counter()
    report = inspect_dataset(data, tokenizer, MAX_LENGTH)
    # Tokenizing all 3 MB takes seconds; the head alone takes milliseconds.
    assert time.perf_counter() - started < 2.0
    assert report.num_tokens == MAX_LENGTH and report.num_too_long == 1


def test_the_head_of_a_long_row_tokenizes_like_the_whole_row(tokenizer: Any) -> None:
    from engine.data import resolve_chat_template
    from engine.data.tokenize import tokenize_row

    text = " ".join(f"token{index} {index * 7}" for index in range(20_000))  # far past the head's budget
    whole = tokenizer(text)["input_ids"]
    cut = tokenize_row(tokenizer, {"text": text}, "", MAX_LENGTH)
    assert cut.input_ids == whole[:MAX_LENGTH] and cut.truncated
    messages = [{"role": "user", "content": "Say a lot."}, {"role": "assistant", "content": text}]
    template = resolve_chat_template(tokenizer, None)
    row = tokenize_row(tokenizer, {"messages": messages}, template, MAX_LENGTH)
    full = tokenize_row(tokenizer, {"messages": messages}, template, 10**7)
    assert (row.input_ids, row.completion_mask) == (full.input_ids[:MAX_LENGTH], full.completion_mask[:MAX_LENGTH])
    assert row.truncated and 0 < row.num_loss_tokens < MAX_LENGTH


# --- the CLI ----------------------------------------------------------------------------------------------------


@pytest.mark.integration
@pytest.mark.parametrize("case", [case for case in CASES if case.cli], ids=lambda case: case.id)
def test_cli_check_names_the_problem_and_exits_2(case: Case, corpus: Path, tmp_path: Path) -> None:
    repo_before, corpus_before = repo_new_files(), tree(corpus)
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"data": data_section(case, corpus), "train": {"max_length": MAX_LENGTH}}))
    result = run_check(config, tmp_path)
    output = result.stdout + result.stderr
    assert "Traceback" not in output
    if case.expect:
        assert result.returncode == 2, output
        assert result.stderr.startswith("error: ")
        assert all(fragment in result.stderr for fragment in case.expect), result.stderr
    else:
        assert result.returncode == 0, output
        assert "ok: the config and dataset are ready to train" in result.stdout
        assert not case.warning or f"warning: {case.warning}" in result.stdout
    assert sorted(path.name for path in tmp_path.iterdir()) == ["config.yaml"]  # no run directory, no workspace
    assert tree(corpus) == corpus_before and repo_new_files() <= repo_before
