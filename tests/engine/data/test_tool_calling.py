"""Tool-calling SFT data (the ``tools`` format): detection of ShareGPT and OpenAI-style rows, normalisation to the
transformers convention, loss masks on the calls and answers only (the row checks: test_tool_calling_validation.py), the
refusal of a chat template without tool support (the tokenizer's or data.chat_template, through the guard), the
demo model's template, the preview, and the real glaive file."""

from __future__ import annotations

import ast
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from data_helpers import CHATML_TEMPLATE, DEMO_MODEL, REPO_ROOT, build_tokenizer, make_config
from tool_rows_data import ANSWER, CALL, CLOCK, QUESTION, RESULT, WEATHER, openai_row, sharegpt_row
from transformers import AutoTokenizer, PreTrainedTokenizerFast

from engine.config import DataSection
from engine.data import DataError, inspect_dataset, load_rows, preview_examples, to_text
from engine.data.pipeline import select_rows, tokenize_rows
from engine.data.preview import check_tokens
from engine.data.template_guard import Conversation, probe_template, special_tokens_of
from engine.data.tokenize import PROBE_MESSAGES, render_plan, tokenize_row, tool_support_problem
from engine.data.tools import TOOL_PROBE_MESSAGES, TOOL_PROBE_TOOLS

WRAPPED_TOOLS = [{"type": "function", "function": WEATHER}, {"type": "function", "function": CLOCK}]
CANONICAL_CALL = {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}
CANONICAL_MESSAGES = [
    {"role": "user", "content": QUESTION},
    {"role": "assistant", "content": "", "tool_calls": [CANONICAL_CALL]},
    {"role": "tool", "content": RESULT},
    {"role": "assistant", "content": ANSWER},
]
# The calls and answers as the demo template writes them: what carries loss, and nothing else.
CALL_TEXT = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call></s>'
LOSS_TEXTS = [CALL_TEXT, f"{ANSWER}</s>"]
# The demo model's template before tool support, kept to show that rows without tools render as they did.
TEMPLATE_BEFORE_TOOLS = (
    "{% for message in messages %}{% if message['role'] == 'system' %}"
    "{{ '<|system|>\\n' + message['content'] + eos_token + '\\n' }}{% elif message['role'] == 'user' %}"
    "{{ '<|user|>\\n' + message['content'] + eos_token + '\\n' }}{% elif message['role'] == 'assistant' %}"
    "{{ '<|assistant|>\\n' }}{% generation %}{{ message['content'] + eos_token }}{% endgeneration %}{{ '\\n' }}"
    "{% else %}{{ raise_exception('Unknown role: ' + message['role']) }}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}"
)
# A ChatML template with tools in the Qwen / Hermes manner and no generation markers: the loss mask is found from
# the text, whatever the template.
CHATML_TOOLS_TEMPLATE = (
    "{% if tools %}<|im_start|>system\n# Tools\n{% for tool in tools %}{{ tool | tojson }}\n{% endfor %}"
    "<|im_end|>\n{% endif %}"
    "{% for message in messages %}"
    "{% if message['role'] == 'tool' %}"
    "<|im_start|>user\n<tool_response>{{ message['content'] }}</tool_response><|im_end|>\n"
    "{% else %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}"
    "{% for call in message['tool_calls'] or [] %}<tool_call>{{ call['function'] | tojson }}</tool_call>{% endfor %}"
    "<|im_end|>\n{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
# Loops only over the tools: cheap without them, 10^10 iterations with them.
SLOW_WITH_TOOLS = (
    "{% for tool in tools or [] %}{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}"
    "{% endfor %}" + CHATML_TOOLS_TEMPLATE
)


@pytest.fixture(scope="module")
def demo_tokenizer() -> PreTrainedTokenizerFast:
    """The bundled demo model's tokenizer, with its tool-calling template."""
    return AutoTokenizer.from_pretrained(DEMO_MODEL)


def loss_texts(tokenizer: Any, input_ids: list[int], mask: list[int]) -> list[str]:
    """Each run of loss-bearing tokens, decoded."""
    runs: list[list[int]] = []
    for index, (token, keep) in enumerate(zip(input_ids, mask, strict=True)):
        if keep:
            if index == 0 or not mask[index - 1]:
                runs.append([])
            runs[-1].append(token)
    return [tokenizer.decode(run, skip_special_tokens=False) for run in runs]


# ---------------------------------------------------------------------------------------------------------------
# Detection and normalisation
# ---------------------------------------------------------------------------------------------------------------


def test_sharegpt_rows_are_detected_and_normalised(write_jsonl: Callable[..., Path]) -> None:
    plain = {"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello"}], "tools": "[]"}
    loaded = load_rows(DataSection(path=str(write_jsonl([sharegpt_row(), plain]))))
    assert loaded.format == "tools"
    assert loaded.rows[0] == {"messages": CANONICAL_MESSAGES, "tools": WRAPPED_TOOLS}
    # A row without tools in a tool-calling file is an ordinary conversation with no tools.
    assert loaded.rows[1] == {
        "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}],
        "tools": [],
    }


