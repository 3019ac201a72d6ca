"""An Ollama ``Modelfile`` for a GGUF export: FROM the file, the chat template in Go's template language, stops.

Ollama does not run Jinja. The model's template is rendered with marker messages to learn the text around each
role (``<|user|>\\n`` before a user turn, ``</s>\\n`` after it, ...), a Go template is built from those pieces,
and the pieces are checked by re-rendering several conversations both ways: only when every one matches is the
translation used. Templates that do more than wrap each turn (Mistral's system prompt folded into the first user
turn, tools, reasoning blocks) fail that check and get a plain fallback template, with a comment saying so.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Sampling defaults of generation_config.json -> Ollama's parameter names.
SAMPLING_PARAMETERS = {
    "temperature": "temperature",
    "top_p": "top_p",
    "top_k": "top_k",
    "repetition_penalty": "repeat_penalty",
}
FALLBACK_TEMPLATE = "{{ if .System }}{{ .System }}\n\n{{ end }}{{ .Prompt }}"


@dataclass(frozen=True)
class TurnPieces:
    """The text a chat template puts around each message, as found by rendering marker messages."""

    head: str  # before the first message (a BOS written by the template)
    system: tuple[str, str] | None  # (before, after) a system message; None when the template has no system role
    user: tuple[str, str]
    assistant: tuple[str, str]
    generation: str  # the assistant's opening, after the last user message


def _marker(name: str) -> str:
    return f"\ue000{name}\ue001"  # private-use characters: no template writes them itself


def _render(template: str, messages: list[dict[str, str]], generation: bool, tokens: dict[str, str]) -> str:
    from transformers.utils.chat_template_utils import render_jinja_template

    rendered, _ = render_jinja_template([messages], chat_template=template, add_generation_prompt=generation, **tokens)
    return rendered[0]


def _between(text: str, *names: str) -> list[str]:
    """The text before, between and after the markers ``names``, in that order; ValueError if one is missing."""
    pieces, rest = [], text
    for name in names:
        before, found, rest = rest.partition(_marker(name))
        if not found:
            raise ValueError(f"the template dropped the {name} message")
        pieces.append(before)
    return [*pieces, rest]


def _without_prefix(text: str, prefix: str) -> str:
    if not text.startswith(prefix):
        raise ValueError("the turns are not wrapped the same way each time")
    return text[len(prefix) :]


def _without_suffix(text: str, suffix: str) -> str:
    if not text.endswith(suffix):
        raise ValueError("the turns are not wrapped the same way each time")
    return text[: len(text) - len(suffix)]


def turn_pieces(template: str, tokens: dict[str, str]) -> TurnPieces:
    """Find the text around each role; ValueError when the template does not wrap turns one by one."""

    def message(role: str, name: str) -> dict[str, str]:
        return {"role": role, "content": _marker(name)}

    chat = [message("user", "U1"), message("assistant", "A1"), message("user", "U2"), message("assistant", "A2")]
    _, user_to_assistant, assistant_to_user, _, assistant_end = _between(
        _render(template, chat, False, tokens), "U1", "A1", "U2", "A2"
    )
    user_start, user_end = _between(_render(template, chat[:1], False, tokens), "U1")
    user_open = _without_prefix(assistant_to_user, assistant_end)
    head = _without_suffix(user_start, user_open)
    assistant_open = _without_prefix(user_to_assistant, user_end)
    generation = _without_prefix(_between(_render(template, chat[:1], True, tokens), "U1")[1], user_end)
    try:
        with_system = _render(template, [message("system", "S"), *chat[:1]], False, tokens)
    except Exception:  # the template refuses a system message (raise_exception): it has no system role
        with_system = None
    system = None
    if with_system is not None and _marker("S") in with_system:  # one it renders must be a turn of its own
        system_start, system_to_user, _ = _between(with_system, "S", "U1")
        system = (_without_prefix(system_start, head), _without_suffix(system_to_user, user_open))
    return TurnPieces(head, system, (user_open, user_end), (assistant_open, assistant_end), generation)


def render_pieces(pieces: TurnPieces, messages: list[dict[str, str]], generation: bool) -> str:
    """What the Go template built from ``pieces`` renders for ``messages`` (used to check the translation)."""
    text = pieces.head
    for item in messages:
        wrap = {"system": pieces.system, "user": pieces.user, "assistant": pieces.assistant}[item["role"]]
        if wrap is None:
            raise ValueError("the template has no system role")
        text += wrap[0] + item["content"] + wrap[1]
    return text + (pieces.generation if generation else "")


def go_template(pieces: TurnPieces, include_head: bool) -> str:
    """The Ollama (Go ``text/template``) form of ``pieces``; one line with no trim markers, so the literal
    newlines of the turns stay exactly as they are."""
    roles = [("system", pieces.system), ("user", pieces.user), ("assistant", pieces.assistant)]
    branches = [(role, wrap) for role, wrap in roles if wrap is not None]
    body = "".join(
        ("{{ if " if number == 0 else "{{ else if ") + f'eq .Role "{role}" }}}}{wrap[0]}{{{{ .Content }}}}{wrap[1]}'
        for number, (role, wrap) in enumerate(branches)
    )
    last = '{{ if and $last (ne .Role "assistant") }}' + pieces.generation + "{{ end }}"
    loop = "{{ range $i, $_ := .Messages }}{{ $last := eq (len (slice $.Messages $i)) 1 }}"
    return (pieces.head if include_head else "") + loop + body + "{{ end }}" + last + "{{ end }}"


def translate(template: str, tokens: dict[str, str], add_bos: bool) -> tuple[str, TurnPieces | None, str | None]:
    """(Go template, the pieces, None) for a template that wraps turns one by one, checked on several
    conversations; else (the fallback template, None, the reason)."""
    try:
        pieces = turn_pieces(template, tokens)
        samples = [
            ([{"role": "user", "content": "Hi"}], True),
            ([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}], False),
            (
                [
                    {"role": "user", "content": "a"},
                    {"role": "assistant", "content": "b"},
                    {"role": "user", "content": "c"},
                ],
                True,
            ),
        ]
        if pieces.system is not None:
            samples.append(([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "a"}], True))
        for messages, generation in samples:
            if render_pieces(pieces, messages, generation) != _render(template, messages, generation, tokens):
                raise ValueError("it renders some conversations differently from a turn-by-turn template")
        pieces_text = "".join([pieces.head, pieces.generation, *pieces.user, *pieces.assistant, *(pieces.system or ())])
        if "{{" in pieces_text or '"""' in pieces_text:
            raise ValueError('its text holds {{ or """, which a Modelfile template cannot quote')
    except Exception as exc:  # any template we cannot read as turn-by-turn: the fallback, and why
        return FALLBACK_TEMPLATE, None, str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    # A BOS written by the template is added by llama.cpp itself when the tokenizer says so: not twice.
    include_head = not (add_bos and pieces.head == tokens.get("bos_token"))
    return go_template(pieces, include_head), pieces, None


