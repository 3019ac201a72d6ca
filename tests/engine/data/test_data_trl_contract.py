"""The contract with TRL's SFTTrainer: our pre-tokenized columns become the labels it trains on.

No training here: building the trainer runs its dataset preparation, which is where labels are made.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from data_helpers import chat, make_config

from engine.data import prepare_datasets


@pytest.fixture(scope="module")
def trainer_for(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Any]:
    pytest.importorskip("trl")
    from transformers import LlamaConfig, LlamaForCausalLM
    from trl import SFTConfig, SFTTrainer

    output_dir = tmp_path_factory.mktemp("sft")

    def build(prepared: Any, tokenizer: Any, completion_only_loss: bool | None) -> Any:
        config = LlamaConfig(
            vocab_size=len(tokenizer),
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=2,
        )
        args = SFTConfig(
            output_dir=str(output_dir),
            completion_only_loss=completion_only_loss,
            max_length=64,
            use_cpu=True,
            bf16=False,
            report_to=[],
            disable_tqdm=True,
        )
        return SFTTrainer(
            model=LlamaForCausalLM(config),
            args=args,
            train_dataset=prepared.train,
            eval_dataset=prepared.eval,
            processing_class=tokenizer,
        )

    return build


def test_completion_mask_becomes_labels_only_with_completion_only_loss_true(
    trainer_for: Callable[..., Any], tokenizer: Any, write_jsonl: Callable[..., Path]
):
    rows = [chat(f"Question {number}", f"answer {number}") for number in range(6)]
    prepared = prepare_datasets(make_config(write_jsonl(rows), eval_size=2), tokenizer)
    source = prepared.train[0]
    expected = [
        token if bit else -100 for token, bit in zip(source["input_ids"], source["completion_mask"], strict=True)
    ]

    trainer = trainer_for(prepared, tokenizer, completion_only_loss=True)
    assert trainer.train_dataset[0]["input_ids"] == source["input_ids"]
    assert trainer.train_dataset[0]["labels"] == expected
    assert -100 in trainer.eval_dataset[0]["labels"]

    # TRL's default (None) means "only for prompt/completion columns": our mask would be ignored and every
    # token would train. The trainer must therefore never leave completion_only_loss at None.
    trainer = trainer_for(prepared, tokenizer, completion_only_loss=None)
    assert trainer.train_dataset[0]["labels"] == source["input_ids"]
