"""The contract with TRL's SFTTrainer: our pre-tokenized columns become the labels it trains on.

No training here: building the trainer runs its dataset preparation (or, as the engine does without packing,
skips it), and its collator makes the batches.
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

    def build(prepared: Any, tokenizer: Any, completion_only_loss: bool | None, skip_prepare: bool = False) -> Any:
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
            dataset_kwargs={"skip_prepare_dataset": True} if skip_prepare else None,
        )
        return SFTTrainer(
            model=LlamaForCausalLM(config),
            args=args,
            train_dataset=prepared.train,
            eval_dataset=prepared.eval,
            processing_class=tokenizer,
        )

    return build


def test_our_labels_reach_the_batches_unchanged(
    trainer_for: Callable[..., Any], tokenizer: Any, write_jsonl: Callable[..., Path]
):
    rows = [chat(f"Question {number}", f"answer {number}") for number in range(6)]
    prepared = prepare_datasets(make_config(write_jsonl(rows), eval_size=2), tokenizer)
    trainer = trainer_for(prepared, tokenizer, completion_only_loss=True, skip_prepare=True)
    source = prepared.train[0]
    assert trainer.train_dataset[0]["labels"] == source["labels"] and -100 in source["labels"]
    batch = trainer.data_collator([prepared.train[0], prepared.train[1]])
    for row, (labels, mask) in enumerate(zip(batch["labels"].tolist(), batch["attention_mask"].tolist(), strict=True)):
        length = sum(mask)
        assert labels[:length] == prepared.train[row]["labels"]
        assert all(label == -100 for label in labels[length:])  # padding carries no loss


def test_packing_leaves_the_mask_to_trl_which_needs_completion_only_loss_true(
    trainer_for: Callable[..., Any], tokenizer: Any, write_jsonl: Callable[..., Path]
):
    rows = [chat(f"Question {number}", f"answer {number}") for number in range(6)]
    config = make_config(write_jsonl(rows), eval_size=2)
    config.train.packing = True
    prepared = prepare_datasets(config, tokenizer)
    source = prepared.train[0]
    assert "labels" not in prepared.train.column_names
    expected = [
        token if bit else -100 for token, bit in zip(source["input_ids"], source["completion_mask"], strict=True)
    ]
    trainer = trainer_for(prepared, tokenizer, completion_only_loss=True)
    assert trainer.train_dataset[0]["input_ids"] == source["input_ids"]
    assert trainer.train_dataset[0]["labels"] == expected
    # TRL's default (None) means "only for prompt/completion columns": the mask would be ignored and every
    # token would train. The engine therefore never leaves completion_only_loss at None.
    trainer = trainer_for(prepared, tokenizer, completion_only_loss=None)
    assert trainer.train_dataset[0]["labels"] == source["input_ids"]
