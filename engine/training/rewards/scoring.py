"""The built-in rewards' score of one completion, and the text of a completion as TRL hands it over.

Pure Python: math_match uses math_verify when it is installed, else a plain number parser.
"""

from __future__ import annotations

import functools
import math
import re
import threading
from collections.abc import Callable
from typing import Any

from engine.training.methods.reward_spec import RewardSpec

# The kinds that compare a completion with a reference column of the data.
REFERENCE_KINDS = ("exact_match", "math_match")
# One completion's score: (its text, its row's values of the reward's columns, its token ids or None).
Scorer = Callable[[str, dict[str, Any], list[int] | None], float | None]

# A number as people write it: thousands commas, decimals; the sign only where it cannot be a minus (5-3).
_NUMBER = r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+"
_VALUE = re.compile(rf"(?P<sign>(?<![\w)])-)?(?P<num>{_NUMBER})(?:\s*/\s*(?P<den>{_NUMBER}))?")
_MATH_VERIFY_TIMEOUT_S = 5
REGEX_TIMEOUT_S = 1.0  # one answer against a regex reward's pattern


def reward_columns(spec: RewardSpec) -> tuple[str, ...]:
    """The dataset columns a reward reads: the reference column of exact_match and math_match, else none."""
    return (spec.column,) if spec.kind in REFERENCE_KINDS else ()


def completion_text(completion: Any) -> str:
    """The text of a completion: a string as is; of a message list, the content of the last assistant message
    (the final answer after any tool calls), or all contents joined when none is the assistant's."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        return _content_text(completion.get("content"))
    if isinstance(completion, (list, tuple)):
        messages = [message for message in completion if isinstance(message, dict)]
        answers = [message for message in messages if message.get("role") == "assistant"]
        if answers:
            return _content_text(answers[-1].get("content"))
        return "\n".join(_content_text(message.get("content")) for message in messages)
    return "" if completion is None else str(completion)


def _content_text(content: Any) -> str:
    """A message's content as text; of a list of content blocks, the text blocks joined."""
    if content is None:
        return ""
    if isinstance(content, list):
        return "".join(str(block.get("text", "")) for block in content if isinstance(block, dict))
    return str(content)


def token_count(tokenizer: Any, text: str) -> int:
    """How many tokens ``text`` is, without special tokens."""
    if tokenizer is None:
        raise ValueError("the length reward needs a tokenizer")
    return len(tokenizer(text, add_special_tokens=False).input_ids)


def last_number(text: str) -> float | None:
    """The last number in ``text`` (-3, 1,234.5, .5, or a fraction 3/4), or None when it has none."""
    match = None
    for match in _VALUE.finditer(text):  # noqa: B007 - the last one is wanted
        pass
    if match is None:
        return None
    value = float(match["num"].replace(",", ""))
    if match["den"]:
        denominator = float(match["den"].replace(",", ""))
        if denominator == 0:
            return None
        value /= denominator
    return -value if match["sign"] else value


@functools.cache
def _math_verify() -> tuple[Callable[..., Any], Callable[..., Any]] | None:
    """math_verify's (parse, verify), or None when it is not installed."""
    try:
        from math_verify import parse, verify
    except ImportError:
        return None
    return parse, verify


def math_match_score(completion: str, reference: str, use_math_verify: bool = True) -> float:
    """1.0 when the completion's final answer equals the reference as a number or math expression, else 0.0.

    With math_verify installed (and ``use_math_verify``) both are parsed and compared by math_verify; otherwise
    the last number of the completion must equal the last number of the reference within 1e-6 relative.
    """
    verifier = _math_verify() if use_math_verify else None
    if verifier is not None:
        parse, verify = verifier
        # math_verify times out with SIGALRM, which only the main thread may set.
        on_main = threading.current_thread() is threading.main_thread()
        timeout = _MATH_VERIFY_TIMEOUT_S if on_main else None
        gold = parse(reference, parsing_timeout=timeout)
        if not gold:
            return 0.0
        return float(bool(verify(gold, parse(completion, parsing_timeout=timeout), timeout_seconds=timeout)))
    expected, answer = last_number(reference), last_number(completion)
    if expected is None or answer is None:
        return 0.0
    return float(math.isclose(answer, expected, rel_tol=1e-6))


def _regex_scorer(pattern_text: str) -> Scorer:
    """1.0 when the whole stripped answer matches the pattern, else 0.0. Matched with the ``regex`` package for its
    time limit: Python's re has none, and a pattern that backtracks badly (``(a|a)+``) would hold a demo's shared
    check lane, or a run, for minutes on one answer; past the limit the reward fails, naming the row."""
    import regex

    pattern = regex.compile(pattern_text, regex.DOTALL)

    def matches(text: str, row: dict[str, Any], ids: list[int] | None) -> float:
        try:
            return float(pattern.fullmatch(text.strip(), timeout=REGEX_TIMEOUT_S) is not None)
        except TimeoutError:
            raise ValueError(
                f"the pattern took more than {REGEX_TIMEOUT_S:g} s on this answer (it backtracks: simplify it)"
            ) from None

    return matches


def builtin_scorer(spec: RewardSpec, tokenizer: Any) -> Scorer:
    """The score of one completion under a built-in reward (every kind but custom).

    A row whose reference is missing (None) scores None: TRL leaves that reward out for that completion.
    """
    fold: Callable[[str], str] = str.casefold if spec.ignore_case else str
    if spec.kind in REFERENCE_KINDS:
        column, exact = spec.column, spec.kind == "exact_match"

        def against_reference(text: str, row: dict[str, Any], ids: list[int] | None) -> float | None:
            reference = row[column]
            if reference is None:
                return None
            if exact:
                return float(fold(text.strip()) == fold(str(reference).strip()))
            return math_match_score(text, str(reference))

        return against_reference
    if spec.kind == "regex":
        return _regex_scorer(spec.pattern or "")
    if spec.kind == "length":
        target = spec.target_tokens or 1

        def length(text: str, row: dict[str, Any], ids: list[int] | None) -> float:
            count = len(ids) if ids is not None else token_count(tokenizer, text)
            return -abs(count - target) / target

        return length
    if spec.kind == "contains":
        needle, absent = fold(spec.text or ""), spec.absent
        return lambda text, row, ids: float((needle in fold(text)) != absent)
    raise ValueError(f"{spec.kind} is not a built-in reward")
