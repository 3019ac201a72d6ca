"""Property-based fuzzing of RunConfig: any mapping is either a valid config or a ConfigError naming fields.

Also through the CLI (a few examples, each a process): ``check`` exits 0 or 2 and never prints a traceback.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import assume, event, given
from hypothesis import strategies as st

from engine.config import ConfigError, RunConfig, load_config, parse_config
from tests.helpers.engine_cli import run_check
from tests.helpers.fuzz_strategies import config_data, fuzz, names_a_field


def outcome(data: Any) -> RunConfig | ConfigError:
    """parse_config's result or its ConfigError; any other exception fails the test."""
    try:
        return parse_config(data)
    except ConfigError as exc:
        return exc


def assert_names_fields(error: ConfigError, data: Any) -> None:
    assert error.problems, "a ConfigError without problems"
    for problem in error.problems:
        assert names_a_field(problem.field, data), f"{problem.field!r} is not a field of the input: {problem}"
        assert problem.message and "Traceback" not in problem.message


@fuzz(300)
@given(config_data)
def test_any_mapping_is_a_config_or_names_its_bad_fields(data: dict[str, Any]) -> None:
    result = outcome(data)
    event("valid" if isinstance(result, RunConfig) else "ConfigError")
    if isinstance(result, ConfigError):
        assert_names_fields(result, data)
    else:
        # A valid config survives its own YAML exactly: what the run directory holds is what was checked.
        assert parse_config(yaml.safe_load(result.to_yaml())) == result


@fuzz(100)
@given(st.text(max_size=200) | st.sampled_from(["[" * 3000, "a: &x [*x]", "train: {max_steps: 1e999}", "{1: 2}"]))
def test_any_yaml_text_loads_or_explains(tmp_path_factory: pytest.TempPathFactory, text: str) -> None:
    path = tmp_path_factory.getbasetemp() / "fuzz.yaml"
    try:
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        load_config(path)
    except ConfigError as exc:
        assert exc.problems and all(problem.message for problem in exc.problems)


CASES = [
    ({"data": {"eval_size": float("inf")}}, "data.eval_size: must be a finite number"),
    ({"train": {"warmup": float("inf")}}, "train.warmup: must be a finite number"),
    ({"train": {"learning_rate": float("nan")}}, "train.learning_rate: must be a finite number"),
    ({"train": {"max_steps": 10**40}}, "train.max_steps: must be <= 2147483647"),
    ({"train": {"strategy": 1}}, "train.strategy: unknown key (did you mean save_strategy?)"),
    ({"data": {"placeholders": {1: "x"}}}, "data.placeholders.1: the key must be text"),
    ({"data": {"placeholders": {"[key]": 5}}}, "data.placeholders.[key]: must be text"),
    ({"": 1, "a.b": 2}, '"": unknown key'),
    ({"a.b": 2}, '"a.b": unknown key'),
    ({"name": "\ud800"}, "name: must be valid Unicode text"),
    ({"model": {"revision": "hf_" + "x" * 34}}, "model.revision: looks like a Hugging Face access token"),
    # One dataset as a mapping (no list dash): its problems are where it was written, not at a data.path.0.
    ({"data": {"path": {}}}, "data.path: needs a path"),
    ({"data": {"path": {"path": "a.jsonl", "weight": -1}}}, "data.path.weight: must be > 0"),
]


@pytest.mark.parametrize(("data", "message"), CASES, ids=[message.split(":")[0] for _, message in CASES])
def test_odd_values_name_their_field(data: dict[str, Any], message: str) -> None:
    result = outcome(data)
    assert isinstance(result, ConfigError)
    assert any(line.startswith(message) for line in str(result).splitlines()), str(result)


# --- the CLI ------------------------------------------------------------------------------------------------------


@pytest.mark.integration
@fuzz(6)
@given(config_data)
def test_cli_check_exits_2_naming_the_field(tmp_path_factory: pytest.TempPathFactory, data: dict[str, Any]) -> None:
    result = outcome(data)
    # Valid configs run the full check (seconds each); the good path has its own tests.
    assume(isinstance(result, ConfigError))
    folder = Path(tmp_path_factory.mktemp("cli-fuzz"))
    config = folder / "config.yaml"
    config.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8", errors="surrogatepass")
    process = run_check(config, folder)
    assert process.returncode == 2, process.stdout + process.stderr
    assert "Traceback" not in process.stderr and process.stderr.startswith("error: ")
    assert sorted(path.name for path in folder.iterdir()) == ["config.yaml"]
