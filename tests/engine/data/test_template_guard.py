"""A configured chat template is rendered first in a killable child (engine.data.template_guard): a slow or
memory-hungry template is refused within its budget, a failing one names its row as before, and a normal one
renders exactly as transformers renders it, with the same results as without the guard."""

from __future__ import annotations

import ast
import re
import resource
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from data_helpers import CHATML_TEMPLATE, make_config

from engine.config import ConfigError, RunConfig, parse_config
from engine.config.data import MAX_TEMPLATE_CHARS
from engine.data import DEFAULT_CHAT_TEMPLATE, DataError, inspect_dataset, prepare_datasets
from engine.data.pipeline import select_rows, tokenize_rows
from engine.data.template_child import compile_template
from engine.data.template_guard import (
    CHECK_BUDGET_S,
    CHILD_SCRIPT,
    MAX_CONSTANT_CHARS,
    MEMORY_LIMIT_BYTES,
    START_ALLOWANCE_S,
    WALL_BUDGETS,
    Conversation,
    probe_template,
    special_tokens_of,
)
from engine.data.tokenize import PROBE_MESSAGES, render_plan
from tests.helpers.machine_load import load_factor

BUNDLED = RunConfig().data  # the bundled demo set, as a fresh form has it
SLOW_LOOPS = 100_000  # range()'s cap in the sandbox: two of these nested are 10^10 iterations per row


def nested_loops(outer: int, inner: int) -> str:
    """ChatML with two nested loops that render nothing, before the conversation."""
    return (
        f"{{% for a in range({outer}) %}}{{% for b in range({inner}) %}}{{% endfor %}}{{% endfor %}}" + CHATML_TEMPLATE
    )


# A namespace string doubled 40 times: 2**40 characters, a terabyte, unless something stops it.
MEMORY_BOMB = (
    "{% set ns = namespace(text='x') %}{% for i in range(40) %}{% set ns.text = ns.text + ns.text %}{% endfor %}"
    "{{ ns.text | length }}" + CHATML_TEMPLATE
)
# What the guard's child must render as transformers does: generation tags, namespace, dict, tojson, loop controls.
FEATURES_TEMPLATE = (
    "{% set ns = namespace(turns=0) %}{{ bos_token or '' }}"
    "{% for message in messages %}{% if message['role'] == 'system' %}{% continue %}{% endif %}"
    "{% set ns.turns = ns.turns + 1 %}{{ dict(role=message['role']) | tojson }}: "
    "{% if message['role'] == 'assistant' %}{% generation %}{{ message['content'] + eos_token }}{% endgeneration %}"
    "{% else %}{{ message['content'] | trim }}{% endif %}\n{% endfor %}"
    "{% if add_generation_prompt %}{{ ns.turns }} <assistant>{% endif %}"
)


def chat_row(number: int) -> dict[str, Any]:
    """A one-exchange conversation."""
    return {"messages": [{"role": "user", "content": f"q{number}"}, {"role": "assistant", "content": f"a{number}"}]}


def training_rows(data: Any, seed: int = 42) -> int:
    """How many rows a check renders: the training rows after the eval split."""
    _, train_idx, _, _ = select_rows(data, seed)
    return len(train_idx)


def render_seconds(tokenizer: Any, template: str) -> float:
    """Wall seconds transformers takes to render one short conversation with ``template`` in this process."""
    started = time.perf_counter()
    tokenizer.apply_chat_template(PROBE_MESSAGES, chat_template=template, tokenize=False)
    return time.perf_counter() - started


def test_nested_loops_are_refused_within_the_budget(tokenizer: Any) -> None:
    # The cost of the full template, extrapolated from a version with a thousandth of its iterations per row.
    small = render_seconds(tokenizer, nested_loops(SLOW_LOOPS, 100))
    would_take = small * 1000 * training_rows(BUNDLED)
    data = BUNDLED.model_copy(update={"chat_template": nested_loops(SLOW_LOOPS, SLOW_LOOPS)})
    started = time.monotonic()
    with pytest.raises(DataError) as refused:
        inspect_dataset(data, tokenizer)
    took = time.monotonic() - started
    rows = f"{training_rows(BUNDLED):,} rows"
    # The budget is CPU time; on a starved machine the wall clock ends the child first (a message of its own).
    assert re.fullmatch(
        rf"data\.chat_template: the chat template (took longer than 2 s to render {rows}|did not finish rendering "
        rf"{rows} within \d+ s); simplify it",
        str(refused.value),
    ), str(refused.value)
    wall_limit = WALL_BUDGETS * CHECK_BUDGET_S + START_ALLOWANCE_S
    assert took < wall_limit + 5 * load_factor(), f"refused after {took:.1f} s"  # its limit, not the template's end
    assert would_take > 1000 * took, f"the template alone would take {would_take:.0f} s; refused after {took:.1f} s"


