"""Fixtures for the data tests: small throwaway fast tokenizers, file writers, the shared real datasets."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from data_helpers import CHATML_TEMPLATE, SHARED_DATASETS, build_tokenizer
from transformers import PreTrainedTokenizerFast


@pytest.fixture(scope="session")
def tokenizer() -> PreTrainedTokenizerFast:
    """A ChatML tokenizer whose eos is <|im_end|> (like Qwen); no BOS."""
    return build_tokenizer(CHATML_TEMPLATE, bos=None, eos="<|im_end|>")


@pytest.fixture(scope="session")
def plain_tokenizer() -> PreTrainedTokenizerFast:
    """A tokenizer without a chat template (so the default one applies), with BOS <s> and eos </s>."""
    return build_tokenizer(None, bos="<s>", eos="</s>")


@pytest.fixture
def shared_datasets() -> Path:
    """The real LLaMA-Factory demo files beside the repository; the test is skipped where they are absent."""
    if not SHARED_DATASETS.is_dir():
        pytest.skip(f"shared datasets not found at {SHARED_DATASETS}")
    return SHARED_DATASETS


@pytest.fixture
def write_jsonl(tmp_path: Path) -> Callable[..., Path]:
    """Write rows as JSON lines into tmp_path and return the path."""

    def write(rows: list[dict[str, Any]], name: str = "data.jsonl") -> Path:
        path = tmp_path / name
        path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
        return path

    return write
