"""A 4-bit base answers in eval mode on the CPU, as Chat, Evaluate and a distill run's teacher use it: bitsandbytes'
CPU inference kernel (on a CPU with AVX512-BF16) takes only layers of certain widths, and the demo model's MLP is
not one of them (engine.training.modeling._plain_4bit_on_cpu)."""

from __future__ import annotations

import torch

from engine.config import parse_config
from engine.training.hardware import CPU_ONLY
from engine.training.modeling import load_model


def test_a_4bit_demo_model_answers_in_eval_mode_as_in_training_mode() -> None:
    model = load_model(parse_config({"quantization": {"mode": "4bit"}}), CPU_ONLY)
    ids = torch.tensor([[1, 20, 30, 40, 50, 60, 70]])
    with torch.no_grad():
        training = model.train()(ids).logits  # the path training takes
        answering = model.eval()(ids).logits  # Chat's and Evaluate's: without gradients, in eval mode
    assert torch.isfinite(answering).all()
    # The kernels differ (bitsandbytes' CPU inference kernel where a layer's width suits it): near, not equal
    # (0.04 at most here; logits of about 2 to 4).
    assert torch.allclose(answering, training, atol=0.1)
