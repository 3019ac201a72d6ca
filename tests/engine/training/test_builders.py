"""The pure builders against the objects peft, bitsandbytes and TRL expect; no training."""

from __future__ import annotations

import pytest
import torch
from peft import LoraConfig
from transformers import BitsAndBytesConfig, LlamaConfig, LlamaForCausalLM
from trl import SFTConfig

from engine.config import ConfigError, parse_config
from engine.training.builders import (
    check_target_modules,
    linear_module_names,
    to_bnb_config,
    to_lora_config,
    to_training_args,
)
from engine.training.hardware import (
    CPU_ONLY,
    Hardware,
    hardware_problems,
    resolve_gradient_checkpointing,
    resolve_precision,
)
from engine.training.modeling import count_parameters, make_trainable

BF16_GPU = Hardware(gpu_count=1, bf16_supported=True, gpu_name="test")
OLD_GPU = Hardware(gpu_count=2, bf16_supported=False, gpu_name="test")


@pytest.fixture(scope="module")
def tiny_model() -> LlamaForCausalLM:
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        tie_word_embeddings=True,
    )
    return LlamaForCausalLM(config)


def test_lora_config_maps_every_field():
    config = parse_config(
        {
            "adapter": {
                "r": 16,
                "alpha": 32,
                "dropout": 0.1,
                "target_modules": "q_proj,v_proj",
                "bias": "lora_only",
                "use_rslora": True,
                "init": "gaussian",
                "modules_to_save": ["lm_head"],
            }
        }
    )
    lora = to_lora_config(config)
    expected = LoraConfig(
        task_type="CAUSAL_LM",
        r=16,
        lora_alpha=32,
        lora_dropout=0.1,
        target_modules=["q_proj", "v_proj"],
        bias="lora_only",
        use_rslora=True,
        init_lora_weights="gaussian",
        modules_to_save=["lm_head"],
    )
    for field in (
        "task_type",
        "r",
        "lora_alpha",
        "lora_dropout",
        "target_modules",
        "bias",
        "use_rslora",
        "init_lora_weights",
        "modules_to_save",
        "use_dora",
    ):
        assert getattr(lora, field) == getattr(expected, field), field


def test_lora_auto_targets_leave_the_choice_to_peft():
    assert to_lora_config(parse_config({})).target_modules is None
    assert to_lora_config(parse_config({"adapter": {"target_modules": "all-linear"}})).target_modules == "all-linear"


def test_no_lora_config_for_full_and_freeze():
    assert to_lora_config(parse_config({"adapter": {"method": "full"}})) is None
    assert to_lora_config(parse_config({"adapter": {"method": "freeze"}})) is None


def test_bnb_configs():
    assert to_bnb_config(parse_config({}), CPU_ONLY) is None
    four = to_bnb_config(
        parse_config({"quantization": {"mode": "4bit", "quant_type": "fp4", "double_quant": False}}), BF16_GPU
    )
    assert isinstance(four, BitsAndBytesConfig)
    assert four.load_in_4bit and not four.load_in_8bit
    assert four.bnb_4bit_quant_type == "fp4"
    assert four.bnb_4bit_use_double_quant is False
    assert four.bnb_4bit_compute_dtype == torch.bfloat16  # auto follows bf16 training on a bf16 GPU
    cpu_four = to_bnb_config(parse_config({"quantization": {"mode": "4bit"}}), CPU_ONLY)
    assert cpu_four.bnb_4bit_compute_dtype == torch.float32 and cpu_four.bnb_4bit_quant_type == "nf4"
    eight = to_bnb_config(parse_config({"quantization": {"mode": "8bit"}}), CPU_ONLY)
    assert eight.load_in_8bit and not eight.load_in_4bit


def test_training_args_defaults_are_device_aware(tmp_path):
    cpu = to_training_args(parse_config({}), tmp_path, CPU_ONLY)
    assert isinstance(cpu, SFTConfig)
    assert (cpu.bf16, cpu.fp16, cpu.use_cpu, cpu.gradient_checkpointing) == (False, False, True, False)


def test_gpu_defaults_resolve_to_bf16_or_fp16():
    # SFTConfig itself refuses bf16 on a machine without a GPU, so the GPU side is checked on the resolvers.
    qlora = parse_config({"quantization": {"mode": "4bit"}})
    assert resolve_precision(qlora, BF16_GPU) == "bf16"
    assert resolve_gradient_checkpointing(qlora, BF16_GPU) is True
    assert resolve_precision(parse_config({}), OLD_GPU) == "fp16"
    assert resolve_gradient_checkpointing(parse_config({}), OLD_GPU) is False


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_training_args_on_this_gpu(tmp_path):
    from engine.training.hardware import detect_hardware

    args = to_training_args(parse_config({"quantization": {"mode": "4bit"}}), tmp_path, detect_hardware())
    assert args.use_cpu is False and args.gradient_checkpointing is True
    assert args.bf16 or args.fp16


