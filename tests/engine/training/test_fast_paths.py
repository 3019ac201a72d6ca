"""Which speed-ups a run takes (padding-free batches, the attention kernel, Liger, TF32, length grouping) on each
kind of machine, and the combinations refused before launch; checked on the CPU without training."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engine.config import ConfigError, parse_config
from engine.training.attention import (
    SEGMENTS,
    apply_sdpa_backends,
    resolve_attn_implementation,
    resolve_cudnn_attention,
    resolve_padding_free,
)
from engine.training.builders import common_training_kwargs, to_training_args
from engine.training.hardware import (
    CPU_ONLY,
    LIGER_MIN_HIDDEN_SIZE,
    Hardware,
    hardware_problems,
    liger_decision,
    model_hidden_size,
    resolve_liger,
    resolve_tf32,
)
from engine.training.methods import method_of
from engine.training.run_path import resolve_run_path

BARE_GPU = Hardware(gpu_count=1, bf16_supported=True)
FULL_GPU = Hardware(gpu_count=1, bf16_supported=True, flash_attn=True, liger=True)
OLD_GPU = Hardware(gpu_count=1, bf16_supported=False, flash_attn=True, liger=True)
ONE_REWARD = {"grpo": {"rewards": [{"kind": "exact_match"}]}}


def config(method: str = "sft", **sections: Any) -> Any:
    return parse_config({"method": method, **ONE_REWARD, **sections})


def model_of_width(folder: Path, hidden: int) -> str:
    """A model directory holding only a LLaMA config.json of this hidden size (nothing loads its weights)."""
    folder.mkdir(parents=True, exist_ok=True)
    shape = {"hidden_size": hidden, "num_hidden_layers": 2, "num_attention_heads": 8, "vocab_size": 1000}
    (folder / "config.json").write_text(json.dumps({"model_type": "llama", **shape}))
    return str(folder)


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
    assert method_of(sft).trainer().training_kwargs(sft, CPU_ONLY)["train_sampling_strategy"] == "random"


def test_gpu_run_takes_liger_tf32_and_bf16_where_they_exist(tmp_path: Path) -> None:
    sft = config(model={"name_or_path": model_of_width(tmp_path / "wide", 2048)})
    full = common_training_kwargs(sft, tmp_path, FULL_GPU)
    assert (full["bf16"], full["use_liger_kernel"], full["tf32"]) == (True, True, True)
    bare = common_training_kwargs(sft, tmp_path, BARE_GPU)
    assert bare["use_liger_kernel"] is False and bare["tf32"] is True  # liger-kernel not installed
    demo = common_training_kwargs(config(), tmp_path, FULL_GPU)
    assert demo["use_liger_kernel"] is False  # the demo model is 256 wide: too narrow for Liger to win
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
    args = {
        **common_training_kwargs(run, tmp_path, CPU_ONLY),
        **method_of(run).trainer().training_kwargs(run, CPU_ONLY),
    }
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


def test_liger_auto_takes_only_models_wide_enough_and_says_why(tmp_path: Path) -> None:
    def decided(hidden: int | None, hardware: Hardware = FULL_GPU, **train: Any) -> tuple[bool, str]:
        folder = tmp_path / f"model-{hidden}-{len(train)}"
        if hidden:
            model_of_width(folder, hidden)
        else:
            folder.mkdir()  # a model directory without config.json
        return liger_decision(config(model={"name_or_path": str(folder)}, train=train), hardware)

    assert LIGER_MIN_HIDDEN_SIZE == 2048
    assert decided(768) == (False, "hidden size 768 < 2048")  # measured 0.80x at 768
    assert decided(2048) == (True, "hidden size 2048 >= 2048")
    assert decided(None) == (False, "the model's hidden size is not known")
    assert liger_decision(config(), BARE_GPU) == (False, "liger-kernel not installed")
    assert liger_decision(config(), CPU_ONLY) == (False, "they need a GPU")
    assert liger_decision(config(launch={"device": "cpu"}), FULL_GPU) == (False, "they need a GPU")
    assert decided(768, liger_kernel="on") == (True, "train.liger_kernel on")  # the user's choice stands
    assert decided(4096, liger_kernel="off") == (False, "train.liger_kernel off")


def test_the_hidden_size_comes_from_config_json_or_a_multimodal_text_config(tmp_path: Path) -> None:
    assert model_hidden_size(config()) == 256  # the bundled demo model
    nested = tmp_path / "vlm"
    nested.mkdir()
    text = {"hidden_size": 3072, "num_hidden_layers": 2, "vocab_size": 10}
    (nested / "config.json").write_text(json.dumps({"model_type": "x", "text_config": text}))
    assert model_hidden_size(config(model={"name_or_path": str(nested)})) == 3072
    (nested / "config.json").write_text("not json")
    assert model_hidden_size(config(model={"name_or_path": str(nested)})) is None
    # A hub id that is not in the local cache: no download, no answer.
    assert model_hidden_size(config(model={"name_or_path": "nobody-here/no-such-model"})) is None


def test_sdpa_leaves_cudnn_out_on_a_gpu_and_a_cpu_changes_nothing() -> None:
    assert resolve_cudnn_attention(config(), CPU_ONLY) is None  # a CPU has no cuDNN: nothing to set
    assert resolve_cudnn_attention(config(), BARE_GPU) is False  # auto: flash, memory-efficient and math
    assert resolve_cudnn_attention(config("dpo"), FULL_GPU) is False  # every method, padded or not
    assert resolve_cudnn_attention(config(model={"sdpa_backends": "all"}), BARE_GPU) is True
    assert resolve_cudnn_attention(config(launch={"device": "cpu"}), BARE_GPU) is None


def test_the_sdpa_choice_is_set_for_the_process_both_ways() -> None:
    import torch

    before = torch.backends.cuda.cudnn_sdp_enabled()
    try:
        apply_sdpa_backends(config(), BARE_GPU)
        assert torch.backends.cuda.cudnn_sdp_enabled() is False
        assert torch.backends.cuda.flash_sdp_enabled() and torch.backends.cuda.mem_efficient_sdp_enabled()
        apply_sdpa_backends(config(model={"sdpa_backends": "all"}), BARE_GPU)  # a second run in the same process
        assert torch.backends.cuda.cudnn_sdp_enabled() is True
        torch.backends.cuda.enable_cudnn_sdp(False)
        apply_sdpa_backends(config(), CPU_ONLY)  # a CPU run leaves the flag as it was
        assert torch.backends.cuda.cudnn_sdp_enabled() is False
    finally:
        torch.backends.cuda.enable_cudnn_sdp(before)


def test_flex_attention_is_refused_on_the_cpu() -> None:
    flex = config(model={"attn_implementation": "flex_attention"}, train={"padding_free": "on"})
    assert [p.field for p in hardware_problems(flex, CPU_ONLY)] == ["model.attn_implementation"]
    assert hardware_problems(flex, BARE_GPU) == []
    assert attention(flex, BARE_GPU) == "flex_attention"


def test_the_path_line_shows_every_choice(tmp_path: Path) -> None:
    assert resolve_run_path(config(), CPU_ONLY).line() == (
        "cpu, float32 weights, attention sdpa_segments, sdpa backends untouched (a CPU has no cuDNN), "
        "padding-free on, liger off (they need a GPU), tf32 untouched, gradient checkpointing off"
    )
    wide = model_of_width(tmp_path / "wide", 2048)
    assert resolve_run_path(config(model={"name_or_path": wide}), FULL_GPU).line() == (
        "cuda, bfloat16 weights, bf16 autocast, attention flash_attention_2, sdpa without cuDNN (flash, efficient, "
        "math), padding-free on, liger on (hidden size 2048 >= 2048), tf32 on, gradient checkpointing off"
    )
    # fp32 master weights with bf16 autocast, PyTorch's own sdpa choice, QLoRA's checkpointing
    chosen = config(model={"dtype": "float32", "sdpa_backends": "all"}, quantization={"mode": "4bit"})
    assert resolve_run_path(chosen, BARE_GPU).line() == (
        "cuda, float32 weights, bf16 autocast, attention transformers' default (sdpa), sdpa with cuDNN, "
        "padding-free off, liger off (liger-kernel not installed), tf32 on, gradient checkpointing on"
    )
    # An 8-bit base is checkpointed reentrantly (its int8 matmul keeps its inputs from saved-tensor hooks)
    eight = config(quantization={"mode": "8bit"})
    on_gpu = resolve_run_path(eight, BARE_GPU).line()
    assert on_gpu.endswith("gradient checkpointing on (reentrant, for the 8-bit base)")
    assert resolve_run_path(eight, CPU_ONLY).line().endswith("gradient checkpointing off")
