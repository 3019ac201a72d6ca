"""Which speed-ups a run takes (padding-free batches, the attention kernel, Liger, TF32, length grouping) on each
kind of machine, and the combinations refused before launch; checked on the CPU without training."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engine.config import ConfigError, parse_config
from engine.training.attention import SEGMENTS, resolve_attn_implementation, resolve_padding_free
from engine.training.builders import common_training_kwargs, to_training_args
from engine.training.hardware import CPU_ONLY, Hardware, hardware_problems, resolve_liger, resolve_tf32
from engine.training.methods import method_of

BARE_GPU = Hardware(gpu_count=1, bf16_supported=True)
FULL_GPU = Hardware(gpu_count=1, bf16_supported=True, flash_attn=True, liger=True)
OLD_GPU = Hardware(gpu_count=1, bf16_supported=False, flash_attn=True, liger=True)
ONE_REWARD = {"grpo": {"rewards": [{"kind": "exact_match"}]}}


def config(method: str = "sft", **sections: Any) -> Any:
    return parse_config({"method": method, **ONE_REWARD, **sections})


def attention(run: Any, hardware: Hardware) -> str | None:
    """The kernel load_model asks for."""
    return resolve_attn_implementation(run, hardware)


@pytest.mark.parametrize("method", ["dpo", "kto", "orpo", "grpo"])
def test_padding_free_is_the_sft_default_and_off_for_the_other_methods(method: str) -> None:
    assert resolve_padding_free(config(), CPU_ONLY) is True
    assert resolve_padding_free(config(method), CPU_ONLY) is False
    assert resolve_padding_free(config(train={"padding_free": "off"}), CPU_ONLY) is False
    assert resolve_padding_free(config(model={"trust_remote_code": True}), CPU_ONLY) is False  # may mix rows


def test_a_gpu_takes_padding_free_batches_only_with_flash_attn() -> None:
    # Without flash-attn the per-row sdpa calls reach cuDNN, which plans each row length on the CPU: slower on an
    # H100 than padded batches (benchmarks/README.md, GPU figures).
    assert resolve_padding_free(config(), FULL_GPU) is True
    assert resolve_padding_free(config(), BARE_GPU) is False
    assert resolve_padding_free(config(train={"precision": "fp32"}), FULL_GPU) is False  # flash-attn has no fp32
    assert resolve_padding_free(config(train={"padding_free": "on"}), BARE_GPU) is True  # the user's choice


def test_sft_arguments_ask_trl_for_padding_free_batches(tmp_path: Path) -> None:
    args = to_training_args(config(train={"max_length": 512}), tmp_path, CPU_ONLY)
    assert args.padding_free is True and args.max_length is None  # rows arrive cut to 512 by engine.data
    assert args.dataset_kwargs == {"skip_prepare_dataset": True}
    padded = to_training_args(config(train={"padding_free": "off", "max_length": 512}), tmp_path, CPU_ONLY)
    assert padded.padding_free is False and padded.max_length == 512
    packed = to_training_args(config(train={"packing": True, "max_length": 512}), tmp_path, CPU_ONLY)
    assert packed.padding_free is True and packed.max_length == 512  # TRL packs to max_length


def test_attention_kernel_per_machine() -> None:
    sft = config()
    assert attention(sft, CPU_ONLY) == SEGMENTS  # per-row sdpa: no masked squares on the CPU
    assert attention(sft, BARE_GPU) is None  # no flash-attn: padded batches, transformers' sdpa
    assert attention(config(train={"padding_free": "on"}), BARE_GPU) == SEGMENTS  # asked for without flash-attn
    assert attention(sft, FULL_GPU) == "flash_attention_2"  # its varlen kernel, in bf16
    assert attention(config(train={"precision": "fp32"}), FULL_GPU) is None  # flash-attn has no fp32
    assert attention(config(train={"padding_free": "off"}), FULL_GPU) is None  # transformers' own choice
    assert attention(config("dpo"), FULL_GPU) is None
    assert attention(config(model={"attn_implementation": "eager"}), FULL_GPU) == "eager"  # the user's choice


def test_cpu_run_pays_for_no_bf16_checkpointing_liger_or_tf32(tmp_path: Path) -> None:
    sft = config()
    args = common_training_kwargs(sft, tmp_path, CPU_ONLY)
    assert (args["bf16"], args["fp16"], args["activation_checkpointing"]) == (False, False, False)
    assert args["use_liger_kernel"] is False and args["tf32"] is None
    assert method_of(sft).training_kwargs(sft, CPU_ONLY)["train_sampling_strategy"] == "random"


def test_gpu_run_takes_liger_tf32_and_bf16_where_they_exist(tmp_path: Path) -> None:
    sft = config()
    full = common_training_kwargs(sft, tmp_path, FULL_GPU)
    assert (full["bf16"], full["use_liger_kernel"], full["tf32"]) == (True, True, True)
    bare = common_training_kwargs(sft, tmp_path, BARE_GPU)
    assert bare["use_liger_kernel"] is False and bare["tf32"] is True  # liger-kernel not installed
    old = common_training_kwargs(sft, tmp_path, OLD_GPU)
    assert (old["fp16"], old["tf32"]) == (True, None)  # no TF32 before Ampere
    assert resolve_liger(config(train={"liger_kernel": "off"}), FULL_GPU) is False
    assert resolve_tf32(sft, CPU_ONLY) is None


def test_liger_asked_for_where_it_cannot_run_is_refused() -> None:
    on = config(train={"liger_kernel": "on"})
    assert [p.field for p in hardware_problems(on, CPU_ONLY)] == ["train.liger_kernel"]
    assert "need a GPU" in hardware_problems(on, CPU_ONLY)[0].message
    assert "pip install liger-kernel" in hardware_problems(on, BARE_GPU)[0].message
    assert hardware_problems(on, FULL_GPU) == []


def test_group_by_length_reaches_the_sampler(tmp_path: Path) -> None:
    run = config(train={"group_by_length": True, "padding_free": "off"})
    args = {**common_training_kwargs(run, tmp_path, CPU_ONLY), **method_of(run).training_kwargs(run, CPU_ONLY)}
    assert args["train_sampling_strategy"] == "group_by_length"


@pytest.mark.parametrize(
    ("sections", "field", "words"),
    [
        ({"method": "dpo", "train": {"padding_free": "on"}}, "train.padding_free", "for sft only"),
        ({"method": "grpo", "train": {"padding_free": "on"}}, "train.padding_free", "for sft only"),
        ({"train": {"padding_free": "on"}, "model": {"trust_remote_code": True}}, "train.padding_free", "shipped"),
        ({"train": {"padding_free": "off", "packing": True}}, "train.padding_free", "packing always"),
        ({"method": "kto", "train": {"group_by_length": True}}, "train.group_by_length", "for sft only"),
        ({"train": {"group_by_length": True, "packing": True}}, "train.group_by_length", "packing off"),
    ],
)
def test_combinations_that_cannot_train_are_refused_naming_the_field(sections: dict, field: str, words: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config({**ONE_REWARD, **sections})
    assert any(p.field == field and words in p.message for p in caught.value.problems), str(caught.value)