def stop_words(pieces: TurnPieces | None, eos_token: str | None, special_tokens: set[str]) -> list[str]:
    """Where a reply ends: the special token that closes an assistant turn (``<|im_end|>``) and the EOS."""
    stops = []
    if pieces is not None and pieces.assistant[1].strip() in special_tokens:
        stops.append(pieces.assistant[1].strip())
    if eos_token and eos_token not in stops:
        stops.append(eos_token)
    return stops


def sampling_defaults(model_dir: Path) -> dict[str, Any]:
    """The sampling settings the model's generation_config.json sets, under Ollama's names."""
    path = Path(model_dir) / "generation_config.json"
    config = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    return {ollama: config[key] for key, ollama in SAMPLING_PARAMETERS.items() if config.get(key) is not None}


def modelfile_text(
    gguf_name: str,
    template: str | None,
    tokens: dict[str, str],
    add_bos: bool,
    special_tokens: set[str],
    parameters: dict[str, Any],
) -> str:
    """The Modelfile: FROM the GGUF beside it, TEMPLATE, a stop PARAMETER per stop word, sampling defaults."""
    lines = ["# Ollama: ollama create NAME -f Modelfile (run in this folder)", f"FROM ./{gguf_name}"]
    if template is None:
        go, pieces, problem = FALLBACK_TEMPLATE, None, "the model has no chat template"
    else:
        go, pieces, problem = translate(template, tokens, add_bos)
    if problem:
        lines.append(f"# The chat template could not be translated ({problem}); this plain template is a fallback.")
    lines.append(f'TEMPLATE """{go}"""')
    stops = stop_words(pieces, tokens.get("eos_token"), special_tokens)
    lines += [f"PARAMETER stop {json.dumps(word, ensure_ascii=False)}" for word in stops]
    lines += [f"PARAMETER {name} {value}" for name, value in parameters.items()]
    return "\n".join(lines) + "\n"
