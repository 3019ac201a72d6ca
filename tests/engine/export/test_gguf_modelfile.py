"""The pieces of a GGUF export that need no trained run: chat template translation, Q/K row order, the plan's
architecture check."""

from __future__ import annotations

import json

import numpy as np
import pytest

from engine.export.gguf.architectures import GgufError, check_model_config, family_of
from engine.export.gguf.modelfile import FALLBACK_TEMPLATE, modelfile_text, sampling_defaults, translate
from engine.export.gguf.tensors import unpermute_rope_rows
from engine.store.paths import PROJECT_ROOT

TOKENS = {"bos_token": "<s>", "eos_token": "</s>"}
CHATML = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
# Mistral's v0.1 template: a system message is refused, and the BOS is written by the template itself.
MISTRAL = (
    "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content']"
    " + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token }}{% else %}"
    "{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}"
)
# Folds the system prompt into the first user turn: not one wrapper per turn.
FOLDED = (
    "{% set ns = namespace(sys='') %}{% for message in messages %}{% if message['role'] == 'system' %}"
    "{% set ns.sys = message['content'] + '\\n' %}{% elif message['role'] == 'user' %}{{ '[INST] ' + ns.sys"
    " + message['content'] + ' [/INST]' }}{% set ns.sys = '' %}{% else %}{{ message['content'] + eos_token }}"
    "{% endif %}{% endfor %}"
)


def template_of(text: str) -> str:
    return text.split('TEMPLATE """', 1)[1].split('"""', 1)[0]


def test_chatml_becomes_a_go_template_with_every_role_and_its_end_of_turn_stop():
    text = modelfile_text("m.gguf", CHATML, TOKENS, False, {"<|im_end|>", "</s>"}, {"temperature": 0.6})
    assert template_of(text) == (
        "{{ range $i, $_ := .Messages }}{{ $last := eq (len (slice $.Messages $i)) 1 }}"
        '{{ if eq .Role "system" }}<|im_start|>system\n{{ .Content }}<|im_end|>\n'
        '{{ else if eq .Role "user" }}<|im_start|>user\n{{ .Content }}<|im_end|>\n'
        '{{ else if eq .Role "assistant" }}<|im_start|>assistant\n{{ .Content }}<|im_end|>\n{{ end }}'
        '{{ if and $last (ne .Role "assistant") }}<|im_start|>assistant\n{{ end }}{{ end }}'
    )
    lines = text.splitlines()
    assert lines[1] == "FROM ./m.gguf"
    assert lines[-3:] == ['PARAMETER stop "<|im_end|>"', 'PARAMETER stop "</s>"', "PARAMETER temperature 0.6"]


def test_a_template_without_system_role_gets_no_system_branch_and_bos_is_left_to_llama_cpp():
    go, pieces, problem = translate(MISTRAL, TOKENS, add_bos=True)
    assert problem is None and pieces.system is None and pieces.head == "<s>"
    assert '"system"' not in go and not go.startswith("<s>")
    assert '{{ if eq .Role "user" }}[INST] {{ .Content }} [/INST]{{ else if eq .Role "assistant" }}' in go
    assert translate(MISTRAL, TOKENS, add_bos=False)[0].startswith("<s>{{ range")  # BOS only from the template


def test_an_untranslatable_template_falls_back_and_says_so():
    text = modelfile_text("m.gguf", FOLDED, TOKENS, False, {"</s>"}, {})
    assert template_of(text) == FALLBACK_TEMPLATE
    assert "# The chat template could not be translated (" in text
    assert modelfile_text("m.gguf", None, TOKENS, False, set(), {}).count("the model has no chat template") == 1


def test_the_demo_models_own_template_translates():
    template = (PROJECT_ROOT / "assets" / "demo-model" / "chat_template.jinja").read_text()
    go, pieces, problem = translate(template, TOKENS, add_bos=False)
    assert problem is None
    assert pieces.user == ("<|user|>\n", "</s>\n") and pieces.generation == "<|assistant|>\n"


