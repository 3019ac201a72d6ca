"""Every dataset type TRL's docs list ("Which dataset type to use?"), in its standard and its conversational form,
is taken by each of our methods whose TRL trainer takes it; TRL's implicit-prompt preference rows are split as
TRL's own ``extract_prompt`` splits them, and train."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from engine.config import parse_config
from engine.data.preference import normalise_preference, split_shared_opening
from engine.training.check import check_run
from tests.helpers.engine_cli import run_train


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict[str, str]:
    return {"role": "assistant", "content": text}


def rows_of(shape: str) -> list[dict[str, Any]]:
    """Eight rows of one of TRL's documented shapes, as its docs write them."""
    made = {
        "language_modeling": lambda i: {"text": f"The sky is blue, day {i}."},
        "language_modeling_conversational": lambda i: {"messages": [user(f"Sky {i}?"), assistant("It is blue.")]},
        "prompt_only": lambda i: {"prompt": f"The sky on day {i} is"},
        "prompt_only_conversational": lambda i: {"prompt": [user(f"What color is the sky on day {i}?")]},
        "prompt_completion": lambda i: {"prompt": f"The sky on day {i} is", "completion": " blue."},
        "prompt_completion_conversational": lambda i: {
            "prompt": [user(f"Sky on day {i}?")],
            "completion": [assistant("It is blue.")],
        },
        "preference_explicit": lambda i: {"prompt": f"The sky {i} is", "chosen": " blue.", "rejected": " green."},
        "preference_explicit_conversational": lambda i: {
            "prompt": [user(f"Sky {i}?")],
            "chosen": [assistant("It is blue.")],
            "rejected": [assistant("It is green.")],
        },
        "preference_implicit": lambda i: {"chosen": f"The sky {i} is blue.", "rejected": f"The sky {i} is green."},
        "preference_implicit_conversational": lambda i: {
            "chosen": [user(f"Sky {i}?"), assistant("It is blue.")],
            "rejected": [user(f"Sky {i}?"), assistant("It is green.")],
        },
        "unpaired_preference": lambda i: {
            "prompt": f"The sky {i} is",
            "completion": " blue." if i % 2 else " green.",
            "label": bool(i % 2),
        },
        "unpaired_preference_conversational": lambda i: {
            "prompt": [user(f"Sky {i}?")],
            "completion": [assistant("It is blue." if i % 2 else "It is green.")],
            "label": bool(i % 2),
        },
    }[shape]
    return [made(i) for i in range(8)]


PREFERENCE = [f"preference_{kind}{form}" for kind in ("explicit", "implicit") for form in ("", "_conversational")]
# TRL's table of which trainer takes which dataset type.
TAKES: dict[str, list[str]] = {
    "sft": [f"{kind}{form}" for kind in ("language_modeling", "prompt_completion") for form in ("", "_conversational")],
    "dpo": PREFERENCE,
    "orpo": PREFERENCE,
    "rm": PREFERENCE,
    "kto": ["unpaired_preference", "unpaired_preference_conversational", *PREFERENCE[:2]],
    "grpo": ["prompt_only", "prompt_only_conversational"],
    "rloo": ["prompt_only", "prompt_only_conversational"],
}
PAIRS = [(method, shape) for method, shapes in TAKES.items() for shape in shapes]


def config_for(method: str, path: Path) -> dict[str, Any]:
    raw: dict[str, Any] = {"method": method, "data": {"path": str(path)}, "train": {"max_steps": 2}}
    if method in ("grpo", "rloo"):
        raw[method] = {"rewards": [{"kind": "length", "target_tokens": 5}]}
    return raw


@pytest.mark.parametrize(("method", "shape"), PAIRS, ids=[f"{m}-{s}" for m, s in PAIRS])
def test_each_trainer_takes_each_shape_trl_documents_for_it(method: str, shape: str, tmp_path: Path) -> None:
    path = tmp_path / f"{shape}.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows_of(shape)), encoding="utf-8")
    report = check_run(parse_config(config_for(method, path)))
    assert report.data.num_rows == 8


@pytest.mark.parametrize(
    ("chosen", "rejected"),
    [
        ("The sky is blue.", "The sky is green."),
        ("Answer: yes", "Answer: no"),
        ("abc", "abcdef"),
        ("Paris", "Lyon"),
        ("Q: 2+2? A: 4", "Q: 2+2? A: 5 or so"),
    ],
)
def test_an_implicit_prompt_is_split_as_trls_extract_prompt_splits_it(chosen: str, rejected: str) -> None:
    from trl.data_utils import extract_prompt

    expected = extract_prompt({"chosen": chosen, "rejected": rejected})
    assert split_shared_opening(chosen, rejected) == (expected["prompt"], expected["chosen"], expected["rejected"])


def test_an_implicit_text_row_becomes_a_user_turn_and_two_answers() -> None:
    row = normalise_preference(
        {"chosen": "The sky is blue.", "rejected": "The sky is green."}, parse_config({}).data.columns
    )
    assert row == {
        "prompt": [user("The sky is")],
        "chosen": [assistant(" blue.")],
        "rejected": [assistant(" green.")],
    }


@pytest.mark.integration
def test_dpo_trains_on_implicit_prompt_texts(tmp_path: Path) -> None:
    path = tmp_path / "implicit.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows_of("preference_implicit")), encoding="utf-8")
    raw = config_for("dpo", path)
    raw["train"] |= {"per_device_batch_size": 2, "logging_steps": 1, "eval_strategy": "no", "save_strategy": "no"}
    config = tmp_path / "dpo.yaml"
    config.write_text(yaml.safe_dump(raw))
    done = run_train(config, tmp_path / "run")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    metrics = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert any("rewards/margins" in line or "train/rewards/margins" in line for line in map(str, metrics))
