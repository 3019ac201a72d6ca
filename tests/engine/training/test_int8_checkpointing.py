"""Gradient checkpointing over an 8-bit base really drops the layers' activations.

bitsandbytes' int8 matmul keeps its input as an attribute of its autograd context, where non-reentrant
checkpointing's saved-tensor hooks cannot drop it: every quantized projection's input then stayed alive through the
forward (the 8-bit QLoRA memory estimate read 0.67 on an H100 and an H200). The engine checkpoints 8-bit runs
reentrantly (engine.training.hardware.checkpointing_kwargs). Here one step of the real Trainer, whose train() enables
checkpointing from the engine's training arguments, trains the demo model loaded 8-bit (bitsandbytes on the CPU keeps
``ctx.A`` the same way), and the graph after its forward is searched for what those contexts hold.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from engine.config import parse_config
from engine.training.builders import to_training_args
from engine.training.hardware import CPU_ONLY
from engine.training.modeling import build_model
from tests.helpers.autograd_graph import context_tensors

pytestmark = pytest.mark.integration

ROWS, LENGTH = 2, 64


def _one_step(tmp_path: Path, kwargs: dict[str, bool] | None) -> dict[str, Any]:
    """One real training step of the engine's LoRA model on the 8-bit demo base with gradient checkpointing on,
    under the engine's training arguments (the checkpointing ``kwargs`` in place of the engine's when given): what
    the forward's graph holds in custom functions' contexts, the loss and the adapter's gradients."""
    from transformers import Trainer, TrainerCallback

    config = parse_config(
        {
            "quantization": {"mode": "8bit"},
            "train": {"gradient_checkpointing": "on", "max_steps": 1, "per_device_batch_size": ROWS},
        }
    )
    args = to_training_args(config, tmp_path / str(kwargs), CPU_ONLY)
    args.save_strategy = "no"
    if kwargs is not None:
        args.activation_checkpointing_kwargs = kwargs
    torch.manual_seed(0)
    model = build_model(config, CPU_ONLY)
    seen: dict[str, Any] = {}

    def after_forward(module: Any, inputs: Any, output: Any) -> None:
        seen.update(held=_context_bytes(output), loss=output.loss.detach().clone())

    class Gradients(TrainerCallback):
        def on_pre_optimizer_step(self, *args: Any, **kwargs: Any) -> None:
            seen["gradients"] = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}

    model.register_forward_hook(after_forward)
    generator = torch.Generator().manual_seed(1)
    rows = [
        {"input_ids": ids, "labels": ids}
        for ids in torch.randint(3, model.config.vocab_size, (ROWS, LENGTH), generator=generator).tolist()
    ]
    Trainer(model=model, args=args, train_dataset=rows, callbacks=[Gradients()]).train()
    return seen


def _context_bytes(output: Any) -> int:
    """Bytes of the floating-point tensors that custom autograd functions' contexts in the graph hold as attributes."""
    storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in context_tensors(output.loss)}
    return sum(storages.values())


def test_an_8bit_base_keeps_no_projection_inputs_through_the_forward(tmp_path: Path) -> None:
    hooks_only = _one_step(tmp_path, {"use_reentrant": False})
    # What non-reentrant checkpointing left alive: per layer at least one hidden-sized input a token (demo model:
    # 4 layers of 256).
    assert hooks_only["held"] >= 4 * ROWS * LENGTH * 256 * 4
    engine = _one_step(tmp_path, None)
    assert engine["held"] == 0
    # The same step either way: the recomputation is exact, the adapter's gradients equal.
    assert torch.equal(engine["loss"], hooks_only["loss"])
    expected, got = hooks_only["gradients"], engine["gradients"]
    assert expected and set(got) == set(expected)
    for name, gradient in expected.items():
        torch.testing.assert_close(got[name], gradient, msg=name)


def test_other_runs_keep_non_reentrant_checkpointing(tmp_path: Path) -> None:
    for mode in ("none", "4bit"):
        config = parse_config({"quantization": {"mode": mode}, "train": {"gradient_checkpointing": "on"}})
        args = to_training_args(config, tmp_path / mode, CPU_ONLY)
        assert args.activation_checkpointing and args.activation_checkpointing_kwargs == {"use_reentrant": False}