def test_a_memory_bomb_is_refused_and_this_process_stays_small(tokenizer: Any) -> None:
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    data = BUNDLED.model_copy(update={"chat_template": MEMORY_BOMB})
    with pytest.raises(DataError) as refused:
        inspect_dataset(data, tokenizer)
    rows = f"{training_rows(BUNDLED):,} rows"
    mib = MEMORY_LIMIT_BYTES // 2**20
    assert str(refused.value) == (
        f"data.chat_template: the chat template needs more than {mib} MiB to render {rows}; simplify it"
    )
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak_before) / 1024
    assert grown_mib < 64, f"this process grew by {grown_mib:.0f} MiB"


# A branch that never runs holds 10 GB once Jinja folds its constant when it compiles (in the child, under the
# memory cap, the folding fails and Jinja kept the expression, so the template used to pass and then cost the studio,
# which compiles with no cap, gigabytes).
FOLDED_BOMB = "{% if false %}{{ 'x' * 100000 * 100000 }}{% endif %}" + CHATML_TEMPLATE
# Folds to 100,000 characters: small for a machine, but each template the studio compiles stays in a cache.
FOLDED_BIG = "{% if false %}{{ 'ab' * 50000 }}{% endif %}" + CHATML_TEMPLATE


def test_a_constant_that_folds_to_gigabytes_is_refused_and_this_process_stays_small(tokenizer: Any) -> None:
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    with pytest.raises(DataError) as refused:
        inspect_dataset(BUNDLED.model_copy(update={"chat_template": FOLDED_BOMB}), tokenizer)
    mib = MEMORY_LIMIT_BYTES // 2**20
    assert str(refused.value).startswith(f"data.chat_template: the chat template needs more than {mib} MiB")
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak_before) / 1024
    assert grown_mib < 64, f"this process grew by {grown_mib:.0f} MiB"


def test_a_large_folded_constant_is_refused(tokenizer: Any) -> None:
    with pytest.raises(DataError) as refused:
        inspect_dataset(BUNDLED.model_copy(update={"chat_template": FOLDED_BIG}), tokenizer)
    assert str(refused.value) == (
        f"data.chat_template: the chat template holds a constant of 100,000 characters once Jinja folds it "
        f"(the most is {MAX_CONSTANT_CHARS:,}); simplify it"
    )
    small = "{% if false %}{{ 'ab' * 100 }}{% endif %}" + CHATML_TEMPLATE  # a literal of 200 characters is fine
    assert inspect_dataset(BUNDLED.model_copy(update={"chat_template": small}), tokenizer).num_rows > 0


def test_a_template_longer_than_the_limit_is_refused_by_the_config() -> None:
    with pytest.raises(ConfigError, match=r"data\.chat_template: .*65536"):
        parse_config({"data": {"chat_template": "x" * (MAX_TEMPLATE_CHARS + 1)}})


def test_the_training_data_is_guarded_too(tokenizer: Any) -> None:
    config = RunConfig().model_copy(update={"data": BUNDLED.model_copy(update={"chat_template": MEMORY_BOMB})})
    with pytest.raises(DataError, match=r"^data\.chat_template: the chat template needs more than 256 MiB to render"):
        prepare_datasets(config, tokenizer)


def test_a_failing_template_names_the_row_as_before(tokenizer: Any, write_jsonl: Callable[..., Path]) -> None:
    rows = [
        {"messages": [{"role": "user", "content": f"question {n}"}, {"role": "assistant", "content": f"answer {n}"}]}
        for n in range(1, 6)
    ]
    rows[2]["messages"].insert(0, {"role": "system", "content": "be brief"})
    template = "{% if messages[0]['role'] == 'system' %}{{ raise_exception('no system turns, please') }}{% endif %}"
    config = make_config(write_jsonl(rows), eval_size=0, chat_template=template + CHATML_TEMPLATE)
    loaded, train_idx, _, _ = select_rows(config.data, 42)
    with pytest.raises(DataError) as unguarded:  # the in-process rendering, as it was before the guard
        tokenize_rows(loaded, train_idx, tokenizer, config.data, 1024)
    with pytest.raises(DataError) as guarded:
        inspect_dataset(config.data, tokenizer)
    assert str(guarded.value) == str(unguarded.value)
    assert str(guarded.value).endswith("row 3: cannot render it with the chat template: no system turns, please")


def test_a_syntax_error_names_the_first_row(tokenizer: Any, write_jsonl: Callable[..., Path]) -> None:
    config = make_config(write_jsonl([chat_row(1), chat_row(2)]), chat_template="{% for %}")
    with pytest.raises(DataError, match=r"row 1: cannot render it with the chat template: Expected an expression"):
        inspect_dataset(config.data, tokenizer)


