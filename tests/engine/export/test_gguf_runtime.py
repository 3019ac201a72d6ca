"""GGUF export of a real trained demo run, proven by llama.cpp itself (the llama-cpp-python bindings).

The tuned demo run (tests.helpers.demo_run with the whole preset: it answers the task, so a held-out exact match
means something) is exported as f16 and q8_0 GGUF. llama.cpp loads each file, tokenizes each held-out prompt
(the chat template's text) with the file's own tokenizer, as Ollama would, and continues it greedily; that is
compared with transformers' greedy continuation of the merged model.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import gguf
import llama_cpp
import pytest
import torch
import yaml

from engine.export.exports import ExportError, plan_export
from engine.export.worker import export
from engine.runs.jobs import Progress
from engine.store.paths import PROJECT_ROOT
from engine.store.workspace import exports_dir
from tests.helpers.demo_run import trained_demo_run
from tests.helpers.llama_runtime import load_llama

pytestmark = pytest.mark.integration

DEMO_MODEL = PROJECT_ROOT / "assets" / "demo-model"
HELD_OUT = [
    json.loads(line)["messages"]
    for line in (PROJECT_ROOT / "assets" / "datasets" / "demo_sft_eval.jsonl").read_text().splitlines()
]
NEW_TOKENS = 8


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("gguf")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory, workspace: Path) -> Path:
    return trained_demo_run(tmp_path_factory, workspace, tuned=True)


@pytest.fixture(scope="module")
def exports(run_dir: Path) -> dict[str, dict]:
    """The run exported as f16 and as q8_0 (the q8_0 one with its zip): type -> the export's result."""
    results = {}
    for gguf_type, make_zip in (("f16", False), ("q8_0", True)):
        plan = plan_export(run_dir, kind="gguf", gguf_type=gguf_type)
        results[gguf_type] = export(plan, Progress(None), make_zip=make_zip)
    return results


@pytest.fixture(scope="module")
def reference(run_dir: Path):
    """transformers' merged model (float32) and the run's tokenizer."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    base = AutoModelForCausalLM.from_pretrained(str(DEMO_MODEL), dtype=torch.float32)
    model = PeftModel.from_pretrained(base, str(run_dir / "adapter")).merge_and_unload().eval()
    return model, AutoTokenizer.from_pretrained(str(run_dir / "adapter"))


def gguf_file(result: dict) -> Path:
    return Path(result["path"]) / result["gguf"]


def prompt_ids(tokenizer, llm: llama_cpp.Llama, messages: list[dict]) -> list[int]:
    """The prompt as llama.cpp's tokenizer reads the chat template's text; the same ids as transformers'."""
    text = tokenizer.apply_chat_template(messages[:1], add_generation_prompt=True, tokenize=False)
    ids = llm.tokenize(
        text.encode("utf-8"), add_bos=llm.metadata["tokenizer.ggml.add_bos_token"] == "true", special=True
    )
    assert ids == tokenizer(text, add_special_tokens=False)["input_ids"], text
    return ids


def transformers_greedy(model, ids: list[int], eos: int) -> list[int]:
    with torch.inference_mode():
        out = model.generate(torch.tensor([ids]), max_new_tokens=NEW_TOKENS, do_sample=False, eos_token_id=eos)
    return out[0, len(ids) :].tolist()


def llama_greedy(llm: llama_cpp.Llama, ids: list[int], eos: int) -> list[int]:
    """llama.cpp's greedy continuation, up to and including EOS (as transformers' generate returns it)."""
    llm.reset()
    tokens = []
    for token in llm.generate(ids, temp=0.0, top_k=1, reset=True):
        tokens.append(token)
        if token == eos or len(tokens) == NEW_TOKENS:
            break
    return tokens


def load(path: Path) -> llama_cpp.Llama:
    return load_llama(str(path), logits_all=False, verbose=False, n_ctx=256, seed=0)


def test_f16_greedy_tokens_equal_transformers_on_ten_held_out_prompts(exports, reference):
    model, tokenizer = reference
    llm = load(gguf_file(exports["f16"]))
    same = 0
    for messages in HELD_OUT[:10]:
        ids = prompt_ids(tokenizer, llm, messages)
        expected = transformers_greedy(model, ids, tokenizer.eos_token_id)
        got = llama_greedy(llm, ids, tokenizer.eos_token_id)
        same += got == expected
        assert got == expected, (tokenizer.decode(ids), tokenizer.decode(expected), tokenizer.decode(got))
    print(f"\nf16 GGUF: greedy tokens equal to transformers' on {same}/10 held-out prompts")


def answer(tokenizer, tokens: list[int]) -> str:
    return tokenizer.decode(tokens, skip_special_tokens=True).strip()


def test_q8_0_held_out_exact_match_within_five_points_of_transformers(exports, reference):
    model, tokenizer = reference
    llm = load(gguf_file(exports["q8_0"]))
    rows = HELD_OUT[:40]
    hf_right = llama_right = agree = 0
    for messages in rows:
        ids, truth = prompt_ids(tokenizer, llm, messages), messages[1]["content"]
        expected = answer(tokenizer, transformers_greedy(model, ids, tokenizer.eos_token_id))
        got = answer(tokenizer, llama_greedy(llm, ids, tokenizer.eos_token_id))
        hf_right, llama_right, agree = (
            hf_right + (expected == truth),
            llama_right + (got == truth),
            agree + (got == expected),
        )
    hf_score, llama_score = 100 * hf_right / len(rows), 100 * llama_right / len(rows)
    print(f"\nheld-out exact match: transformers {hf_score:.1f}%, q8_0 GGUF {llama_score:.1f}%; same answer {agree}/40")
    assert hf_score >= 50  # the run answers the task: a comparison of wrong answers would show nothing
    assert abs(hf_score - llama_score) <= 5


