"""The GRPO reward functions against the demo tokenizer and real custom reward files: scores, names, errors."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from transformers import AutoTokenizer

from engine.config import ConfigError, Problem
from engine.store.paths import PROJECT_ROOT
from engine.training.methods.reward_spec import RewardSpec
from engine.training.rewards import (
    RewardError,
    check_rewards,
    completion_text,
    math_match_score,
    reward_columns,
    reward_functions,
)

HAS_MATH_VERIFY = importlib.util.find_spec("math_verify") is not None
SHAPES: dict[str, Callable[[list[str]], list[Any]]] = {
    "string": list,
    "conversational": lambda texts: [[{"role": "assistant", "content": text}] for text in texts],
}
ROWS = [
    {"prompt": [{"role": "user", "content": f"When is day {n}?"}], "answer": f"July {n}", "ts_row": n}
    for n in (1, 2, 3)
]

FIELD = "grpo.rewards"  # where a GRPO config lists its rewards: the problems name it


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    return AutoTokenizer.from_pretrained(PROJECT_ROOT / "assets" / "demo-model")


@pytest.fixture
def custom(tmp_path: Path) -> Callable[..., RewardSpec]:
    """Write a reward file and return the spec of its function ``my_fn`` (or another name)."""

    def write(source: str, function: str = "my_fn", name: str = "my_rewards.py") -> RewardSpec:
        path = tmp_path / name
        path.write_text(source, encoding="utf-8")
        return RewardSpec(kind="custom", file=str(path), function=function)

    return write


def score(reward: Callable[..., list[float | None]], completions: list[Any], **columns: Any) -> list[float | None]:
    """Call a reward function as TRL does, with prompts shaped like the completions."""
    prompts = [[{"role": "user", "content": "q"}] if isinstance(c, list) else "q" for c in completions]
    return reward(prompts=prompts, completions=completions, **columns)


def only(spec: RewardSpec, tokenizer: Any) -> Callable[..., list[float | None]]:
    (reward,) = reward_functions([spec], tokenizer)
    return reward


def check_problems(specs: list[RewardSpec], rows: list[dict[str, Any]], tokenizer: Any) -> dict[str, str]:
    with pytest.raises(ConfigError) as raised:
        check_rewards(specs, rows, tokenizer, FIELD)
    return raised.value.by_field()


# --- completion text and columns ---


def test_completion_text_of_strings_and_messages() -> None:
    assert completion_text(" 42 ") == " 42 "
    assert completion_text([{"role": "assistant", "content": "42"}]) == "42"
    tool_turns = [
        {"role": "assistant", "content": "let me look"},
        {"role": "tool", "content": "7"},
        {"role": "assistant", "content": "it is 7"},
    ]
    assert completion_text(tool_turns) == "it is 7"
    blocks = [{"role": "assistant", "content": [{"type": "text", "text": "he"}, {"type": "text", "text": "llo"}]}]
    assert completion_text(blocks) == "hello"
    assert completion_text([{"role": "tool", "content": "x"}, {"role": "user", "content": "y"}]) == "x\ny"


def test_reward_columns() -> None:
    assert reward_columns(RewardSpec(kind="exact_match")) == ("answer",)
    assert reward_columns(RewardSpec(kind="math_match", column="solution")) == ("solution",)
    assert reward_columns(RewardSpec(kind="contains", text="x")) == ()
    assert reward_columns(RewardSpec(kind="custom", file="f.py", function="f")) == ()


# --- built-ins ---


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize(("ignore_case", "expected"), [(False, [1.0, 0.0, 0.0]), (True, [1.0, 1.0, 0.0])])
def test_exact_match(shape: str, ignore_case: bool, expected: list[float], tokenizer: Any) -> None:
    reward = only(RewardSpec(kind="exact_match", ignore_case=ignore_case), tokenizer)
    completions = SHAPES[shape](["July 3rd", " july 3rd ", "July 3"])
    assert score(reward, completions, answer=["July 3rd"] * 3) == expected


def test_exact_match_without_a_reference_does_not_apply(tokenizer: Any) -> None:
    reward = only(RewardSpec(kind="exact_match", column="solution"), tokenizer)
    assert score(reward, ["7", "7"], solution=[7, None]) == [1.0, None]


@pytest.mark.parametrize(
    ("completion", "reference", "expected"),
    [
        ("The total is 1,234.5 dollars.", "1234.5", 1.0),
        ("so x = -3", "-3", 1.0),
        ("half of it: 1/2", "0.5", 1.0),
        ("-1/4", "-0.25", 1.0),
        ("5-3=2", "2", 1.0),
        ("about 0.3333333", "1/3", 1.0),
        ("#### 72", "48/2 = 24 clips in May, 48+24 = 72 in all. #### 72", 1.0),
        ("42", "41", 0.0),
        ("3.0001", "3", 0.0),
        ("no number here", "42", 0.0),
        ("42", "no number in the reference", 0.0),
        ("1/0", "1", 0.0),
    ],
)
def test_math_match_plain_parser(completion: str, reference: str, expected: float) -> None:
    assert math_match_score(completion, reference, use_math_verify=False) == expected


@pytest.mark.skipif(not HAS_MATH_VERIFY, reason="math_verify is not installed")
def test_math_match_with_math_verify() -> None:
    assert math_match_score("$\\frac{1}{2}$", "0.5") == 1.0
    assert math_match_score("$\\frac{1}{3}$", "0.5") == 0.0


@pytest.mark.parametrize("shape", SHAPES)
def test_math_match_reward(shape: str, tokenizer: Any) -> None:
    reward = only(RewardSpec(kind="math_match"), tokenizer)
    completions = SHAPES[shape](["The answer is 1200", "It is 1199", "no idea"])
    assert score(reward, completions, answer=["1200"] * 3) == [1.0, 0.0, 0.0]


@pytest.mark.parametrize("shape", SHAPES)
def test_regex_matches_the_whole_stripped_answer(shape: str, tokenizer: Any) -> None:
    digits = only(RewardSpec(kind="regex", pattern=r"\d+"), tokenizer)
    assert score(digits, SHAPES[shape]([" 42 \n", "42 apples", "7"])) == [1.0, 0.0, 1.0]
    thinking = only(RewardSpec(kind="regex", pattern=r"<think>.*</think>\s*\d+"), tokenizer)
    assert score(thinking, SHAPES[shape](["<think>a\nb</think>\n42", "<think>a</think> x"])) == [1.0, 0.0]


def test_a_pattern_that_backtracks_fails_in_bounded_time_naming_the_row(tokenizer: Any) -> None:
    """(a|a)+ takes 2**n steps on n a's and a mismatch: Python's re would hold the caller for minutes."""
    backtracks = only(RewardSpec(kind="regex", pattern="(a|a)+"), tokenizer)
    began = time.monotonic()
    with pytest.raises(RewardError, match=r"regex.*row 7.*took more than 1 s on this answer"):
        score(backtracks, ["aaaa", "a" * 40 + "!"], ts_row=[6, 7])
    assert time.monotonic() - began < 30  # the limit is 1 s; generous for a busy machine, far below 2**40 steps


@pytest.mark.parametrize("shape", SHAPES)
def test_length_counts_tokens_of_the_text(shape: str, tokenizer: Any) -> None:
    texts = ["July 3rd", "a much longer answer than the target length asks for", ""]
    counts = [len(tokenizer(text, add_special_tokens=False).input_ids) for text in texts]
    assert len(set(counts)) == 3
    reward = only(RewardSpec(kind="length", target_tokens=4), tokenizer)
    assert score(reward, SHAPES[shape](texts)) == pytest.approx([-abs(n - 4) / 4 for n in counts])


def test_length_uses_trls_completion_ids(tokenizer: Any) -> None:
    reward = only(RewardSpec(kind="length", target_tokens=4), tokenizer)
    ids = [[5, 6, 7, 8], [5], [5] * 8]
    assert score(reward, ["x", "x", "x"], completion_ids=ids) == [0.0, -0.75, -1.0]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize(
    ("ignore_case", "absent", "expected"),
    [(False, False, [1.0, 0.0, 0.0]), (True, False, [1.0, 1.0, 0.0]), (False, True, [0.0, 1.0, 1.0])],
)
def test_contains(shape: str, ignore_case: bool, absent: bool, expected: list[float], tokenizer: Any) -> None:
    spec = RewardSpec(kind="contains", text="Answer:", ignore_case=ignore_case, absent=absent)
    assert score(only(spec, tokenizer), SHAPES[shape](["Answer: 4", "answer: 4", "4"])) == expected


# --- names and custom functions while training ---


def test_each_reward_has_its_own_name(custom: Callable[..., RewardSpec], tmp_path: Path, tokenizer: Any) -> None:
    source = f"open({str(tmp_path / 'imports.log')!r}, 'a').write('x')\n\n\n"
    source += "def my_fn(prompts, completions, **kwargs):\n    return [1.0] * len(completions)\n"
    mine = custom(source)
    specs = [
        RewardSpec(kind="exact_match"),
        RewardSpec(kind="contains", text="a"),
        RewardSpec(kind="exact_match", column="other"),
        mine,
        mine,
        RewardSpec(kind="exact_match"),
    ]
    names = [reward.__name__ for reward in reward_functions(specs, tokenizer)]
    assert names == ["exact_match", "contains", "exact_match_2", "my_fn", "my_fn_2", "exact_match_3"]
    assert (tmp_path / "imports.log").read_text() == "x"  # one file, imported once


def test_a_custom_function_is_called_as_is(custom: Callable[..., RewardSpec], tokenizer: Any) -> None:
    spec = custom("def my_fn(prompts, completions, answer, **kwargs):\n    return [len(a) for a in answer]\n")
    assert score(only(spec, tokenizer), ["x", "y"], answer=["ab", "abc"], ts_row=[4, 5]) == [2.0, 3.0]


DIVIDES = "def my_fn(prompts, completions, **kwargs):\n    return [1 / (len(text) - 3) for text in completions]\n"


@pytest.mark.parametrize(("columns", "row"), [({"ts_row": [6, 7]}, 7), ({}, 2)])
def test_a_failing_custom_function_names_its_row(
    columns: dict[str, Any], row: int, custom: Callable[..., RewardSpec], tokenizer: Any
) -> None:
    reward = only(custom(DIVIDES), tokenizer)
    with pytest.raises(RewardError) as raised:
        score(reward, ["hello", "bad"], **columns)
    assert str(raised.value) == f"reward my_fn failed on row {row}: ZeroDivisionError: division by zero"


def test_a_function_failing_on_the_batch_only_names_its_rows(custom: Callable[..., RewardSpec], tokenizer: Any) -> None:
    source = (
        "def my_fn(prompts, completions, **kwargs):\n"
        "    if len(completions) > 1:\n        raise ValueError('one at a time')\n    return [1.0]\n"
    )
    with pytest.raises(RewardError) as raised:
        score(only(custom(source), tokenizer), ["a", "b", "c", "d"], ts_row=[3, 3, 5, 5])
    assert str(raised.value) == "reward my_fn failed on rows 3, 5: ValueError: one at a time"


@pytest.mark.parametrize(
    ("returned", "message"),
    [
        ("['high', 1.0]", "reward my_fn returned 'high' for row 8, not a number"),
        ("[1.0, float('inf')]", "reward my_fn returned inf for row 9, not a finite number"),
        ("[1.0]", "reward my_fn returned 1 value for 2 completions: [1.0]"),
        ("0.5", "reward my_fn returned 0.5, not a list of one number per completion"),
    ],
)
def test_a_custom_function_must_return_one_number_per_completion(
    returned: str, message: str, custom: Callable[..., RewardSpec], tokenizer: Any
) -> None:
    reward = only(custom(f"def my_fn(prompts, completions, **kwargs):\n    return {returned}\n"), tokenizer)
    with pytest.raises(RewardError) as raised:
        score(reward, ["a", "b"], ts_row=[8, 9])
    assert str(raised.value) == message


def test_none_and_plain_numbers_pass(custom: Callable[..., RewardSpec], tokenizer: Any) -> None:
    reward = only(custom("def my_fn(prompts, completions, **kwargs):\n    return (True, None, 2)\n"), tokenizer)
    assert score(reward, ["a", "b", "c"]) == [1.0, None, 2.0]


def test_a_reward_file_is_read_as_it_is_now_and_leaves_no_bytecode_beside_it(
    custom: Callable[..., RewardSpec], tmp_path: Path, tokenizer: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", False)  # Python's default (PYTHONDONTWRITEBYTECODE unset)
    spec = custom("def my_fn(prompts, completions, **kwargs):\n    return [1.0] * len(completions)\n")
    assert score(only(spec, tokenizer), ["a"]) == [1.0]
    # Edited in place at the same size and modification time: what a bytecode cache would take for unchanged.
    path, stamp = Path(spec.file or ""), Path(spec.file or "").stat()
    path.write_text(path.read_text(encoding="utf-8").replace("1.0", "2.0"), encoding="utf-8")
    os.utime(path, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    assert score(only(spec, tokenizer), ["a"]) == [2.0]
    assert [found.name for found in tmp_path.iterdir()] == ["my_rewards.py"]


def test_a_missing_file_fails_when_the_functions_are_built(tokenizer: Any, tmp_path: Path) -> None:
    with pytest.raises(RewardError, match="the file .*nope.py does not exist"):
        reward_functions([RewardSpec(kind="custom", file=str(tmp_path / "nope.py"), function="f")], tokenizer)


# --- check_rewards before launch ---


def test_check_passes_the_built_ins(tokenizer: Any) -> None:
    specs = [
        RewardSpec(kind="exact_match"),
        RewardSpec(kind="math_match"),
        RewardSpec(kind="regex", pattern=r"July \d+"),
        RewardSpec(kind="length", target_tokens=8),
        RewardSpec(kind="contains", text="July", absent=True),
    ]
    check_rewards(specs, ROWS, tokenizer, FIELD)


def test_check_calls_a_custom_function_on_two_rows(
    custom: Callable[..., RewardSpec], tmp_path: Path, tokenizer: Any
) -> None:
    seen = tmp_path / "seen.json"
    source = (
        "import json\n\n\n"
        "def my_fn(prompts, completions, trainer_state, **kwargs):\n"
        f"    with open({str(seen)!r}, 'w') as file:\n"
        "        json.dump({'completions': completions, 'step': trainer_state.global_step, **kwargs}, file,"
        " default=repr)\n"
        "    return [1.0 for _ in completions]\n"
    )
    check_rewards([custom(source)], ROWS, tokenizer, FIELD)
    called = json.loads(seen.read_text())
    assert called["completions"] == [
        [{"role": "assistant", "content": "July 1"}],
        [{"role": "assistant", "content": "July 2"}],
    ]
    assert called["answer"] == ["July 1", "July 2"]
    assert called["ts_row"] == [1, 2]
    assert called["step"] == 0
    assert len(called["completion_ids"]) == 2


def test_check_answers_string_prompts_with_strings(
    custom: Callable[..., RewardSpec], tmp_path: Path, tokenizer: Any
) -> None:
    seen = tmp_path / "seen.json"
    source = (
        "import json\n\n\n"
        "def my_fn(prompts, completions, **kwargs):\n"
        f"    open({str(seen)!r}, 'w').write(json.dumps(completions))\n"
        "    return [0.0] * len(completions)\n"
    )
    check_rewards([custom(source)], [{"prompt": "Say hi", "ts_row": 1}], tokenizer, FIELD)
    assert json.loads(seen.read_text()) == ["dry run"]


RETURNS = "def my_fn(prompts, completions, **kwargs):\n    return {}\n"


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("import json\nraise RuntimeError('no API key set')\n", "raised RuntimeError: no API key set"),
        ("def my_fn(:\n", "raised SyntaxError: "),
        ("def other(prompts, completions, **kwargs):\n    return []\n", "defines no function my_fn"),
        ("my_fn = 3\n", "my_fn in .* is a int, not a function"),
        ("def my_fn(prompts, completions):\n    return []\n", r"must accept \*\*kwargs"),
        (
            "def my_fn(prompts, completions, threshold, **kwargs):\n    return []\n",
            "cannot take TRL's arguments .*missing a required argument: 'threshold'",
        ),
        (RETURNS.format("[1.0]"), r"^reward my_fn returned 1 value for 2 completions: \[1.0\]$"),
        (RETURNS.format("[float('nan')] * 2"), "^reward my_fn returned nan for row 1, not a finite number$"),
        (RETURNS.format("['high'] * 2"), "^reward my_fn returned 'high' for row 1, not a number$"),
        (
            RETURNS.format("[1 / 0 for _ in completions]"),
            "^reward my_fn failed on row 1: ZeroDivisionError: division by zero$",
        ),
    ],
)
def test_check_names_what_is_wrong_with_a_custom_function(
    source: str, message: str, custom: Callable[..., RewardSpec], tokenizer: Any
) -> None:
    problems = check_problems([custom(source)], ROWS, tokenizer)
    assert list(problems) == ["grpo.rewards.0"]
    assert re.search(message, problems["grpo.rewards.0"]), problems


def test_check_reports_a_missing_file(tokenizer: Any, tmp_path: Path) -> None:
    spec = RewardSpec(kind="custom", file=str(tmp_path / "nope.py"), function="my_fn")
    problems = check_problems([spec], ROWS, tokenizer)
    assert problems == {"grpo.rewards.0": f"reward my_fn: the file {tmp_path / 'nope.py'} does not exist"}


def test_check_reports_a_missing_column_and_every_reward_at_fault(tokenizer: Any, tmp_path: Path) -> None:
    rows = [{"prompt": "2+2?", "solution": "4", "ts_row": 1}]
    specs = [
        RewardSpec(kind="exact_match"),
        RewardSpec(kind="math_match", column="solution"),
        RewardSpec(kind="custom", file=str(tmp_path / "nope.py"), function="my_fn"),
    ]
    with pytest.raises(ConfigError) as raised:
        check_rewards(specs, rows, tokenizer, FIELD)
    assert raised.value.problems == [
        Problem(
            "grpo.rewards.0", "exact_match needs the column 'answer', which the data lacks (columns: prompt, solution)"
        ),
        Problem("grpo.rewards.2", f"reward my_fn: the file {tmp_path / 'nope.py'} does not exist"),
    ]


# --- rows that lack a column (prompt-only data, a list of datasets): TRL passes None there ---

SOME_WITHOUT = [
    {"prompt": "What is 2+2?", "solution": "4", "ts_row": 1},
    {"prompt": "What is 3+3?", "solution": "6", "ts_row": 2},
    {"prompt": "Say hi", "solution": None, "ts_row": 7},
]


def test_math_match_without_a_reference_does_not_apply(tokenizer: Any) -> None:
    reward = only(RewardSpec(kind="math_match", column="solution"), tokenizer)
    assert score(reward, ["4", "4"], solution=["4", None]) == [1.0, None]


def test_a_row_no_reward_can_score_is_refused_by_its_number(tokenizer: Any) -> None:
    only_reference = [RewardSpec(kind="exact_match", column="solution")]
    assert check_problems(only_reference, SOME_WITHOUT, tokenizer) == {
        "grpo.rewards.0": "exact_match needs the column 'solution', which row 7 lacks, and no other reward scores "
        "that row: it would train nothing; give every row a 'solution', or add a reward that reads no column "
        "(regex, length, contains or custom)"
    }
    two_references = [*only_reference, RewardSpec(kind="math_match", column="solution")]
    assert (
        "which row 7 lacks, as it lacks every other reward's column"
        in check_problems(two_references, SOME_WITHOUT, tokenizer)["grpo.rewards.0"]
    )
    # Another reward scores that row: the reference reward does not apply there (None), as TRL allows.
    check_rewards([*only_reference, RewardSpec(kind="length", target_tokens=4)], SOME_WITHOUT, tokenizer, FIELD)


def test_a_column_empty_in_every_row_is_said_so(tokenizer: Any) -> None:
    rows = [{**row, "solution": None} for row in SOME_WITHOUT]
    assert check_problems([RewardSpec(kind="exact_match", column="solution")], rows, tokenizer) == {
        "grpo.rewards.0": "exact_match needs the column 'solution', which is empty (None) in every row"
    }


def test_a_custom_reward_is_called_on_the_first_row_that_lacks_a_column(
    custom: Callable[..., RewardSpec], tmp_path: Path, tokenizer: Any
) -> None:
    seen = tmp_path / "seen.jsonl"
    source = (
        "import json\n\n\n"
        "def my_fn(prompts, completions, solution, **kwargs):\n"
        f"    open({str(seen)!r}, 'a').write(json.dumps(solution) + '\\n')\n"
        "    return [float(len(completion) == len(str(s))) for completion, s in zip(completions, solution)]\n"
    )
    check_rewards([custom(source)], SOME_WITHOUT, tokenizer, FIELD)
    assert [json.loads(line) for line in seen.read_text().splitlines()] == [["4", "6"], [None]]
    fails = source.replace("len(str(s))", "int(s)")
    problems = check_problems([custom(fails, name="fails.py")], SOME_WITHOUT, tokenizer)
    assert re.fullmatch(
        r"reward my_fn failed on row 7: TypeError: int\(\) argument must be .*, not 'NoneType' \(row 7 has no "
        r"'solution': TRL passes None where a row lacks a column; return None, not applicable, or a score for it\)",
        problems["grpo.rewards.0"],
    ), problems
