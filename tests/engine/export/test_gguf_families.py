"""Every supported family, written as GGUF and run by llama.cpp: its logits match transformers'.

Each case is a tiny randomly initialised model of that architecture (2 layers, grouped-query attention where the
family has it) with the demo tokenizer, saved as transformers saves it and converted with ``write_gguf`` as f16.
A wrong tensor name, a missing Q/K reordering, a missing Gemma norm shift or a wrong hyperparameter moves the
logits far outside the f16 rounding allowed here.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import llama_cpp
import numpy as np
import pytest
import torch

from engine.export.gguf.writer import write_gguf
from engine.store.paths import PROJECT_ROOT
from tests.helpers.llama_runtime import load_llama

DEMO_MODEL = PROJECT_ROOT / "assets" / "demo-model"
SHAPE = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "vocab_size": 1295,
    "max_position_embeddings": 128,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "pad_token_id": 0,
}
LLAMA3_ROPE = {
    "rope_type": "llama3",
    "rope_theta": 10000.0,
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 32,  # short, so that most of the 8 frequencies are rescaled
}
CASES = {  # case -> (model_type, config changes)
    "llama": ("llama", {}),
    "llama-3.1-rope": ("llama", {"rope_parameters": LLAMA3_ROPE}),  # Llama 3.1 / 3.2: a rope_freqs tensor
    "mistral": ("mistral", {"sliding_window": None}),
    "qwen2": ("qwen2", {"tie_word_embeddings": False}),
    "qwen3": ("qwen3", {}),
    "gemma": ("gemma", {"hidden_activation": "gelu_pytorch_tanh"}),
    # llama.cpp scales Gemma 2's queries by 1/sqrt(head_dim), as the 2B and 9B models' query_pre_attn_scalar says.
    "gemma2": ("gemma2", {"query_pre_attn_scalar": 16, "sliding_window": 64}),
}
PROMPTS = [[4, 300, 301, 302, 2, 5], [4, 40, 41, 42, 43, 44, 45, 2, 5], [1, 700, 12, 900, 33]]


def tiny_model(model_type: str, folder: Path, **extra):
    """A random model of ``model_type`` saved in ``folder`` with the demo tokenizer; returns it (float32)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.for_model(model_type, **SHAPE, **extra)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval()
    with torch.no_grad():  # weights larger than the initialiser's 0.02, so the logits spread well beyond rounding
        for parameter in model.parameters():
            if parameter.ndim == 2:
                parameter.mul_(4.0)
            else:  # norms: away from their all-ones (or Gemma's all-zeros) start, so a wrong shift shows
                parameter.add_(torch.rand_like(parameter) * 0.5)
    model.save_pretrained(str(folder))
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        shutil.copy(DEMO_MODEL / name, folder / name)
    return model


@pytest.mark.parametrize("case", list(CASES))
def test_llama_cpp_logits_match_transformers(case: str, tmp_path: Path):
    model_type, changes = CASES[case]
    model = tiny_model(model_type, tmp_path / "model", **changes)
    written = write_gguf(tmp_path / "model", tmp_path / "model.gguf", "f16", case)
    assert written["architecture"] == {"mistral": "llama"}.get(model_type, model_type)
    llm = load_llama(str(tmp_path / "model.gguf"), logits_all=True, verbose=False, n_ctx=128)
    for ids in PROMPTS:
        with torch.inference_mode():
            expected = model(input_ids=torch.tensor([ids])).logits[0, -1].numpy()
        got = last_logits(llm, ids)
        spread = float(expected.std())
        assert spread > 0.5  # a model whose logits are all alike would prove nothing
        assert np.abs(got - expected).max() < 0.05 * spread, (case, ids)
        assert int(got.argmax()) == int(expected.argmax())


@pytest.mark.parametrize("rslora", [False, True])
def test_lora_adapter_gguf_on_the_base_gguf_matches_peft(tmp_path: Path, rslora: bool):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from engine.export.gguf.architectures import base_config, check_model_config
    from engine.export.gguf.lora import write_lora_gguf

    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(str(DEMO_MODEL), dtype=torch.float32)
    lora = LoraConfig(r=8, lora_alpha=16, target_modules="all-linear", use_rslora=rslora, init_lora_weights=False)
    model = get_peft_model(base, lora).eval()  # init_lora_weights=False: B is random, so the update is not zero
    model.save_pretrained(str(tmp_path / "adapter"))
    write_gguf(DEMO_MODEL, tmp_path / "base.gguf", "f16", "demo")
    config = base_config(str(DEMO_MODEL))
    adapted = write_lora_gguf(tmp_path / "adapter", config, check_model_config(config), tmp_path / "lora.gguf", "f16")
    assert adapted == 4 * 7  # q, k, v, o, gate, up, down in each of 4 layers
    llm = load_llama(
        str(tmp_path / "base.gguf"), str(tmp_path / "lora.gguf"), logits_all=True, verbose=False, n_ctx=128
    )
    plain = load_llama(str(tmp_path / "base.gguf"), logits_all=True, verbose=False, n_ctx=128)
    for ids in PROMPTS:
        with torch.inference_mode():
            expected = model(input_ids=torch.tensor([ids])).logits[0, -1].numpy()
            with model.disable_adapter():  # the base alone (get_peft_model wrapped it in place)
                without = model(input_ids=torch.tensor([ids])).logits[0, -1].numpy()
        got, got_plain = last_logits(llm, ids), last_logits(plain, ids)
        assert np.abs(expected - without).max() > 1.0  # the adapter changes the answer: the test can tell
        assert np.abs(got - expected).max() < 0.05 * float(expected.std())
        assert np.abs(got_plain - without).max() < 0.05 * float(without.std())


def last_logits(llm: llama_cpp.Llama, ids: list[int]) -> np.ndarray:
    llm.reset()
    llm.eval(ids)
    return np.asarray(llm.scores[len(ids) - 1]).copy()