def test_sampling_defaults_come_from_generation_config_under_ollamas_names(tmp_path):
    config = {"do_sample": True, "temperature": 0.6, "top_p": 0.9, "top_k": 20, "repetition_penalty": 1.05}
    (tmp_path / "generation_config.json").write_text(json.dumps(config | {"max_length": 2048}))
    assert sampling_defaults(tmp_path) == {"temperature": 0.6, "top_p": 0.9, "top_k": 20, "repeat_penalty": 1.05}
    assert sampling_defaults(PROJECT_ROOT / "assets" / "demo-model") == {}  # the demo model sets none
    text = modelfile_text("m.gguf", CHATML, TOKENS, False, set(), sampling_defaults(tmp_path))
    assert text.splitlines()[-4:] == [
        "PARAMETER temperature 0.6",
        "PARAMETER top_p 0.9",
        "PARAMETER top_k 20",
        "PARAMETER repeat_penalty 1.05",
    ]


def rope_halves(x: np.ndarray, angles: np.ndarray) -> np.ndarray:
    """Hugging Face LLaMA's rope on one head: the first half rotates against the second."""
    half = x.shape[0] // 2
    cos, sin = np.cos(np.concatenate([angles, angles])), np.sin(np.concatenate([angles, angles]))
    return x * cos + np.concatenate([-x[half:], x[:half]]) * sin


def rope_pairs(x: np.ndarray, angles: np.ndarray) -> np.ndarray:
    """llama.cpp's rope on one head: neighbouring values (2i, 2i + 1) rotate together."""
    even, odd = x[0::2], x[1::2]
    out = np.empty_like(x)
    out[0::2], out[1::2] = even * np.cos(angles) - odd * np.sin(angles), even * np.sin(angles) + odd * np.cos(angles)
    return out


def test_reordered_q_rows_under_llama_cpp_rope_give_the_same_attention_scores():
    rng = np.random.default_rng(0)
    heads, head_dim, width = 2, 8, 16
    wq, wk, x, y = (
        rng.normal(size=(heads * head_dim, width)),
        rng.normal(size=(heads * head_dim, width)),
        *rng.normal(size=(2, width)),
    )
    angles_x, angles_y = 3 * 10000 ** (-np.arange(4) / 4), 7 * 10000 ** (-np.arange(4) / 4)  # positions 3 and 7
    for head in range(heads):
        rows = slice(head * head_dim, (head + 1) * head_dim)
        hf = rope_halves(wq[rows] @ x, angles_x) @ rope_halves(wk[rows] @ y, angles_y)
        ours = rope_pairs(unpermute_rope_rows(wq, heads)[rows] @ x, angles_x) @ rope_pairs(
            unpermute_rope_rows(wk, heads)[rows] @ y, angles_y
        )
        assert ours == pytest.approx(hf, rel=1e-9)
        plain = rope_pairs(wq[rows] @ x, angles_x) @ rope_pairs(wk[rows] @ y, angles_y)
        assert plain != pytest.approx(hf, rel=1e-3)  # without the reordering the scores differ


def test_families_are_found_by_architecture_and_others_refused_by_name():
    config = json.loads((PROJECT_ROOT / "assets" / "demo-model" / "config.json").read_text())
    assert check_model_config(config).arch == "llama" and check_model_config(config).permute_qk
    assert family_of({"architectures": ["Qwen2ForCausalLM"]}).arch == "qwen2"
    assert family_of({"architectures": ["Gemma2ForCausalLM"]}).norm_shift == 1.0
    with pytest.raises(GgufError, match="architecture PhiForCausalLM; supported: Gemma2ForCausalLM, GemmaForCausalLM"):
        family_of({"architectures": ["PhiForCausalLM"]})
    llama3 = {"rope_parameters": {"rope_type": "llama3", "rope_theta": 5e5, "factor": 8.0}}
    assert check_model_config(config | llama3).arch == "llama"  # Llama 3.1's rope: written as rope_freqs
    with pytest.raises(GgufError, match="rope type 'llama3'"):
        check_model_config(config | llama3 | {"architectures": ["Qwen2ForCausalLM"]})
    with pytest.raises(GgufError, match="rope type 'yarn'"):
        check_model_config(config | {"rope_parameters": {"rope_type": "yarn", "factor": 4.0}})