@pytest.mark.parametrize("template", [CHATML_TEMPLATE, DEFAULT_CHAT_TEMPLATE, FEATURES_TEMPLATE])
def test_a_normal_template_passes_with_the_same_results(template: str, tokenizer: Any) -> None:
    data = BUNDLED.model_copy(update={"chat_template": template})
    guarded = inspect_dataset(data, tokenizer)
    loaded, train_idx, _, _ = select_rows(data, 42)
    unguarded = tokenize_rows(loaded, train_idx, tokenizer, data, 1024)
    assert guarded.num_rows == len(unguarded.rows) == training_rows(BUNDLED)
    assert guarded.num_tokens == sum(len(row.input_ids) for row in unguarded.rows)
    assert guarded.num_loss_tokens == sum(row.num_loss_tokens for row in unguarded.rows)


@pytest.mark.parametrize("template", [CHATML_TEMPLATE, DEFAULT_CHAT_TEMPLATE, FEATURES_TEMPLATE])
def test_the_child_renders_as_transformers_does(template: str, tokenizer: Any) -> None:
    compiled = compile_template(template)
    special = special_tokens_of(tokenizer)
    loaded, train_idx, _, _ = select_rows(BUNDLED, 42)
    checked = 0
    for index in train_idx[:200]:
        messages = loaded.rows[index]["messages"]
        for end, prompt in render_plan(messages, loaded.rows[index].get("prompt_turns", 0)):
            ours = compiled.render(
                messages=messages[:end], tools=None, documents=None, add_generation_prompt=prompt, **special
            )
            theirs = tokenizer.apply_chat_template(
                messages[:end], chat_template=template, tokenize=False, add_generation_prompt=prompt
            )
            assert ours == theirs
            checked += 1
    assert checked >= 400


TURNS = [("system", "s"), ("user", "u1"), ("assistant", "a1"), ("user", "u2"), ("assistant", "a2")]
PLAN_FILES = {
    "conversational": [{"messages": [{"role": role, "content": content} for role, content in TURNS]}, chat_row(3)],
    # assistant turns inside the prompt are context: they get no span and no prefix render
    "prompt_completion": [
        {"prompt": [{"role": "user", "content": "p"}, {"role": "assistant", "content": "ctx"}], "completion": "c"}
    ],
}


@pytest.mark.parametrize("fmt", list(PLAN_FILES))
def test_the_plan_holds_every_render_of_the_loss_mask(
    fmt: str, tokenizer: Any, write_jsonl: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bound the probe gives rests on this: the in-process rendering makes no render the child did not."""
    rows = PLAN_FILES[fmt]
    config = make_config(write_jsonl(rows), eval_size=0, chat_template=CHATML_TEMPLATE)
    loaded, train_idx, _, _ = select_rows(config.data, 42)
    made: list[tuple[tuple[str, ...], bool]] = []
    original = type(tokenizer).apply_chat_template

    def recording(self: Any, conversation: list[dict[str, str]], **kwargs: Any) -> Any:
        made.append((tuple(m["content"] for m in conversation), bool(kwargs.get("add_generation_prompt"))))
        return original(self, conversation, **kwargs)

    monkeypatch.setattr(type(tokenizer), "apply_chat_template", recording)
    tokenize_rows(loaded, train_idx, tokenizer, config.data, 1024)
    planned = {
        (tuple(m["content"] for m in row["messages"][:end]), prompt)
        for row in [*loaded.rows, {"messages": PROBE_MESSAGES}]
        for end, prompt in render_plan(row["messages"], row.get("prompt_turns", 0))
    }
    assert made and set(made) <= planned, set(made) - planned


def test_the_probe_counts_its_renders_and_starts_quickly(tokenizer: Any) -> None:
    loaded, train_idx, _, _ = select_rows(BUNDLED, 42)
    one = [Conversation(loaded.source, 1, loaded.rows[train_idx[0]]["messages"])]
    result = probe_template(CHATML_TEMPLATE, one, special_tokens_of(tokenizer))
    assert result.renders == len(render_plan(one[0].messages)) + len(render_plan(PROBE_MESSAGES))
    assert result.cpu_s < CHECK_BUDGET_S
    assert result.wall_s < START_ALLOWANCE_S  # the interpreter and jinja2 only: no torch, no transformers


def test_the_child_imports_only_the_standard_library_and_jinja2() -> None:
    tree = ast.parse(CHILD_SCRIPT.read_text(encoding="utf-8"))
    names = {
        alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names
    }
    names |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    assert names - {"__future__", "jinja2"} <= set(sys.stdlib_module_names), names