def test_a_list_of_calls_and_a_system_column_are_kept(write_jsonl: Callable[..., Path]) -> None:
    row = sharegpt_row(call=[CALL, {"name": "read_clock", "arguments": {}}])
    row["system"] = "Be brief."
    loaded = load_rows(DataSection(path=str(write_jsonl([row]))))
    messages = loaded.rows[0]["messages"]
    assert messages[0] == {"role": "system", "content": "Be brief."}
    clock = {"type": "function", "function": {"name": "read_clock", "arguments": {}}}
    assert messages[2] == {"role": "assistant", "content": "", "tool_calls": [CANONICAL_CALL, clock]}


def test_openai_rows_are_detected_and_normalised(write_jsonl: Callable[..., Path]) -> None:
    loaded = load_rows(DataSection(path=str(write_jsonl([openai_row()]))))
    assert loaded.format == "tools"
    call = {**CANONICAL_CALL, "id": "call_1"}
    assert loaded.rows[0] == {
        "messages": [
            {"role": "user", "content": QUESTION},
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "content": RESULT, "tool_call_id": "call_1"},
            {"role": "assistant", "content": ANSWER},
        ],
        "tools": [{"type": "function", "function": WEATHER}],
    }


def test_a_tools_column_alone_makes_a_tool_file_and_an_empty_one_does_not(write_jsonl: Callable[..., Path]) -> None:
    turns = [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello"}]
    with_tools = write_jsonl([{"conversations": turns, "tools": json.dumps([WEATHER])}], name="with.jsonl")
    assert load_rows(DataSection(path=str(with_tools))).format == "tools"
    without = write_jsonl([{"conversations": turns, "tools": "[]"}], name="without.jsonl")
    assert load_rows(DataSection(path=str(without))).format == "conversational"


def test_the_tools_override_works_and_another_is_refused(write_jsonl: Callable[..., Path]) -> None:
    path = write_jsonl([openai_row()])
    assert load_rows(DataSection(path=str(path), format="tools")).format == "tools"
    with pytest.raises(DataError) as refused:
        load_rows(DataSection(path=str(path), format="conversational"))
    assert str(refused.value) == (
        f"{path} is a tool-calling dataset (function_call / observation turns, or tool_calls and tool results, "
        "with a tools column), but data.format is conversational, which has no tool calls; "
        "set data.format to tools (or auto)"
    )
    text = write_jsonl([{"text": "hello"}], name="text.jsonl")
    with pytest.raises(DataError, match="data.format is tools, but no row has the column"):
        load_rows(DataSection(path=str(text), format="tools"))


# ---------------------------------------------------------------------------------------------------------------
# Loss masks
# ---------------------------------------------------------------------------------------------------------------


def test_the_calls_and_answers_carry_loss_and_nothing_else(demo_tokenizer: Any, write_jsonl: Callable[..., Path]):
    for row in (sharegpt_row(), openai_row()):
        loaded = load_rows(DataSection(path=str(write_jsonl([row]))))
        tokenized = tokenize_row(demo_tokenizer, loaded.rows[0], demo_tokenizer.chat_template, 2048)
        assert loss_texts(demo_tokenizer, tokenized.input_ids, tokenized.completion_mask) == LOSS_TEXTS
        full = demo_tokenizer.decode(tokenized.input_ids, skip_special_tokens=False)
        # The tools schema, the question and the tool's result are in the text the model reads, without loss.
        assert json.dumps(WEATHER) in full and QUESTION in full and f"<|tool|>\n{RESULT}</s>" in full
        assert not tokenized.truncated


def test_the_mask_follows_any_template_with_tools(write_jsonl: Callable[..., Path]) -> None:
    tokenizer = build_tokenizer(CHATML_TOOLS_TEMPLATE, bos=None, eos="<|im_end|>")
    loaded = load_rows(DataSection(path=str(write_jsonl([sharegpt_row()]))))
    tokenized = tokenize_row(tokenizer, loaded.rows[0], CHATML_TOOLS_TEMPLATE, 2048)
    call = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call><|im_end|>'
    assert loss_texts(tokenizer, tokenized.input_ids, tokenized.completion_mask) == [call, f"{ANSWER}<|im_end|>"]


def test_without_completion_only_loss_every_token_trains(demo_tokenizer: Any, write_jsonl: Callable[..., Path]):
    loaded = load_rows(DataSection(path=str(write_jsonl([sharegpt_row()]))))
    tokenized = tokenize_row(demo_tokenizer, loaded.rows[0], demo_tokenizer.chat_template, 2048, False)
    assert tokenized.completion_mask == [1] * len(tokenized.input_ids)
    assert "get_weather" in demo_tokenizer.decode(tokenized.input_ids)


# ---------------------------------------------------------------------------------------------------------------
# Validation: every message names its row
# ---------------------------------------------------------------------------------------------------------------

# ---------------------------------------------------------------------------------------------------------------
# A template without tool support is refused before launch
# ---------------------------------------------------------------------------------------------------------------


def refusal(data: DataSection, tokenizer: Any) -> str:
    with pytest.raises(DataError) as refused:
        inspect_dataset(data, tokenizer)
    return str(refused.value)


def test_the_tokenizers_own_template_without_tools_is_refused(
    tokenizer: Any, plain_tokenizer: Any, write_jsonl: Callable[..., Path]
) -> None:
    path = write_jsonl([sharegpt_row()])
    for own in (tokenizer, plain_tokenizer):  # ChatML without tools, and the default template
        message = refusal(DataSection(path=str(path)), own)
        assert message == (
            f"{path} row 1: cannot render it with the chat template: the chat template ignores tools: the tools "
            "passed as tools= do not appear in what it renders (no probe_lookup_weather, probe_read_clock); "
            "a tool-calling dataset needs a template that renders the tools list and the assistant's tool calls; "
            "set data.chat_template to one that supports them"
        )


def test_a_configured_template_without_tools_is_refused(demo_tokenizer: Any, write_jsonl: Callable[..., Path]):
    path = write_jsonl([openai_row()])
    message = refusal(DataSection(path=str(path), chat_template=CHATML_TEMPLATE), demo_tokenizer)
    assert (
        "the chat template ignores tools" in message and "set data.chat_template to one that supports them" in message
    )
    # The demo template before tool support raises on the tool turn: the guard's child names the row first.
    message = refusal(DataSection(path=str(path), chat_template=TEMPLATE_BEFORE_TOOLS), demo_tokenizer)
    assert message == f"{path} row 1: cannot render it with the chat template: Unknown role: tool"


def test_a_template_that_fails_on_tools_says_so(write_jsonl: Callable[..., Path]) -> None:
    before_tools = build_tokenizer(TEMPLATE_BEFORE_TOOLS, bos=None, eos="</s>")
    message = refusal(DataSection(path=str(write_jsonl([openai_row()]))), before_tools)
    assert "ignores tools: it cannot render a tool call and its result (Unknown role: tool)" in message


def test_a_template_that_renders_tools_but_not_calls_is_refused(demo_tokenizer: Any, write_jsonl: Callable[..., Path]):
    tools_only = "{% for tool in tools or [] %}{{ tool | tojson }}{% endfor %}" + CHATML_TEMPLATE
    message = refusal(DataSection(path=str(write_jsonl([openai_row()])), chat_template=tools_only), demo_tokenizer)
    assert "ignores tools: an assistant message's tool_calls do not appear in its turn" in message


def test_a_configured_template_with_tools_trains(tokenizer: Any, write_jsonl: Callable[..., Path]) -> None:
    data = DataSection(path=str(write_jsonl([sharegpt_row(), openai_row()])), chat_template=CHATML_TOOLS_TEMPLATE)
    report = inspect_dataset(data, tokenizer)
    assert (report.format, report.num_rows, report.num_dropped) == ("tools", 2, 0)


def test_the_guard_renders_with_the_tools(tokenizer: Any) -> None:
    """A configured template is bounded with the tools it will get: one slow only with tools is refused."""
    special = special_tokens_of(tokenizer)
    plain = [Conversation("f.jsonl", 1, [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}])]
    assert probe_template(SLOW_WITH_TOOLS, plain, special, budget_s=0.5).renders > 0
    with_tools = [Conversation("f.jsonl", 1, CANONICAL_MESSAGES, tools=WRAPPED_TOOLS)]
    with pytest.raises(DataError, match="took longer than 0.5 s|did not finish rendering"):
        probe_template(SLOW_WITH_TOOLS, with_tools, special, budget_s=0.5)


