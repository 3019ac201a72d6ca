"""Supervised fine-tuning (method sft): TRL's SFTTrainer on instruction, chat, prompt-completion, plain-text,
tool-calling and vision-language data (conversations with images, on a vision-language model), with the loss on
the answers. No section of its own: the shared ``train:`` knobs are its."""

from engine.training.methods.base import Method

METHOD = Method(
    name="sft",
    title="Supervised fine-tuning",
    summary="sft (supervised fine-tuning on instruction, chat, prompt-completion or plain-text data, with the loss "
    "on the answers)",
    formats=("alpaca", "conversational", "prompt_completion", "text", "tools", "vision"),
    package=__name__,
    rows_batched=True,
)
