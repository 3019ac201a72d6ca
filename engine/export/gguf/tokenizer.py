"""The tokenizer as GGUF metadata: the vocabulary, merges, special tokens, BOS/EOS habits and the chat template.

Two kinds, told apart by ``tokenizer.json``: byte-level BPE (GPT-2 / LLaMA 3 / Qwen style, llama.cpp's "gpt2"
model) and SentencePiece models in their byte-fallback BPE form (LLaMA 2, Mistral, Gemma: llama.cpp's "llama"
model). llama.cpp splits text before BPE with a regex of its own chosen by ``tokenizer.ggml.pre``; the name is
picked from the pre-tokenizer regex in ``tokenizer.json`` (llama.cpp's converter hashes a test string instead,
against a list of known models that we do not carry).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.export.gguf.architectures import GgufError

_CONTRACTIONS = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)"
_REST = r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
# Split regex of tokenizer.json -> llama.cpp pre-tokenizer whose regex is the same.
PRE_TOKENIZERS = {
    _CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}" + _REST: "llama-bpe",
    _CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}" + _REST: "qwen2",
}
# The LLaMA 3 regex with whole digit runs (the bundled demo model's): llama.cpp has no such pre-tokenizer. Its
# LLaMA 3 one cuts numbers into threes ("2039" -> "203" "9"); GPT-2's keeps digit runs whole and puts a space
# before a word or number into its piece, which gives the same tokens as long as the vocabulary has no merge
# across that boundary (the demo's has none: llama.cpp tokenizes all of the demo data as transformers does).
NEAREST = {_CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+" + _REST: "gpt-2"}


@dataclass(frozen=True)
class TokenizerInfo:
    """What the Modelfile and the export's result need to know about the tokenizer written."""

    model: str  # llama.cpp's tokenizer.ggml.model: gpt2 | llama
    pre: str  # tokenizer.ggml.pre
    exact_pre: bool  # whether llama.cpp splits text exactly as the Hugging Face tokenizer does
    bos_token: str | None
    eos_token: str | None
    add_bos: bool  # whether llama.cpp puts BOS before a prompt (as the Hugging Face tokenizer does)
    control_tokens: frozenset[str]
    chat_template: str | None


def _split_regex(pre_tokenizer: dict[str, Any] | None) -> str | None:
    """The regex of the first Split step of a tokenizer.json pre-tokenizer; "gpt2" for a plain ByteLevel one."""
    steps = (pre_tokenizer or {}).get("pretokenizers") or ([pre_tokenizer] if pre_tokenizer else [])
    for step in steps:
        if step.get("type") == "Split":
            return step.get("pattern", {}).get("Regex")
        if step.get("type") == "ByteLevel" and step.get("use_regex", True):
            return "gpt2"
    return None


def pre_tokenizer_name(tokenizer_json: dict[str, Any]) -> tuple[str, bool]:
    """(llama.cpp pre-tokenizer name, whether it is exact) for a byte-level BPE tokenizer.json."""
    regex = _split_regex(tokenizer_json.get("pre_tokenizer"))
    if regex == "gpt2":
        return "gpt-2", True
    if regex in PRE_TOKENIZERS:
        return PRE_TOKENIZERS[regex], True
    if regex in NEAREST:
        return NEAREST[regex], False
    raise GgufError(f"llama.cpp has no pre-tokenizer for this tokenizer's split regex {regex!r}")


def _adds(folder: Path, token_id: int | None, first: bool) -> bool:
    """Whether the Hugging Face tokenizer adds ``token_id`` at the start (``first``) or end of a plain text."""
    from tokenizers import Tokenizer

    ids = Tokenizer.from_file(str(folder / "tokenizer.json")).encode("a").ids
    return token_id is not None and bool(ids) and ids[0 if first else -1] == token_id


def _byte_level_vocab(tokenizer_json: dict[str, Any], vocab_size: int) -> tuple[list[str], list[int]]:
    """Tokens by id, with llama.cpp token types; ids the model has but the tokenizer lacks are padding."""
    import gguf

    by_id = {index: token for token, index in tokenizer_json["model"]["vocab"].items()}
    special = {item["id"]: item for item in tokenizer_json.get("added_tokens", [])}
    for index, item in special.items():
        by_id[index] = item["content"]
    tokens, types = [], []
    for index in range(vocab_size):
        if index not in by_id:
            tokens.append(f"[PAD{index}]")
            types.append(gguf.TokenType.UNUSED)
        elif index in special:
            tokens.append(by_id[index])
            types.append(gguf.TokenType.CONTROL if special[index].get("special") else gguf.TokenType.USER_DEFINED)
        else:
            tokens.append(by_id[index])
            types.append(gguf.TokenType.NORMAL)
    return tokens, types


def add_tokenizer(writer: Any, folder: Path, vocab_size: int) -> TokenizerInfo:
    """Write the tokenizer of ``folder`` (a saved model) into ``writer``; returns what was written."""
    import gguf

    folder = Path(folder)
    tokenizer_json = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    if tokenizer_json["model"].get("byte_fallback"):  # SentencePiece as BPE: scores and byte tokens, as llama.cpp
        vocab = gguf.LlamaHfVocab(folder)
        tokens, scores, types = zip(*vocab.all_tokens(), strict=True)
        model, pre, exact = "llama", "default", True
        writer.add_token_scores(list(scores))
    else:
        tokens, types = _byte_level_vocab(tokenizer_json, vocab_size)
        model, (pre, exact) = "gpt2", pre_tokenizer_name(tokenizer_json)
    writer.add_tokenizer_model(model)
    writer.add_tokenizer_pre(pre)
    writer.add_token_list(list(tokens))
    writer.add_token_types(list(types))
    special = gguf.SpecialVocab(folder, load_merges=model == "gpt2", n_vocab=len(tokens))
    # llama.cpp's defaults differ by pre-tokenizer (LLaMA 3 adds BOS): say what the Hugging Face tokenizer does.
    special.add_special_token["bos"] = _adds(folder, special.special_token_ids.get("bos"), first=True)
    special.add_special_token["eos"] = _adds(folder, special.special_token_ids.get("eos"), first=False)
    special.add_to_gguf(writer, quiet=True)  # merges, bos/eos/pad ids, chat template (chat_template.jinja too)

    def text(kind: str) -> str | None:
        index = special.special_token_ids.get(kind)
        return _as_text(tokens[index]) if index is not None else None

    control = frozenset(
        _as_text(token) for token, kind in zip(tokens, types, strict=True) if kind == gguf.TokenType.CONTROL
    )
    template = special.chat_template if isinstance(special.chat_template, str) else None
    add_bos = special.add_special_token["bos"]
    return TokenizerInfo(model, pre, exact, text("bos"), text("eos"), add_bos, control, template)


def _as_text(token: str | bytes) -> str:
    return token.decode("utf-8", errors="replace") if isinstance(token, bytes) else token