def test_a_tool_file_is_guarded_through_the_tool_probe(tokenizer: Any, write_jsonl: Callable[..., Path]) -> None:
    data = DataSection(path=str(write_jsonl([sharegpt_row()])), chat_template=SLOW_WITH_TOOLS)
    with pytest.raises(DataError, match=r"^data\.chat_template: the chat template (took longer|did not finish)"):
        inspect_dataset(data, tokenizer, template_budget_s=0.5)


def test_the_plan_holds_every_render_of_a_tool_row(
    tokenizer: Any, write_jsonl: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The guard's bound rests on this: tokenizing a tool row makes no render the child did not (tools included)."""
    config = make_config(write_jsonl([sharegpt_row()]), eval_size=0, chat_template=CHATML_TOOLS_TEMPLATE)
    loaded, train_idx, _, _ = select_rows(config.data, 42)
    made: set[tuple[str, bool, bool]] = set()
    original = type(tokenizer).apply_chat_template

    def recording(self: Any, conversation: list[dict[str, Any]], **kwargs: Any) -> Any:
        made.add((json.dumps(conversation), bool(kwargs.get("add_generation_prompt")), bool(kwargs.get("tools"))))
        return original(self, conversation, **kwargs)

    monkeypatch.setattr(type(tokenizer), "apply_chat_template", recording)
    tokenize_rows(loaded, train_idx, tokenizer, config.data, 2048)
    rows = [(loaded.rows[0]["messages"], True), (PROBE_MESSAGES, False), (TOOL_PROBE_MESSAGES, True)]
    planned = {
        (json.dumps(messages[:end]), prompt, tools) for messages, tools in rows for end, prompt in render_plan(messages)
    }
    assert made and made <= planned, made - planned


# ---------------------------------------------------------------------------------------------------------------
# The demo model's template, the preview, the real file
# ---------------------------------------------------------------------------------------------------------------


def test_the_demo_template_file_is_the_one_build_demo_writes(demo_tokenizer: Any) -> None:
    source = (REPO_ROOT / "assets" / "build_demo.py").read_text(encoding="utf-8")
    assigned = next(
        node.value
        for node in ast.parse(source).body
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "CHAT_TEMPLATE"
    )
    on_disk = (DEMO_MODEL / "chat_template.jinja").read_text(encoding="utf-8")
    assert ast.literal_eval(assigned) == on_disk == demo_tokenizer.chat_template
    assert "chat_template" not in json.loads((DEMO_MODEL / "tokenizer_config.json").read_text(encoding="utf-8"))


def test_the_demo_template_renders_rows_without_tools_as_before(demo_tokenizer: Any) -> None:
    lines = (REPO_ROOT / "assets" / "datasets" / "demo_sft_train.jsonl").read_text(encoding="utf-8").splitlines()
    conversations = [json.loads(line)["messages"] for line in lines[:50]]
    conversations.append([{"role": "system", "content": "Be brief."}, *conversations[0], *conversations[1]])
    for messages in conversations:
        for end, prompt in [*render_plan(messages), (len(messages), True)]:
            before = demo_tokenizer.apply_chat_template(
                messages[:end], chat_template=TEMPLATE_BEFORE_TOOLS, tokenize=False, add_generation_prompt=prompt
            )
            for tools in (None, []):
                now = demo_tokenizer.apply_chat_template(
                    messages[:end], tools=tools, tokenize=False, add_generation_prompt=prompt
                )
                assert now == before


def test_the_demo_template_puts_a_system_message_before_the_tools(demo_tokenizer: Any) -> None:
    messages = [{"role": "system", "content": "Be brief."}, *CANONICAL_MESSAGES]
    text = demo_tokenizer.apply_chat_template(messages, tools=WRAPPED_TOOLS, tokenize=False)
    assert text == (
        "<|system|>\nBe brief.\n\nYou can call these tools. To call one, answer with "
        '<tool_call>{"name": ..., "arguments": {...}}</tool_call>.\n'
        f"{json.dumps(WEATHER)}\n{json.dumps(CLOCK)}</s>\n"
        f"<|user|>\n{QUESTION}</s>\n<|assistant|>\n{CALL_TEXT}\n<|tool|>\n{RESULT}</s>\n<|assistant|>\n{ANSWER}</s>\n"
    )
    # What the template's generation markers mark agrees with the engine's mask.
    marked = demo_tokenizer.apply_chat_template(
        messages, tools=WRAPPED_TOOLS, return_dict=True, return_assistant_tokens_mask=True
    )
    assert loss_texts(demo_tokenizer, marked["input_ids"], marked["assistant_masks"]) == LOSS_TEXTS


def test_the_demo_template_passes_its_own_probe(demo_tokenizer: Any) -> None:
    assert tool_support_problem(demo_tokenizer, demo_tokenizer.chat_template) is None
    text = demo_tokenizer.apply_chat_template(TOOL_PROBE_MESSAGES, tools=TOOL_PROBE_TOOLS, tokenize=False)
    assert "probe_read_clock" in text


def test_the_preview_marks_the_calls(demo_tokenizer: Any, write_jsonl: Callable[..., Path]) -> None:
    config = make_config(write_jsonl([sharegpt_row()]), eval_size=0)
    [example] = preview_examples(config, demo_tokenizer, n=1)
    assert to_text(example) == (
        "<|system|>\nYou can call these tools. To call one, answer with "
        '<tool_call>{"name": ..., "arguments": {...}}</tool_call>.\n'
        f"{json.dumps(WEATHER)}\n{json.dumps(CLOCK)}</s>\n"
        f"<|user|>\n{QUESTION}</s>\n<|assistant|>\n[[{CALL_TEXT}]]\n<|tool|>\n{RESULT}</s>\n"
        f"<|assistant|>\n[[{ANSWER}</s>]]\n"
    )


def test_the_real_glaive_file_loads_and_every_row_validates(shared_datasets: Path, demo_tokenizer: Any) -> None:
    path = shared_datasets / "glaive_toolcall_en_demo.json"
    raw = json.loads(path.read_text(encoding="utf-8"))
    loaded = load_rows(DataSection(path=str(path)))  # validates every row first: a bad one would raise
    assert (loaded.format, len(loaded.rows), loaded.columns) == ("tools", 300, ["conversations", "tools"])
    tags = [turn["from"] for row in raw for turn in row["conversations"]]
    messages = [message for row in loaded.rows for message in row["messages"]]
    assert sum("tool_calls" in message for message in messages) == tags.count("function_call") == 211
    assert sum(message["role"] == "tool" for message in messages) == tags.count("observation")
    assert sum(bool(row["tools"]) for row in loaded.rows) == 191  # the others write "[]"
    first_call = next(message for message in loaded.rows[0]["messages"] if "tool_calls" in message)
    assert first_call["tool_calls"] == [
        {
            "type": "function",
            "function": {"name": "search_recipes", "arguments": {"ingredients": ["chicken", "bell peppers", "rice"]}},
        }
    ]
    # Tokenized with the demo template, the first row's call carries loss.
    tokenized = tokenize_row(demo_tokenizer, loaded.rows[0], demo_tokenizer.chat_template, 4096)
    texts = loss_texts(demo_tokenizer, tokenized.input_ids, tokenized.completion_mask)
    call = '<tool_call>{"name": "search_recipes", "arguments": {"ingredients": ["chicken", "bell peppers", "rice"]}}'
    assert texts[1] == call + "</tool_call></s>"
    assert len(texts) == sum(message["role"] == "assistant" for message in loaded.rows[0]["messages"])


def test_the_check_counts_the_rows_whose_tool_calls_survive_max_length_and_shows_one_first(
    shared_datasets: Path, demo_tokenizer: Any
) -> None:
    path = shared_datasets / "glaive_toolcall_en_demo.json"
    raw = json.loads(path.read_text(encoding="utf-8"))
    calling = [
        number for number, row in enumerate(raw, 1) if any(t["from"] == "function_call" for t in row["conversations"])
    ]
    loaded = load_rows(DataSection(path=str(path)))
    template = demo_tokenizer.chat_template
    whole = [
        n for n in calling if len(tokenize_row(demo_tokenizer, loaded.rows[n - 1], template, 4096).input_ids) <= 512
    ]
    assert 0 < len(whole) < len(calling)  # the file as it is: some calls fit in 512 tokens, most do not

    checked = check_tokens(make_config(path, max_length=512, eval_size=0), demo_tokenizer)

    report = checked.report
    assert (report.num_tool_rows, report.num_tool_rows_whole) == (len(calling), len(whole))
    cut = f"only {len(whole)} of {len(calling)} rows with tool calls fit whole in max_length 512 tokens"
    assert any(warning.startswith(cut) for warning in report.warnings), report.warnings
    # The first rows of the file are plain chats; the preview leads with the first row whose call trains whole.
    assert checked.examples[0].row == whole[0] != 1
    assert "<tool_call>" in to_text(checked.examples[0])
    assert [example.row for example in checked.examples[1:]] == [1, 2]


def test_a_tool_calling_set_whose_calls_all_exceed_max_length_is_refused(
    shared_datasets: Path, demo_tokenizer: Any
) -> None:
    path = shared_datasets / "glaive_toolcall_en_demo.json"
    calls = sum(
        any(turn["from"] == "function_call" for turn in row["conversations"])
        for row in json.loads(path.read_text(encoding="utf-8"))
    )
    config = make_config(path, max_length=256, eval_size=0)  # the demo model's context: plain chats still fit
    with pytest.raises(DataError, match=f"none of the {calls} rows with tool calls fits whole in max_length 256"):
        check_tokens(config, demo_tokenizer)
