"""The memory estimate's parts against figures computed independently: peft's own LoRA parameter count,
bitsandbytes' real quantized storage, and the tensors autograd keeps (saved-tensor hooks) on the demo model."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from engine.config import RunConfig
from engine.store.paths import PROJECT_ROOT
from engine.training.memory import (
    LOSS_COPIES,
    config_dict,
    estimate_memory,
    estimate_run_memory,
    int8_input_bytes,
    layer_activation_bytes,
)
from engine.training.memory_shape import lora_parameters, lora_targets, quantized_weight_bytes, read_shape
from tests.helpers.autograd_graph import context_tensors

DEMO = PROJECT_ROOT / "assets" / "demo-model"


def demo_shape() -> Any:
    shape = read_shape(config_dict(DEMO) or {})
    assert shape is not None
    return shape


def load_demo(**kwargs: Any) -> Any:
    import torch
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(str(DEMO), dtype=torch.float32, **kwargs)


def test_the_memory_module_does_not_import_torch() -> None:
    code = "import sys, engine.training.memory; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=PROJECT_ROOT)


def test_shape_counts_every_parameter_of_the_demo_model() -> None:
    model = load_demo()
    assert demo_shape().total_parameters == sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize(
    ("targets", "r", "saved"), [("auto", 8, []), ("all-linear", 4, []), (["k_proj", "down_proj"], 16, ["lm_head"])]
)
def test_lora_parameters_match_peft(targets: Any, r: int, saved: list[str]) -> None:
    from peft import LoraConfig, get_peft_model

    lora = LoraConfig(
        task_type="CAUSAL_LM", r=r, target_modules=None if targets == "auto" else targets, modules_to_save=saved or None
    )
    trainable, _ = get_peft_model(load_demo(), lora).get_nb_trainable_parameters()
    shape = demo_shape()
    assert lora_parameters(shape, lora_targets(shape, targets), r, saved) == trainable


def _stored_bytes(model: Any) -> int:
    """Every byte bitsandbytes keeps for the model: packed weights, their block scales and codebooks."""
    total = sum(buffer.nbytes for buffer in model.buffers())
    for param in model.parameters():
        total += param.numel() * param.element_size()
        state = getattr(param, "quant_state", None)
        if state is not None:
            total += state.absmax.nbytes + state.code.nbytes
            if state.nested:
                total += state.state2.absmax.nbytes + state.state2.code.nbytes
        scales = getattr(param, "SCB", None)
        total += scales.nbytes if scales is not None else 0
    return total


@pytest.mark.parametrize(("mode", "double_quant"), [("4bit", True), ("4bit", False), ("8bit", False)])
def test_quantized_weight_bytes_match_a_real_bitsandbytes_model(mode: str, double_quant: bool) -> None:
    import torch
    from transformers import BitsAndBytesConfig

    if mode == "4bit":
        quantization = BitsAndBytesConfig(
            load_in_4bit=True, bnb_4bit_use_double_quant=double_quant, bnb_4bit_compute_dtype=torch.float32
        )
    else:
        quantization = BitsAndBytesConfig(load_in_8bit=True)
    model = load_demo(quantization_config=quantization)
    real = _stored_bytes(model) - sum(buffer.nbytes for buffer in model.buffers())  # rotary tables: not weights
    predicted = quantized_weight_bytes(demo_shape(), mode, double_quant, 4)
    assert predicted == pytest.approx(real, rel=0.02)


def _saved_bytes(model: Any, tokens: Any, contexts: bool = False) -> int:
    """Bytes of the tensors autograd keeps for backward (unique storages, parameters left out); with ``contexts``
    also those custom functions keep as attributes of their contexts (bitsandbytes' int8 matmul)."""
    import torch

    storages: dict[int, int] = {}

    def pack(tensor: Any) -> Any:
        storages.setdefault(tensor.untyped_storage().data_ptr(), tensor.untyped_storage().nbytes())
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        output = model(input_ids=tokens, labels=tokens, use_cache=False)
    for tensor in context_tensors(output.loss) if contexts else ():
        pack(tensor)
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    return sum(size for pointer, size in storages.items() if pointer not in params)


@pytest.mark.parametrize(
    ("targets", "dropout"), [(None, 0.0), ("auto", 0.05), ("all-linear", 0.0), ("all-linear", 0.1)]
)
def test_activations_match_what_autograd_keeps(targets: str | None, dropout: float) -> None:
    """Full training (targets None) and LoRA: the layers' saved tensors plus log_softmax's output."""
    import torch
    from peft import LoraConfig, get_peft_model

    shape = demo_shape()
    model = load_demo()
    lora = None
    if targets is not None:
        config = LoraConfig(
            task_type="CAUSAL_LM", r=8, lora_dropout=dropout, target_modules=None if targets == "auto" else targets
        )
        model = get_peft_model(model, config)
        lora = {"targets": lora_targets(shape, targets), "r": 8, "dropout": dropout}
    model.train()
    batch, length = 2, 48
    tokens = torch.randint(3, shape.vocab, (batch, length), generator=torch.Generator().manual_seed(0))
    per_layer = layer_activation_bytes(shape, targets is None, lora, 4)
    predicted = batch * length * (shape.layers * per_layer + shape.vocab * 4)
    assert predicted == pytest.approx(_saved_bytes(model, tokens), rel=0.1)


@pytest.mark.parametrize(("targets", "dropout"), [("auto", 0.05), ("all-linear", 0.0)])
def test_an_8bit_base_keeps_what_its_int8_matmul_holds(targets: str, dropout: float) -> None:
    """QLoRA 8-bit without checkpointing: the layers' saved tensors, the int8 matmul's inputs and log_softmax's
    output (the CPU's MatMul8bitFp keeps ``ctx.A`` as CUDA's MatMul8bitLt keeps ``ctx.tensors``)."""
    import torch
    from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training
    from transformers import BitsAndBytesConfig

    shape = demo_shape()
    base = load_demo(quantization_config=BitsAndBytesConfig(load_in_8bit=True))
    base = prepare_model_for_kbit_training(base, use_gradient_checkpointing=False)
    config = LoraConfig(
        task_type="CAUSAL_LM", r=8, lora_dropout=dropout, target_modules=None if targets == "auto" else targets
    )
    model = get_peft_model(base, config)
    model.train()
    lora = {"targets": lora_targets(shape, targets), "r": 8, "dropout": dropout}
    batch, length = 2, 48
    tokens = torch.randint(3, shape.vocab, (batch, length), generator=torch.Generator().manual_seed(0))
    per_layer = layer_activation_bytes(shape, False, lora, 4) + int8_input_bytes(shape, lora, 4)
    predicted = batch * length * (shape.layers * per_layer + shape.vocab * 4)
    assert predicted == pytest.approx(_saved_bytes(model, tokens, contexts=True), rel=0.1)
    # The estimate adds it to 8-bit runs only (nothing where an adapter without dropout keeps the same inputs).
    settings = {"method": "lora", "lora": lora, "batch_size": batch, "max_length": length}
    added = (
        _estimate(quantization="8bit", **settings).activations - _estimate(quantization="4bit", **settings).activations
    )
    assert added == batch * length * shape.layers * int8_input_bytes(shape, lora, 4)
    assert (added > 0) == (dropout > 0)


def _estimate(**overrides: Any) -> Any:
    settings: dict[str, Any] = {"device": "cpu", "weight_bytes": 4, "compute_bytes": 4, "method": "full"}
    return estimate_memory(demo_shape(), **{**settings, **overrides})


def test_activations_scale_with_batch_times_length_and_checkpointing_lowers_them() -> None:
    one = _estimate(batch_size=1, max_length=128)
    assert _estimate(batch_size=4, max_length=128).activations == pytest.approx(4 * one.activations)
    assert _estimate(batch_size=2, max_length=256).activations == pytest.approx(4 * one.activations)
    assert _estimate(batch_size=2, max_length=256).loss == pytest.approx(4 * one.loss)
    assert one.loss == 128 * demo_shape().vocab * 4 * LOSS_COPIES
    checkpointed = _estimate(batch_size=1, max_length=128, gradient_checkpointing=True)
    assert checkpointed.activations < one.activations / 2
    assert _estimate(method="freeze", freeze_layers=1).activations < _estimate().activations


def test_optimizer_and_gradients_follow_what_trains() -> None:
    shape = demo_shape()
    full = _estimate()
    assert full.optimizer == shape.total_parameters * 4 * 2  # AdamW: two fp32 moments
    assert _estimate(optimizer="adamw_bnb_8bit").optimizer == shape.total_parameters * 2
    assert _estimate(optimizer="sgd").optimizer == 0
    freeze = _estimate(method="freeze", freeze_layers=2)
    assert freeze.optimizer == 2 * shape.layer_parameters * 8
    bf16 = _estimate(device="cuda", weight_bytes=2, compute_bytes=2)
    assert bf16.weights == shape.total_parameters * 2 and bf16.optimizer == shape.total_parameters * 4
    assert bf16.baseline == 0 and bf16.allocator == 0 and full.baseline > 0


def test_a_run_config_resolves_to_its_estimate() -> None:
    config = RunConfig.model_validate({"quantization": {"mode": "4bit"}, "adapter": {"r": 16}})
    model_config = config_dict(DEMO) or {}
    cpu = estimate_run_memory(config, model_config, "cpu", "fp32", checkpointing=False)
    gpu = estimate_run_memory(config, model_config, "cuda", "bf16", checkpointing=True)
    assert cpu is not None and gpu is not None
    assert cpu.checkpoint > 0 and gpu.checkpoint == 0  # a quantized load on a CPU leaves the file mapped
    assert gpu.activations < cpu.activations and gpu.total < cpu.total
    assert "predicted peak memory:" in cpu.summary() and "CPU RSS" in cpu.summary()
    assert estimate_run_memory(config, {"model_type": "mystery"}, "cpu", "fp32", False) is None


@pytest.mark.parametrize("method", ["lora", "full"])
def test_a_vision_language_model_adds_its_tower_and_projector(method: str) -> None:
    """The image side is counted on the model itself (the check's meta copy), and what it adds follows what
    trains: the frozen tower its weights only, the trained projector its optimizer state too (and, beside LoRA,
    the trained copy peft keeps of a module to save)."""
    from transformers import AutoModelForImageTextToText

    from engine.training.check import image_side_of
    from engine.training.memory import ImageSide
    from engine.training.modeling import meta_model

    vlm = PROJECT_ROOT / "assets" / "demo-vlm"
    config = RunConfig.model_validate({"model": {"name_or_path": str(vlm)}, "adapter": {"method": method}})
    real = AutoModelForImageTextToText.from_pretrained(str(vlm))
    tower = sum(p.numel() for p in real.model.vision_tower.parameters())
    projector = sum(p.numel() for p in real.model.multi_modal_projector.parameters())
    side = image_side_of(meta_model(config), config)
    assert side == ImageSide(tower, projector, tower_trained=False, projector_trained=True)
    model_config = config_dict(vlm) or {}
    text_only = estimate_run_memory(config, model_config, "cpu", "fp32", False)
    with_images = estimate_run_memory(config, model_config, "cpu", "fp32", False, side)
    assert text_only is not None and with_images is not None
    copies = 2 if method == "lora" else 1  # the frozen original and peft's trained copy
    assert with_images.weights - text_only.weights == (tower + projector + (copies - 1) * projector) * 4
    assert with_images.optimizer - text_only.optimizer == projector * 4 * 2  # AdamW's two fp32 moments
    assert with_images.activations == text_only.activations  # image tokens are counted in max_length
