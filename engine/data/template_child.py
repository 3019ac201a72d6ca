"""The child process of engine.data.template_guard: render a chat template under a CPU-time and a memory limit.

Run as a script (``python -P template_child.py``), never imported by the engine: it imports only the standard
library and jinja2, so it starts in well under a second (transformers, whose chat-template module would import
its whole package, costs about ten times as much; torch is never near it).

Input on stdin, JSON lines: first ``{"template", "special_tokens", "budget_s", "memory_bytes",
"max_constant_chars"}``, then one line per
conversation ``{"row": N or null, "messages": [...], "tools": [...] (optional), "renders": [[end,
add_generation_prompt], ...]}``: render ``messages[:end]`` (with the tools) for each pair; the first pair is the
whole conversation, which must render (row N is named when it does not); the others may fail, as prefixes do in
engine.data.tokenize. A row of null is one of the engine's own probe conversations, whose failures are not
reported.
Output on stdout, one JSON object: ``{"ok": true, "renders": K, "cpu_s": T}``, or ``{"error": "time"}``,
``{"error": "memory"}``, ``{"error": "constant", "chars": N}``, ``{"error": "row", "row": N, "message": "..."}``.
"""

from __future__ import annotations

import contextlib
import json
import resource
import signal
import sys
import time
from datetime import datetime
from typing import Any

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment


class ConstantTooBig(Exception):
    """A template expression folds to a constant larger than the header's ``max_constant_chars``."""

    def __init__(self, chars: int):
        super().__init__(f"a constant of {chars} characters")
        self.chars = chars


class OverBudget(BaseException):
    """Raised by the CPU timer; a BaseException so that no ``except Exception`` below swallows it."""


def _on_timer(signum: int, frame: Any) -> None:
    raise OverBudget


class _GenerationTags(jinja2.ext.Extension):
    """``{% generation %}…{% endgeneration %}`` renders its body, as transformers' AssistantTracker does when it
    is not tracking (apply_chat_template with tokenize=False never tracks)."""

    tags = {"generation"}

    def parse(self, parser: jinja2.parser.Parser) -> jinja2.nodes.CallBlock:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

    def _body(self, caller: Any) -> str:
        return caller()


class _Namespace(jinja2.utils.Namespace):
    """transformers' TemplateNamespace: no underscore-prefixed attributes (no way to CPython internals)."""

    def __init__(*args: Any, **kwargs: Any) -> None:
        self, args = args[0], args[1:]
        attrs = dict(*args, **kwargs)
        for name in attrs:
            _Namespace._check(name)
        jinja2.utils.Namespace.__init__(self, attrs)

    def __setitem__(self, name: str, value: Any) -> None:
        _Namespace._check(name)
        jinja2.utils.Namespace.__setitem__(self, name, value)

    @staticmethod
    def _check(name: Any) -> None:
        if isinstance(name, str) and name.startswith("_"):
            raise jinja2.exceptions.SecurityError(f"chat templates cannot store {name!r} on a namespace")


class _Dict:
    """transformers' TemplateDict: ``dict(...)`` and ``dict.fromkeys(...)`` without the type itself."""

    def __call__(self, *args: Any, **kwargs: Any) -> dict[Any, Any]:
        return dict(*args, **kwargs)

    def fromkeys(self, *args: Any, **kwargs: Any) -> dict[Any, Any]:
        return dict.fromkeys(*args, **kwargs)


def _raise_exception(message: str) -> None:
    raise jinja2.exceptions.TemplateError(message)


def _tojson(
    value: Any, ensure_ascii: bool = False, indent: Any = None, separators: Any = None, sort_keys: bool = False
) -> str:
    """transformers' tojson: Jinja's own filter escapes HTML characters, which a prompt must keep as they are."""
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def compile_template(source: str) -> jinja2.Template:
    """The template in the environment transformers 5 builds for chat templates (utils/chat_template_utils.py,
    ``_cached_compile_jinja_template``): the immutable sandbox, trim_blocks and lstrip_blocks, loop controls, the
    generation tags, and the same globals and tojson filter. Importing that function would import transformers
    (0.8 s against 0.08 s for this whole child); tests/engine/data/test_template_guard.py checks that the
    renderings agree."""
    return _environment().from_string(source)


