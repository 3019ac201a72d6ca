"""Turn canonical rows into ``input_ids`` and a ``completion_mask`` (1 = the token carries loss).

The loss mask has to work for any chat template, not only ones with ``{% generation %}`` markers, so it
is computed from text, not from template internals: render the whole conversation, find the characters
of each assistant turn by rendering prefixes of the conversation, then tokenize the whole text once with
character offsets and mark the tokens that fall inside those characters. Each assistant span runs to the
end of the turn as the template renders it, so the end-of-turn / eos token that closes the answer carries
loss and the model learns to stop.

Tool-calling rows render with their tools (``apply_chat_template(..., tools=tools)``) in every render: an
assistant's call is an assistant turn, so it carries loss like an answer; tool results, user turns and the
tools schema do not. A template that ignores tools or calls is refused first (require_tool_support).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

from engine.data.errors import DataError
from engine.data.tools import TOOL_PROBE_CITY, TOOL_PROBE_MESSAGES, TOOL_PROBE_TOOLS, uses_tools

# Used when the tokenizer has no chat template and data.chat_template is empty. Zephyr-style turns:
# "<|role|>\n{content}\n", the assistant's content closed by eos (inside generation markers, so TRL's
# assistant_only_loss would agree with our mask). BOS starts the text when the tokenizer has one.
DEFAULT_CHAT_TEMPLATE = (
    "{% if bos_token %}{{ bos_token }}{% endif %}"
    "{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>\\n' }}"
    "{% if message['role'] == 'assistant' %}"
    "{% generation %}{{ message['content'] + (eos_token or '') }}{% endgeneration %}"
    "{% else %}{{ message['content'] }}{% endif %}"
    "{{ '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}"
)

# A multi-megabyte row would take seconds to tokenize only to be cut to max_length. Tokens span a few characters
# (rarely more than a dozen), so the first (max_length + margin) * 32 characters nearly always hold more than
# max_length tokens: tokenize those, and the whole text only when they fall short.
_CHARS_PER_TOKEN = 32
_MARGIN_TOKENS = 16


# The conversation closes_assistant_turns renders to see what a template puts after an answer.
PROBE_MESSAGES = [{"role": "user", "content": "Probe question"}, {"role": "assistant", "content": "Probe answer 7"}]


@dataclass
class TokenizedRow:
    """One example as the model sees it, cut to max_length."""

    input_ids: list[int]
    completion_mask: list[int]
    length: int  # tokens before truncation

    @property
    def truncated(self) -> bool:
        return self.length > len(self.input_ids)

    @property
    def num_loss_tokens(self) -> int:
        return sum(self.completion_mask)


def resolve_chat_template(tokenizer: Any, override: str | None) -> str:
    """The chat template used for training: the override, the tokenizer's own, else DEFAULT_CHAT_TEMPLATE.

    The trainer should store the same template on the tokenizer it saves, so chat after training formats
    prompts exactly as training did.
    """
    if override:
        return override
    own = getattr(tokenizer, "chat_template", None)
    if isinstance(own, dict):  # several named templates: "default" is the one apply_chat_template picks
        own = own.get("default")
    return own or DEFAULT_CHAT_TEMPLATE


def render(
    tokenizer: Any,
    messages: list[dict[str, Any]],
    template: str,
    add_generation_prompt: bool,
    tools: list[dict[str, Any]] | None = None,
) -> str:
    """The conversation as text, exactly as the template renders it (with the tools it may call, if any)."""
    return tokenizer.apply_chat_template(
        messages,
        tools=tools or None,
        chat_template=template,
        tokenize=False,
        add_generation_prompt=add_generation_prompt,
    )


def assistant_spans(
    tokenizer: Any,
    messages: list[dict[str, Any]],
    template: str,
    prompt_turns: int = 0,
    tools: list[dict[str, Any]] | None = None,
) -> tuple[str, list[tuple[int, int]]]:
    """The rendered conversation and the character spans [start, end) of the assistant turns that carry loss.

    A span starts where the generation prompt for that turn ends and runs to the end of the rendered turn
    (trailing whitespace such as the newline between turns excluded: generation stops before it). Assistant
    turns among the first ``prompt_turns`` messages are context and get no span. An assistant's tool call is an
    assistant turn: its span covers the call as the template renders it.
    """
    full = render(tokenizer, messages, template, add_generation_prompt=False, tools=tools)
    spans: list[tuple[int, int]] = []
    cursor = 0
    for index, message in enumerate(messages):
        if message["role"] != "assistant" or index < prompt_turns:
            continue
        span = _span_by_prefix(tokenizer, messages, template, index, full, tools)
        if span is None or span[0] < cursor:
            span = _span_by_search(tokenizer, _answer_text(message), full, cursor)
        spans.append(span)
        cursor = span[1]
    return full, spans


def render_plan(messages: list[dict[str, Any]], prompt_turns: int = 0) -> list[tuple[int, bool]]:
    """Every render ``assistant_spans`` may make of a conversation, as (end, add_generation_prompt): the text of
    ``messages[:end]``. The whole conversation comes first; then, for each assistant turn that carries loss, the
    prefix before it with a generation prompt and the conversation up to it (the last turn reuses the whole).

    engine.data.template_guard renders this list in a child process, so it must hold every render made here.
    """
    plan = [(len(messages), False)]
    for index, message in enumerate(messages):
        if message["role"] == "assistant" and index >= prompt_turns:
            plan.append((index, True))
            if index < len(messages) - 1:
                plan.append((index + 1, False))
    return plan


def closes_assistant_turns(tokenizer: Any, template: str) -> bool:
    """Whether the template puts something (an end-of-turn or eos token) after an assistant's answer.

    Without it the loss never covers a stop signal, and the trained model does not know when to stop.
    """
    try:
        full, spans = assistant_spans(tokenizer, PROBE_MESSAGES, template)
    except Exception:  # a template this unusual fails on real rows too, with a message naming the row
        return True
    return bool(spans) and full[spans[-1][0] : spans[-1][1]].strip() != PROBE_MESSAGES[-1]["content"]


def _span_by_prefix(
    tokenizer: Any,
    messages: list[dict[str, Any]],
    template: str,
    index: int,
    full: str,
    tools: list[dict[str, Any]] | None = None,
) -> tuple[int, int] | None:
    """The span of turn ``index`` from render(before + generation prompt) and render(up to this turn)."""
    try:
        prefix = render(tokenizer, messages[:index], template, add_generation_prompt=True, tools=tools)
        upto = (
            full
            if index == len(messages) - 1
            else render(tokenizer, messages[: index + 1], template, add_generation_prompt=False, tools=tools)
        )
    except Exception:  # some templates refuse a prefix (e.g. one that must start with a user turn)
        return None
    # Templates that render earlier turns differently (e.g. dropping reasoning) break the prefix property.
    if not (full.startswith(upto) and upto.startswith(prefix)):
        return None
    start, end = len(prefix), len(upto.rstrip())
    return (start, end) if end > start else (start, len(upto))


def _answer_text(message: dict[str, Any]) -> str:
    """What _span_by_search looks for: the answer, or for a bare tool call the name of the function it calls."""
    calls = message.get("tool_calls") or []
    if message.get("content") or not calls:
        return message["content"]
    return calls[0]["function"]["name"]


def _span_by_search(tokenizer: Any, content: str, full: str, cursor: int) -> tuple[int, int]:
    """Fallback: find the answer's text after the previous span; take a directly following eos along."""
    start = full.find(content, cursor)
    if start < 0:
        raise DataError("the chat template does not render an assistant answer verbatim, so its tokens cannot be found")
    end = start + len(content)
    eos = getattr(tokenizer, "eos_token", None)
    if eos and full.startswith(eos, end):
        end += len(eos)
    return start, end