def field(reader: gguf.GGUFReader, key: str):
    return reader.fields[key].contents()


def test_file_metadata_holds_the_tokenizer_and_chat_template(exports):
    reader = gguf.GGUFReader(gguf_file(exports["q8_0"]))
    tokenizer_json = json.loads((DEMO_MODEL / "tokenizer.json").read_text())
    assert field(reader, "general.architecture") == "llama"
    assert field(reader, "tokenizer.chat_template") == (DEMO_MODEL / "chat_template.jinja").read_text()
    assert field(reader, "tokenizer.ggml.model") == "gpt2"
    assert field(reader, "tokenizer.ggml.pre") == "gpt-2"  # nearest to its own split (gguf/tokenizer.py: NEAREST)
    tokens = field(reader, "tokenizer.ggml.tokens")
    assert len(tokens) == 1295 and tokens[:6] == ["<pad>", "<s>", "</s>", "<|system|>", "<|user|>", "<|assistant|>"]
    assert len(field(reader, "tokenizer.ggml.merges")) == len(tokenizer_json["model"]["merges"])
    assert field(reader, "tokenizer.ggml.token_type")[:6] == [gguf.TokenType.CONTROL] * 6
    assert (field(reader, "tokenizer.ggml.bos_token_id"), field(reader, "tokenizer.ggml.eos_token_id")) == (1, 2)
    assert field(reader, "tokenizer.ggml.add_bos_token") is False  # the demo tokenizer adds no BOS
    assert field(reader, "llama.block_count") == 4 and field(reader, "llama.attention.head_count") == 4
    types = {tensor.name: tensor.tensor_type.name for tensor in reader.tensors}
    assert types["blk.0.attn_q.weight"] == "Q8_0" and types["blk.0.attn_norm.weight"] == "F32"
    assert types["blk.0.ffn_down.weight"] == "F16"  # rows of 688 values are not whole Q8_0 blocks of 32
    assert "output.weight" not in types  # tied: llama.cpp reads token_embd for the output
    assert exports["q8_0"]["pre_tokenizer"] == "gpt-2 (the nearest llama.cpp has)"


def test_modelfile_has_from_template_and_stops(exports):
    folder = Path(exports["q8_0"]["path"])
    text = (folder / "Modelfile").read_text()
    lines = text.splitlines()
    assert f"FROM ./{folder.name}.gguf" in lines
    assert 'PARAMETER stop "</s>"' in lines
    template = text.split('TEMPLATE """', 1)[1].split('"""', 1)[0]
    assert '{{ if eq .Role "system" }}<|system|>\n{{ .Content }}</s>\n' in template
    assert '{{ else if eq .Role "user" }}<|user|>\n{{ .Content }}</s>\n' in template
    assert '{{ else if eq .Role "assistant" }}<|assistant|>\n{{ .Content }}</s>\n' in template
    assert '{{ if and $last (ne .Role "assistant") }}<|assistant|>\n{{ end }}' in template
    assert "could not be translated" not in text
    assert exports["q8_0"]["template_translated"] is True


def test_export_folder_and_zip_carry_the_gguf_file_and_modelfile(exports):
    result = exports["q8_0"]
    name = Path(result["path"]).name
    assert result["files"] == sorted([f"{name}.gguf", "Modelfile", "README.md"])
    with zipfile.ZipFile(result["zip"]) as archive:
        assert sorted(archive.namelist()) == sorted(f"{name}/{file}" for file in result["files"])
    assert "ollama create" in (Path(result["path"]) / "README.md").read_text()
    assert exports["f16"]["bytes"] > result["bytes"]  # q8_0 holds a byte a weight where f16 holds two


def copy_run(run_dir: Path, name: str, base: Path | None = None) -> Path:
    """A copy of the run beside it, trained on ``base`` as far as its config says."""
    other = run_dir.parent / name
    shutil.copytree(run_dir, other)
    if base is not None:
        config = yaml.safe_load((other / "config.yaml").read_text())
        config["model"]["name_or_path"] = str(base)
        (other / "config.yaml").write_text(yaml.safe_dump(config))
    return other


def test_unsupported_architecture_is_refused_by_name_before_any_work(run_dir, workspace, tmp_path):
    base = tmp_path / "falcon-model"
    base.mkdir()
    config = json.loads((DEMO_MODEL / "config.json").read_text())
    (base / "config.json").write_text(json.dumps(config | {"architectures": ["FalconForCausalLM"]}))
    other = copy_run(run_dir, "falcon-run", base)
    folder = exports_dir(workspace)
    before = sorted(folder.iterdir()) if folder.exists() else []
    with pytest.raises(ExportError, match="does not support the architecture FalconForCausalLM; supported: "):
        plan_export(other, kind="gguf")
    result = subprocess.run(
        [sys.executable, "-m", "engine", "export", str(other), "--kind", "gguf"],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, HF_HUB_OFFLINE="1"),
    )
    assert result.returncode != 0
    assert "FalconForCausalLM" in result.stdout + result.stderr and "Traceback" not in result.stderr
    assert (sorted(folder.iterdir()) if folder.exists() else []) == before  # nothing written, not even a partial folder
    assert plan_export(run_dir, kind="gguf").kind == "gguf"  # the same run on its real base is accepted


def test_missing_tokenizer_file_is_refused_before_any_work(run_dir):
    other = copy_run(run_dir, "no-tokenizer-run")
    (other / "adapter" / "tokenizer.json").unlink()
    with pytest.raises(ExportError, match="needs the fast tokenizer's tokenizer.json"):
        plan_export(other, kind="gguf")