def _environment() -> ImmutableSandboxedEnvironment:
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[_GenerationTags, jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = _tojson
    env.globals.update(
        raise_exception=_raise_exception,
        strftime_now=lambda fmt: datetime.now().strftime(fmt),
        dict=_Dict(),
        namespace=_Namespace,
    )
    return env


def check_constants(template_source: str, max_chars: int) -> None:
    """Fold the template's constant expressions as Jinja's optimizer does when it compiles, and refuse a constant
    larger than ``max_chars`` (ConstantTooBig) or one whose folding runs out of memory (MemoryError).

    Jinja keeps an expression it cannot fold as it is, whatever the reason, also a MemoryError: under this child's
    cap ``{% if false %}{{ 'x' * 10**10 }}{% endif %}`` compiles and renders, and the studio, with no cap, would
    then fold it to gigabytes when transformers compiles the same template (and keep it in its cache of compiled
    templates). The optimizer offers no hook to see why it gave up, so the folding is asked for here, node by node.
    """
    tree = _environment().parse(template_source)
    for node in tree.find_all(jinja2.nodes.Expr):
        try:
            value = node.as_const()
        except jinja2.nodes.Impossible as exc:
            if _out_of_memory(exc):
                raise MemoryError from None
            continue
        chars = len(value) if isinstance(value, (str, bytes)) else len(repr(value))
        if chars > max_chars:
            raise ConstantTooBig(chars)


def _out_of_memory(exc: BaseException | None) -> bool:
    """Whether a MemoryError is among the causes of ``exc`` (as_const wraps each failure in Impossible)."""
    while exc is not None:
        if isinstance(exc, MemoryError):
            return True
        exc = exc.__cause__
    return False


def render_rows(template: jinja2.Template, lines: Any, special_tokens: dict[str, str]) -> dict[str, Any]:
    """Render every conversation of ``lines`` as planned; the first failing whole conversation ends it."""
    renders = 0
    for line in lines:
        if not line.strip():
            continue
        item = json.loads(line)
        # apply_chat_template drops keys whose value is None, and refuses an empty conversation.
        messages = [{k: v for k, v in message.items() if v is not None} for message in item["messages"]]
        tools = item.get("tools") or None  # as engine.data.tokenize.render passes them
        for position, (end, add_generation_prompt) in enumerate(item["renders"]):
            if end == 0:
                continue
            try:
                template.render(
                    messages=messages[:end],
                    tools=tools,
                    documents=None,
                    add_generation_prompt=add_generation_prompt,
                    **special_tokens,
                )
            except MemoryError:
                raise
            except Exception as exc:  # the template's raise_exception, a SecurityError, a recursion too deep, …
                if position == 0 and item["row"] is not None:
                    return {"error": "row", "row": item["row"], "message": _first_line(exc)}
            renders += 1
    return {"ok": True, "renders": renders}


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _limit_memory(limit: int) -> None:
    """Cap the address space; where the system has no such limit, the CPU budget still holds."""
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def main() -> int:
    """Read the header and the conversations from stdin, render, print one JSON result."""
    header = json.loads(sys.stdin.readline())
    _limit_memory(int(header["memory_bytes"]))
    # CPU time, not wall time: a busy machine must not make a cheap template fail (the parent keeps a wall limit).
    signal.signal(signal.SIGPROF, _on_timer)
    started = time.process_time()
    signal.setitimer(signal.ITIMER_PROF, float(header["budget_s"]))
    try:
        try:
            check_constants(header["template"], int(header["max_constant_chars"]))
            template = compile_template(header["template"])
        except ConstantTooBig as exc:
            result = {"error": "constant", "chars": exc.chars}
        except MemoryError:
            raise
        except Exception as exc:  # a syntax error: the first conversation cannot render, as in the engine
            first = json.loads(sys.stdin.readline() or "null") or {"row": None}
            result = {"error": "row", "row": first["row"], "message": _first_line(exc)}
        else:
            result = render_rows(template, sys.stdin, header["special_tokens"])
    except OverBudget:
        result = {"error": "time"}
    except MemoryError:
        result = {"error": "memory"}
    signal.setitimer(signal.ITIMER_PROF, 0)
    result["cpu_s"] = round(time.process_time() - started, 4)
    sys.stdout.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
