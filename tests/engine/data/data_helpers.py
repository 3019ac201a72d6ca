"""Helpers for the data tests: a throwaway fast tokenizer, config and row builders, shared paths.

The tokenizers are trained in milliseconds, so the tests depend neither on the hub nor on the demo model.
A module of its own (not conftest) so test files can import it by a name no other test folder uses.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from engine.config import RunConfig, parse_config

REPO_ROOT = Path(__file__).resolve().parents[3]
SHARED_DATASETS = (REPO_ROOT / "../shared/datasets").resolve()
DEMO_MODEL = REPO_ROOT / "assets" / "demo-model"

# ChatML: the end-of-turn token is the eos, and a newline follows it (outside the answer's span).
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

_CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "Describe a process of making crepes. Mix the batter, heat the pan, and cook both sides.",
    "What is the capital of France? The capital of France is Paris.",
    "user assistant system: hello, how are you today? I am fine, thank you!",
    "Write a short poem about the sea and the sky and the wind.",
]


def build_tokenizer(chat_template: str | None, bos: str | None, eos: str) -> PreTrainedTokenizerFast:
    """A byte-level BPE (any text encodes) trained on a few sentences, wrapped as a transformers tokenizer."""
    specials = ["<pad>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"]
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(_CORPUS, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token=bos,
        eos_token=eos,
        pad_token="<pad>",
        additional_special_tokens=["<|im_start|>"],
        chat_template=chat_template,
        clean_up_tokenization_spaces=False,
    )


def make_config(path: Path | str, max_length: int = 1024, seed: int = 42, **data: Any) -> RunConfig:
    """A RunConfig whose data section reads ``path`` (other data fields as keyword arguments)."""
    return parse_config({"data": {"path": str(path), **data}, "train": {"max_length": max_length, "seed": seed}})


def chat(user: str, answer: str) -> dict[str, Any]:
    """A one-exchange conversational row."""
    return {"messages": [{"role": "user", "content": user}, {"role": "assistant", "content": answer}]}
