"""A chat template from the config (``data.chat_template``) is rendered first in a child process that can block
no one and can be killed: with a CPU-time budget and a memory limit (RLIMIT_AS), on the conversations the caller
is about to render. Jinja's sandbox caps each ``range`` but neither nesting nor the size of what a template builds,
so without this one template could hold a studio's shared lane for minutes or fill its memory.

The tokenizer's own template is trusted and not probed. What the probe bounds: the child renders every
conversation as ``engine.data.tokenize.render_plan`` says (the whole conversation and each prefix that
``assistant_spans`` renders for the loss mask, with the row's tools, the probe conversation of
``closes_assistant_turns``, and when any row calls tools the tool probe of ``require_tool_support``), in the
environment transformers builds for chat templates, with the tokenizer's special tokens. That is every render the
caller's in-process tokenization then makes, so those take about the probe's CPU time (at most the budget) and about
the memory the probe stayed under. The child is ``template_child.py``, a script that imports only jinja2.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.data.errors import DataError, render_error
from engine.data.tokenize import PROBE_MESSAGES, render_plan
from engine.data.tools import TOOL_PROBE_MESSAGES, TOOL_PROBE_TOOLS, uses_tools

# CPU seconds a dataset check may spend rendering a configured template: a check runs while a visitor waits.
CHECK_BUDGET_S = 2.0
# The training process renders every training and eval row; it holds no one's lane, so it may take longer.
TRAIN_BUDGET_S = 60.0
# The child's whole address space: the interpreter and jinja2 take about 30 MiB of it, a row rarely 1 MiB.
MEMORY_LIMIT_BYTES = 256 * 2**20
# The budget counts the child's CPU time, so a busy machine does not refuse a cheap template; the wall clock still
# ends the child after this many budgets plus the start, so no caller waits long even on a starved machine.
WALL_BUDGETS = 3
START_ALLOWANCE_S = 2.0
CHILD_SCRIPT = Path(__file__).with_name("template_child.py")
# The largest constant a template may fold to when it compiles (a real template's longest literal is a few kB):
# the studio compiles a checked template in its own process, and transformers keeps up to 128 compiled ones.
MAX_CONSTANT_CHARS = 65536


@dataclass(frozen=True)
class Conversation:
    """One row to probe: where it comes from (for a message naming it), its canonical messages and, for a
    tool-calling row, its tools (every render passes them, as engine.data.tokenize does)."""

    source: str
    number: int  # 1-based row number in ``source``
    messages: list[dict[str, Any]]
    prompt_turns: int = 0
    tools: list[dict[str, Any]] | None = None


@dataclass(frozen=True)
class ProbeResult:
    """What the child did: renders made, its CPU seconds, and the caller's wall seconds (child start included)."""

    renders: int
    cpu_s: float
    wall_s: float


def special_tokens_of(tokenizer: Any) -> dict[str, str]:
    """The variables apply_chat_template passes to a template besides the conversation (bos_token, eos_token, …)."""
    tokens = getattr(tokenizer, "special_tokens_map", None) or {}
    return {name: str(value) for name, value in tokens.items() if isinstance(value, str)}


