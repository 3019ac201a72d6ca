"""Exact-match evaluation of a chat model on conversational rows.

Each row is ``{"messages": [..., {"role": "assistant", "content": reference}]}``, with its ``images`` for a
vision-language model (whose processor takes the tokenizer's place). The messages before
the final assistant turn are the prompt; the model answers by greedy decoding through the tokenizer's
chat template, and the answer counts when its stripped text equals the stripped reference.

Generation is batched with left padding (so every prompt ends where generation starts) and stops at the
tokenizer's eos token. ``generate_completions`` gives the completions as generated (text and token ids), which the
rewards scoring of GRPO runs hands to their reward functions (engine.evaluate.rewards). This module imports torch
and transformers only; never gradio.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from engine.config.vision import DEFAULT_MAX_PIXELS
from engine.training.vision import text_tokenizer

Message = dict[str, str]
Row = dict[str, Any]


@dataclass(frozen=True)
class Prediction:
    """One evaluated row: the prompt messages, the reference answer, the model's answer."""

    prompt: list[Message]
    reference: str
    prediction: str

    @property
    def correct(self) -> bool:
        """Whether the prediction matches the reference exactly (after stripping whitespace)."""
        return self.prediction.strip() == self.reference.strip()


def split_row(row: Row) -> tuple[list[Message], str]:
    """Split a conversational row into its prompt messages and the final assistant reference."""
    messages = row["messages"]
    if not messages or messages[-1]["role"] != "assistant":
        raise ValueError("each row must end with an assistant message (the reference answer)")
    return messages[:-1], messages[-1]["content"]


def model_prompt(row: Row, prompt: list[Message], max_pixels: int) -> list[dict[str, Any]]:
    """The prompt as the model reads it: the messages, or for a vision row (one with ``images``) the content parts
    with its images that precede the answer (engine.data.vision_sets.with_images)."""
    if "images" not in row:
        return prompt
    from engine.data.vision_rows import count_placeholders
    from engine.data.vision_sets import with_images

    return with_images(prompt, row["images"][: count_placeholders(prompt)], max_pixels)


@dataclass(frozen=True)
class Completion:
    """One generated answer as TRL's GRPOTrainer hands it to reward functions: the text decoded without special
    tokens (not stripped), and the new token ids up to and including the eos token (no padding)."""

    text: str
    ids: list[int]


@torch.inference_mode()
def _generate_batch(model: Any, tokenizer: Any, prompts: list[list[Message]], max_new_tokens: int) -> list[Completion]:
    """Greedy completions for one batch of prompts (``tokenizer`` may be a vision-language model's processor, the
    prompts then content parts with their images: engine.data.vision_sets.with_images)."""
    text = text_tokenizer(tokenizer)
    padding = {"padding": True}
    # A processor takes the tokenizer's arguments in processor_kwargs (transformers 5.4).
    arguments = {"processor_kwargs": padding} if text is not tokenizer else padding
    encoded = tokenizer.apply_chat_template(
        prompts, add_generation_prompt=True, tokenize=True, return_tensors="pt", return_dict=True, **arguments
    ).to(model.device)
    output = model.generate(
        **encoded,
        max_new_tokens=max_new_tokens,
        do_sample=False,
        eos_token_id=text.eos_token_id,
        pad_token_id=text.pad_token_id,
    )
    rows = [_until_eos(row.tolist(), text.eos_token_id) for row in output[:, encoded["input_ids"].shape[1] :]]
    texts = text.batch_decode(rows, skip_special_tokens=True)
    return [Completion(text, ids) for text, ids in zip(texts, rows, strict=True)]


def _until_eos(ids: list[int], eos: int | None) -> list[int]:
    """A row's new tokens up to its first eos (kept): generate pads the rows that end before the others."""
    return ids[: ids.index(eos) + 1] if eos in ids else ids


def generate_completions(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[list[Message]],
    max_new_tokens: int = 32,
    batch_size: int = 64,
) -> list[Completion]:
    """Answer every prompt greedily through the chat template (with the generation prompt).

    Args:
        model: a causal LM (transformers or peft); it is put in eval mode, then back in the mode it was in.
        tokenizer: its tokenizer, with a chat template, an eos token and a pad token.
        prompts: conversations to answer, each a list of messages.
        max_new_tokens: the longest answer to generate; longer answers are cut.
        batch_size: prompts per generate call.

    Returns:
        One Completion per prompt, in order.
    """
    text = text_tokenizer(tokenizer)
    padding_side = text.padding_side
    text.padding_side = "left"  # generation continues from the last position of each row
    was_training = model.training
    model.eval()
    try:
        completions: list[Completion] = []
        for start in range(0, len(prompts), batch_size):
            completions += _generate_batch(model, tokenizer, list(prompts[start : start + batch_size]), max_new_tokens)
    finally:
        text.padding_side = padding_side
        model.train(was_training)
    return completions


def generate_predictions(
    model: Any,
    tokenizer: Any,
    rows: Sequence[Row],
    max_new_tokens: int = 32,
    batch_size: int = 64,
    max_pixels: int = DEFAULT_MAX_PIXELS,
) -> list[Prediction]:
    """Answer every row's prompt greedily and pair each answer (stripped) with its reference.

    Args:
        model: a causal LM (transformers or peft); it is put in eval mode, then back in the mode it was in.
        tokenizer: its tokenizer, with a chat template, an eos token and a pad token.
        rows: conversational rows, each ending with the reference assistant message.
        max_new_tokens: the longest answer to generate; longer answers are cut (and so wrong).
        batch_size: prompts per generate call.
        max_pixels: a vision row's images are scaled down to this many pixels (the run's vision.max_pixels).

    Returns:
        One Prediction per row, in order.
    """
    prompts, references = zip(*(split_row(row) for row in rows), strict=True) if rows else ((), ())
    shown = [model_prompt(row, list(prompt), max_pixels) for row, prompt in zip(rows, prompts, strict=True)]
    answers = generate_completions(model, tokenizer, shown, max_new_tokens, batch_size)
    return [
        Prediction(prompt=list(p), reference=r, prediction=a.text.strip())
        for p, r, a in zip(prompts, references, answers, strict=True)
    ]


def exact_match_accuracy(
    model: Any,
    tokenizer: Any,
    rows: Sequence[Row],
    max_new_tokens: int = 32,
    batch_size: int = 64,
    max_pixels: int = DEFAULT_MAX_PIXELS,
) -> float:
    """The fraction of rows (0.0 to 1.0) whose greedy answer equals the reference exactly.

    See ``generate_predictions`` for the arguments. An empty ``rows`` scores 0.0.
    """
    predictions = generate_predictions(model, tokenizer, rows, max_new_tokens, batch_size, max_pixels)
    if not predictions:
        return 0.0
    return sum(p.correct for p in predictions) / len(predictions)