def test_training_args_carry_every_train_knob(tmp_path):
    config = parse_config(
        {
            "data": {"eval_size": 0.1, "completion_only_loss": False},
            "train": {
                "learning_rate": 3e-4,
                "num_epochs": 2,
                "max_steps": 50,
                "per_device_batch_size": 3,
                "eval_batch_size": 5,
                "gradient_accumulation_steps": 4,
                "lr_scheduler": "linear",
                "warmup": 0.1,
                "weight_decay": 0.01,
                "optimizer": "paged_adamw_8bit",
                "max_grad_norm": 0.5,
                "logging_steps": 2,
                "eval_strategy": "steps",
                "eval_steps": 7,
                "save_strategy": "steps",
                "save_steps": 9,
                "save_total_limit": 2,
                "seed": 11,
                "neftune_noise_alpha": 5,
                "label_smoothing": 0.1,
                "auto_find_batch_size": True,
                "eval_on_start": True,
                "report_to": "tensorboard",
                "max_length": 256,
                "packing": True,
            },
        }
    )
    args = to_training_args(config, tmp_path / "out", CPU_ONLY)
    observed = {
        "learning_rate": 3e-4,
        "num_train_epochs": 2,
        "max_steps": 50,
        "per_device_train_batch_size": 3,
        "per_device_eval_batch_size": 5,
        "gradient_accumulation_steps": 4,
        "warmup_steps": 0.1,
        "weight_decay": 0.01,
        "max_grad_norm": 0.5,
        "logging_steps": 2,
        "eval_steps": 7,
        "save_steps": 9,
        "save_total_limit": 2,
        "seed": 11,
        "neftune_noise_alpha": 5,
        "label_smoothing_factor": 0.1,
        "auto_find_batch_size": True,
        "eval_on_start": True,
        "report_to": ["tensorboard"],
        "max_length": 256,
        "packing": True,
        "completion_only_loss": False,
        "output_dir": str(tmp_path / "out"),
    }
    for field, value in observed.items():
        assert getattr(args, field) == value, field
    assert args.lr_scheduler_type.value == "linear"
    assert args.optim.value == "paged_adamw_8bit"
    assert args.eval_strategy.value == "steps"


def test_warmup_steps_count_stays_an_integer(tmp_path):
    args = to_training_args(parse_config({"train": {"warmup": 10}}), tmp_path, CPU_ONLY)
    assert args.warmup_steps == 10 and isinstance(args.warmup_steps, int)


def test_gradient_checkpointing_override():
    on = parse_config({"train": {"gradient_checkpointing": "on"}})
    assert resolve_gradient_checkpointing(on, CPU_ONLY) is True
    assert resolve_precision(parse_config({}), CPU_ONLY) == "fp32"


@pytest.mark.parametrize(
    ("data", "hardware", "field"),
    [
        ({"train": {"precision": "bf16"}}, CPU_ONLY, "train.precision"),
        ({"train": {"precision": "bf16"}}, OLD_GPU, "train.precision"),
        ({"train": {"precision": "fp16"}}, CPU_ONLY, "train.precision"),
        ({"launch": {"device": "cuda"}}, CPU_ONLY, "launch.device"),
        ({"launch": {"num_processes": 4}}, OLD_GPU, "launch.num_processes"),
    ],
)
def test_hardware_problems(data, hardware, field):
    assert field in {problem.field for problem in hardware_problems(parse_config(data), hardware)}


def test_hardware_accepts_what_it_has():
    assert hardware_problems(parse_config({"train": {"precision": "bf16"}}), BF16_GPU) == []
    assert hardware_problems(parse_config({"launch": {"num_processes": 2}}), CPU_ONLY) == []


def test_target_modules_checked_against_the_model(tiny_model):
    assert linear_module_names(tiny_model) == [
        "down_proj",
        "gate_proj",
        "k_proj",
        "o_proj",
        "q_proj",
        "up_proj",
        "v_proj",
    ]
    check_target_modules(parse_config({"adapter": {"target_modules": "q_proj,v_proj"}}), tiny_model)
    with pytest.raises(ConfigError) as caught:
        check_target_modules(parse_config({"adapter": {"target_modules": "q_proj,query"}}), tiny_model)
    message = caught.value.by_field()["adapter.target_modules"]
    assert "no module query" in message and "gate_proj" in message
    # peft's rule: a dotted ending of the module name matches; a module that is not a layer (mlp) does not.
    check_target_modules(parse_config({"adapter": {"target_modules": "self_attn.q_proj,mlp.up_proj"}}), tiny_model)
    with pytest.raises(ConfigError, match="no module mlp that LoRA can adapt"):
        check_target_modules(parse_config({"adapter": {"target_modules": "q_proj,mlp"}}), tiny_model)


def test_trainable_parameters_by_method(tiny_model):
    import copy

    total = sum(p.numel() for p in tiny_model.parameters())
    lora = count_parameters(make_trainable(copy.deepcopy(tiny_model), parse_config({"adapter": {"r": 4}}), CPU_ONLY))
    # peft's default for llama targets q_proj and v_proj: r * (in + out) per module per layer.
    hidden, kv = 32, 2 * 32 // 4
    assert lora.trainable == 3 * (4 * (hidden + hidden) + 4 * (hidden + kv))
    full = count_parameters(
        make_trainable(copy.deepcopy(tiny_model), parse_config({"adapter": {"method": "full"}}), CPU_ONLY)
    )
    assert full.trainable == full.total == total
    freeze = parse_config({"adapter": {"method": "freeze", "freeze_trainable_layers": 1}})
    frozen = count_parameters(make_trainable(copy.deepcopy(tiny_model), freeze, CPU_ONLY))
    assert frozen.trainable == sum(p.numel() for p in tiny_model.model.layers[-1].parameters())
    with pytest.raises(ConfigError, match="only 3 layers"):
        too_many = parse_config({"adapter": {"method": "freeze", "freeze_trainable_layers": 5}})
        make_trainable(copy.deepcopy(tiny_model), too_many, CPU_ONLY)