def probe_template(
    template: str,
    conversations: Sequence[Conversation],
    special_tokens: dict[str, str],
    completion_only_loss: bool = True,
    budget_s: float = CHECK_BUDGET_S,
    memory_bytes: int = MEMORY_LIMIT_BYTES,
    generation_prompt: bool = False,
) -> ProbeResult:
    """Render ``conversations`` with ``template`` in a child process; raise DataError when the template takes more
    than ``budget_s`` CPU seconds, more than ``memory_bytes``, folds to too large a constant, or fails on a row (the
    message names the row). Without ``completion_only_loss`` each conversation is rendered once, whole, with the
    assistant's generation prompt when ``generation_prompt`` (as Chat renders what it sends to the model)."""
    if not conversations:
        return ProbeResult(0, 0.0, 0.0)
    payload = _payload(
        template, conversations, special_tokens, completion_only_loss, budget_s, memory_bytes, generation_prompt
    )
    wall_limit = WALL_BUDGETS * budget_s + START_ALLOWANCE_S
    started = time.monotonic()
    try:
        # subprocess.run kills the child when the wall limit passes, and takes a child that stopped reading early.
        # -P keeps engine/data (whose tokenize.py would shadow the standard library's) off the child's sys.path.
        done = subprocess.run(
            [sys.executable, "-P", str(CHILD_SCRIPT)],
            input=payload.encode("utf-8"),
            capture_output=True,
            timeout=wall_limit,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise DataError(
            f"data.chat_template: the chat template did not finish rendering {_rows(conversations)} within "
            f"{wall_limit:g} s; simplify it"
        ) from None
    result = _result(done)
    _raise_refusal(result, conversations, budget_s, memory_bytes)
    return ProbeResult(result.get("renders", 0), result.get("cpu_s", 0.0), time.monotonic() - started)


def _payload(
    template: str,
    conversations: Sequence[Conversation],
    special_tokens: dict[str, str],
    completion_only_loss: bool,
    budget_s: float,
    memory_bytes: int,
    generation_prompt: bool = False,
) -> str:
    """The child's stdin: the header line, then one line per conversation (its index as the row, the probe last)."""
    header: dict[str, Any] = {"template": template, "special_tokens": special_tokens, "budget_s": budget_s}
    header |= {"memory_bytes": memory_bytes, "max_constant_chars": MAX_CONSTANT_CHARS}
    lines = [json.dumps(header)]
    for index, conversation in enumerate(conversations):
        plan = (
            render_plan(conversation.messages, conversation.prompt_turns)
            if completion_only_loss
            else [(len(conversation.messages), generation_prompt)]
        )
        line = {"row": index, "messages": conversation.messages, "renders": plan}
        if conversation.tools:
            line["tools"] = conversation.tools
        lines.append(json.dumps(line))
    if completion_only_loss:  # closes_assistant_turns renders the probe conversation then; its failures are quiet
        lines.append(json.dumps({"row": None, "messages": PROBE_MESSAGES, "renders": render_plan(PROBE_MESSAGES)}))
    if any(conversation.tools or uses_tools(conversation.messages) for conversation in conversations):
        # require_tool_support renders its probe (always with the loss spans) before the first tool row.
        probe = {"row": None, "messages": TOOL_PROBE_MESSAGES, "tools": TOOL_PROBE_TOOLS}
        lines.append(json.dumps({**probe, "renders": render_plan(TOOL_PROBE_MESSAGES)}))
    return "\n".join(lines) + "\n"


def _result(done: subprocess.CompletedProcess[bytes]) -> dict[str, Any]:
    """The child's JSON answer; a child that died without one ran out of memory where Python could not say so."""
    try:
        return json.loads(done.stdout.decode("utf-8").strip().splitlines()[-1])
    except (IndexError, ValueError):
        pass
    errors = done.stderr.decode("utf-8", "replace").strip()
    if "memory" in errors.lower() or done.returncode < 0:
        return {"error": "memory"}
    last = errors.splitlines()[-1] if errors else f"exit code {done.returncode}"
    raise DataError(f"data.chat_template: the chat template could not be checked: {last}")


def _raise_refusal(
    result: dict[str, Any], conversations: Sequence[Conversation], budget_s: float, memory_bytes: int
) -> None:
    """Raise the DataError that says why the child refused the template (nothing when it rendered everything)."""
    error = result.get("error")
    if error == "time":
        raise DataError(
            f"data.chat_template: the chat template took longer than {budget_s:g} s to render "
            f"{_rows(conversations)}; simplify it"
        )
    if error == "memory":
        raise DataError(
            f"data.chat_template: the chat template needs more than {memory_bytes // 2**20} MiB to render "
            f"{_rows(conversations)}; simplify it"
        )
    if error == "constant":
        raise DataError(
            f"data.chat_template: the chat template holds a constant of {result['chars']:,} characters once Jinja "
            f"folds it (the most is {MAX_CONSTANT_CHARS:,}); simplify it"
        )
    if error == "row":
        conversation = conversations[result["row"]]
        raise render_error(conversation.source, conversation.number, result["message"])


def _rows(conversations: Sequence[Conversation]) -> str:
    count = len(conversations)
    return f"{count:,} row{'s' if count != 1 else ''}"