def tokenize_messages(
    tokenizer: Any,
    messages: list[dict[str, Any]],
    template: str,
    max_length: int,
    completion_only_loss: bool = True,
    prompt_turns: int = 0,
    tools: list[dict[str, Any]] | None = None,
) -> TokenizedRow:
    """Render and tokenize a conversation (with its ``tools``); with ``completion_only_loss`` only assistant
    answers and calls carry loss."""
    if completion_only_loss:
        full, spans = assistant_spans(tokenizer, messages, template, prompt_turns, tools)
    else:
        full = render(tokenizer, messages, template, add_generation_prompt=False, tools=tools)
        spans = [(0, len(full))]
    if getattr(tokenizer, "is_fast", False):
        encoded = encode_head(tokenizer, full, max_length, add_special_tokens=False, return_offsets_mapping=True)
        ids = list(encoded["input_ids"])
        # Only the kept tokens need a mask; long documents would otherwise dominate the time spent here.
        mask = _span_mask(encoded["offset_mapping"][:max_length], spans)
    else:
        ids, mask = _tokenize_pieces(tokenizer, full, spans)
    return TokenizedRow(ids[:max_length], mask[:max_length], len(ids))


def encode_head(tokenizer: Any, text: str, max_length: int, **kwargs: Any) -> Any:
    """``tokenizer(text, **kwargs)``, or of a long text's head when that already holds more than max_length tokens.

    The tokens kept (the first max_length) are those of the whole text: the margin keeps the cut far from them.
    A row cut this way still counts as truncated, since its head alone is longer than max_length.
    """
    # The rows' lengths are counted and cut here against max_length (and reported by the check): the tokenizer's
    # own warning about its model_max_length ("Token indices sequence length is longer than ...") only misleads.
    kwargs.setdefault("verbose", False)
    budget = (max_length + _MARGIN_TOKENS) * _CHARS_PER_TOKEN
    if len(text) > budget:
        head = tokenizer(text[:budget], **kwargs)
        if len(head["input_ids"]) >= max_length + _MARGIN_TOKENS:
            return head
    return tokenizer(text, **kwargs)


