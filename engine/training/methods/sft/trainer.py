"""Supervised fine-tuning with TRL's SFTTrainer: instruction, chat, prompt-completion and plain-text data, with
the loss on the answers (engine.data masks the prompts).

The trainer is SFTTrainer with the model's own loss, without the per-step metrics the studio never shows. TRL
1.x computes every training loss through a fused LM head that also yields per-token entropy and top-1
accuracy, and reads both back with ``.item()`` on every step. The run directory records neither, and on the
small models this studio trains on a CPU that bookkeeping costs a measurable share of each step
(benchmarks/throughput.py). The rows the engine hands over already carry ``labels`` (-100 where no loss), so
the model's own causal-LM loss is the same objective; transformers' ``Trainer.compute_loss`` computes it,
with label smoothing, gradient-accumulation token counts and multi-process scaling handled as usual.

Trainer also recounts the model's parameters on every step (a walk over every module) to add up the run's
floating-point operations; the count cannot change while training, so it is taken once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.training.methods.base import TrainerParts

if TYPE_CHECKING:
    from engine.config import RunConfig
    from engine.training.hardware import Hardware


def prepare_data(config: RunConfig, tokenizer: Any) -> Any:
    """Tokenized train / eval datasets with labels (engine.data.prepare_datasets); for a vision-language model
    (``tokenizer`` is then its processor) rows whose images load as they are taken (engine.data.vision_sets)."""
    from engine.training.modality import is_vision_model

    if is_vision_model(config):
        from engine.data.vision_sets import prepare_vision_datasets

        return prepare_vision_datasets(config, tokenizer)
    from engine.data import prepare_datasets

    return prepare_datasets(config, tokenizer)


def training_kwargs(config: RunConfig, hardware: Hardware) -> dict[str, Any]:
    """SFTConfig's own arguments."""
    from engine.training.attention import resolve_padding_free
    from engine.training.modality import is_vision_model

    if is_vision_model(config):
        return vision_kwargs(config)
    train = config.train
    padding_free = resolve_padding_free(config, hardware)
    return {
        # TRL refuses a max_length with padding-free batches it does not pack, since it would not cut the rows
        # itself; engine.data has already cut them to train.max_length.
        "max_length": None if padding_free and not train.packing else train.max_length,
        "packing": train.packing,
        "padding_free": padding_free,
        # Length-grouped batches: less padding when batches are padded (engine.config refuses it for packing).
        "train_sampling_strategy": "group_by_length" if train.group_by_length else "random",
        "completion_only_loss": config.data.completion_only_loss,
        # engine.data hands over labelled rows already cut to max_length; only packing needs TRL's pass.
        "dataset_kwargs": None if train.packing else {"skip_prepare_dataset": True},
    }


def vision_kwargs(config: RunConfig) -> dict[str, Any]:
    """SFTConfig for a vision-language model: TRL's collator renders each batch through the processor (images
    included), keeps the loss on the assistant's answers with the template's generation markers, and cuts rows to
    max_length (engine.data.vision_sets dropped those whose image tokens the cut would split)."""
    return {
        "max_length": config.train.max_length,
        "packing": False,
        "padding_free": False,
        "train_sampling_strategy": "random",
        "completion_only_loss": False,
        "assistant_only_loss": config.data.completion_only_loss,
        "dataset_kwargs": None,
    }


def args_class() -> type:
    """TRL's SFTConfig."""
    from trl import SFTConfig

    return SFTConfig


def build_trainer(parts: TrainerParts) -> Any:
    """The lean SFTTrainer over the prepared datasets."""
    return lean_sft_trainer_class()(**parts.trainer_kwargs())


def lean_sft_trainer_class() -> type:
    """The SFTTrainer subclass, built on first use so importing the engine stays free of TRL."""
    from transformers import Trainer
    from trl import SFTTrainer

    class LeanSFTTrainer(SFTTrainer):
        """SFTTrainer whose loss is transformers' ``Trainer.compute_loss`` (the model's causal-LM loss)."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            # On a quantized base TRL casts every trainable parameter to bf16 (QLoRA's adapter weights, per the
            # paper), which takes in peft's full copies of the modules trained in full (modules_to_save: a
            # vision-language model's projector, embed_tokens). LoRA casts its input to its weights' dtype, but such
            # a copy is a plain layer: in a float32 run (any CPU run) its bf16 weights meet float32 activations and
            # the first step fails ("mat1 and mat2 must have the same dtype"). They go back to their own dtype.
            model = kwargs.get("model", args[0] if args else None)
            copies = full_copy_dtypes(model)
            super().__init__(*args, **kwargs)
            for name, param in self.model.named_parameters():
                if name in copies and param.dtype != copies[name]:
                    param.data = param.data.to(copies[name])

        def compute_loss(
            self, model: Any, inputs: dict[str, Any], return_outputs: bool = False, num_items_in_batch: Any = None
        ) -> Any:
            # The key-value cache is useless in training and clashes with gradient checkpointing.
            inputs = {**inputs, "use_cache": False}
            return Trainer.compute_loss(self, model, inputs, return_outputs, num_items_in_batch)

        def _track_num_input_tokens(self, inputs: dict[str, Any]) -> None:
            # Trainer counts the tokens that are not the pad token when a batch has no attention mask, as a
            # padding-free batch has not; with the eos token as pad token (engine.training.modeling) that would
            # leave out every answer's closing eos. Such a batch holds no padding: every token counts.
            if "attention_mask" in inputs or "position_ids" not in inputs:
                return super()._track_num_input_tokens(inputs)
            ids = inputs[getattr(self.model, "main_input_name", "input_ids")]
            self.state.num_input_tokens_seen += self.accelerator.gather(ids.new_tensor(ids.numel())).sum().item()
            return None

        def floating_point_ops(self, inputs: dict[str, Any]) -> int:
            ids = inputs.get(getattr(self.model, "main_input_name", "input_ids"))
            if ids is None or not hasattr(self.model, "num_parameters"):
                return 0
            counted = getattr(self, "_counted_parameters", None)
            if counted is None or counted[0] is not self.model:
                counted = (self.model, self.model.num_parameters(exclude_embeddings=True))
                self._counted_parameters = counted
            return 6 * ids.numel() * counted[1]

    return LeanSFTTrainer


def full_copy_dtypes(model: Any) -> dict[str, Any]:
    """The dtypes of the trainable parameters of peft's full-weight copies (``modules_to_save``), by name."""
    named = getattr(model, "named_parameters", None)
    if named is None:  # a model name: TRL loads it, and it has no copies yet
        return {}
    return {name: param.dtype for name, param in named() if param.requires_grad and ".modules_to_save." in name}