def _span_mask(offsets: list[tuple[int, int]], spans: list[tuple[int, int]]) -> list[int]:
    """1 for each token whose characters overlap a span; offsets and spans both run left to right."""
    mask = []
    current = 0
    for start, end in offsets:
        end = max(end, start + 1)  # a zero-width token counts where it stands
        while current < len(spans) and spans[current][1] <= start:
            current += 1
        mask.append(int(current < len(spans) and spans[current][0] < end))
    return mask


def _in_spans(start: int, end: int, spans: list[tuple[int, int]]) -> bool:
    """Whether a token's characters overlap a span (a zero-width token counts where it stands)."""
    end = max(end, start + 1)
    return any(start < span_end and end > span_start for span_start, span_end in spans)


def _tokenize_pieces(tokenizer: Any, full: str, spans: list[tuple[int, int]]) -> tuple[list[int], list[int]]:
    """For slow tokenizers without offsets: tokenize the text between span boundaries piece by piece.

    Merges across a boundary are lost, which shifts a token here and there, but the mask stays exact.
    """
    cuts = sorted({0, len(full), *(point for span in spans for point in span)})
    ids: list[int] = []
    mask: list[int] = []
    for start, end in zip(cuts, cuts[1:], strict=False):
        piece = tokenizer(full[start:end], add_special_tokens=False, verbose=False)["input_ids"]
        ids += piece
        mask += [int(_in_spans(start, end, spans))] * len(piece)
    return ids, mask


def tokenize_text(tokenizer: Any, text: str, max_length: int) -> TokenizedRow:
    """Plain text for language modelling: every token carries loss, and eos closes the document."""
    ids = list(encode_head(tokenizer, text, max_length)["input_ids"])  # with BOS for LLaMA, as TRL does
    eos = getattr(tokenizer, "eos_token_id", None)
    if eos is not None and (not ids or ids[-1] != eos):
        ids.append(eos)
    return TokenizedRow(ids[:max_length], [1] * min(len(ids), max_length), len(ids))


def tokenize_row(
    tokenizer: Any, row: dict[str, Any], template: str, max_length: int, completion_only_loss: bool = True
) -> TokenizedRow:
    """One canonical row (``{"messages": ...}``, with ``"tools"`` for tool calling, or ``{"text": ...}``) as
    input_ids and completion_mask. Raises DataError when a tool-calling row meets a template without tools."""
    if "text" in row:
        return tokenize_text(tokenizer, row["text"], max_length)
    tools = row.get("tools") or None
    if tools or uses_tools(row["messages"]):
        require_tool_support(tokenizer, template)
    return tokenize_messages(
        tokenizer, row["messages"], template, max_length, completion_only_loss, row.get("prompt_turns", 0), tools
    )


# Templates each tokenizer has rendered the tool probe with successfully: the check runs once, not once per row.
_TOOL_READY: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()


def require_tool_support(tokenizer: Any, template: str) -> None:
    """Raise DataError unless ``template`` renders a tools list and an assistant's tool call.

    A template that ignores them would train the calls as empty answers and never show the model its tools, a
    silent failure; so a probe conversation (engine.data.tools.TOOL_PROBE_MESSAGES) is rendered with two tools:
    the tool not called must appear (the tools list is rendered) and the call's name and argument must appear
    inside the call's loss span (the call is rendered as the assistant's turn).
    """
    if template in _TOOL_READY.get(tokenizer, ()):
        return
    problem = tool_support_problem(tokenizer, template)
    if problem:
        raise DataError(
            f"the chat template ignores tools: {problem}; a tool-calling dataset needs a template that renders "
            "the tools list and the assistant's tool calls; set data.chat_template to one that supports them"
        )
    _TOOL_READY.setdefault(tokenizer, set()).add(template)


def tool_support_problem(tokenizer: Any, template: str) -> str | None:
    """What the template leaves out of the tool probe conversation; None when it renders tools and calls."""
    try:
        full, spans = assistant_spans(tokenizer, TOOL_PROBE_MESSAGES, template, tools=TOOL_PROBE_TOOLS)
    except Exception as exc:  # e.g. a template that raises on the tool role
        text = str(exc).strip()
        return f"it cannot render a tool call and its result ({text.splitlines()[0] if text else type(exc).__name__})"
    missing = [tool["function"]["name"] for tool in TOOL_PROBE_TOOLS if tool["function"]["name"] not in full]
    if missing:
        return f"the tools passed as tools= do not appear in what it renders (no {', '.join(missing)})"
    call = full[spans[0][0] : spans[0][1]] if spans else ""
    name = TOOL_PROBE_MESSAGES[1]["tool_calls"][0]["function"]["name"]
    if name not in call or TOOL_PROBE_CITY not in call:
        return "an assistant message's tool_calls do not appear in its turn"
    return None
