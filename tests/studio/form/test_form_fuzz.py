"""Property-based fuzzing of the Train tab's handlers with whatever a browser (or a script) could send.

Every handler ends in a config or in problems placed on form fields: never an exception, never a process.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any
from unittest import mock

from hypothesis import event, example, given
from hypothesis import strategies as st

from engine.config import ConfigError, RunConfig
from engine.data.template_guard import CHILD_SCRIPT as TEMPLATE_CHILD
from engine.store.limits import BOOTSTRAP as LIMITED_CHILD
from studio.demo.caller import Caller
from studio.form.schema import FieldSpec, leaf_specs
from studio.form.values import default_values, values_to_config
from studio.train import actions, starting
from studio.train import dataset as dp
from tests.helpers.fuzz_strategies import SPECIAL_TEXT, fuzz, odd_values

SPECS = leaf_specs()
SMALL_DATASET = "assets/datasets/demo_sft_eval.jsonl"  # valid and a tenth the size of the training set
PATHS = {spec.path for spec in SPECS}


def widget_value(spec: FieldSpec) -> st.SearchStrategy[Any]:
    """What the spec's widget could hold, and what a hand-made request could put there instead."""
    if spec.kind in ("int", "float"):
        low = spec.minimum if spec.minimum is not None else -1e6
        high = spec.maximum if spec.maximum is not None else 1e6
        typed = st.integers(int(low), int(high)) if spec.kind == "int" else st.floats(low, high)
        usual = st.one_of(typed, typed.map(str)) if spec.text_number else typed
    elif spec.kind == "choice":
        usual = st.sampled_from(spec.choices)
    elif spec.kind == "bool":
        usual = st.booleans()
    else:
        usual = st.one_of(st.just(spec.default if isinstance(spec.default, str) else ""), st.text(max_size=20))
    return st.one_of(usual, st.sampled_from(SPECIAL_TEXT), odd_values)


@st.composite
def form_values(draw: st.DrawFn) -> dict[str, Any]:
    """The default form with some fields changed (few or many), and now and then an unknown path."""
    values = {**default_values(), "data.path": SMALL_DATASET}
    changed = draw(st.lists(st.sampled_from(SPECS), max_size=draw(st.sampled_from([1, 3, 12]))))
    for spec in changed:
        values[spec.path] = draw(widget_value(spec))
    if draw(st.integers(0, 9)) == 0:
        values[draw(st.text(max_size=8))] = draw(odd_values)
    return values


def changed(changes: dict[str, Any]) -> dict[str, Any]:
    """The default form with ``changes`` (path -> widget value)."""
    return {**default_values(), **changes}


# Inputs that once raised something other than a ConfigError, kept as fixed examples.
DEEP_JSON = changed({"data.placeholders": '{"a": ' + "[" * 100_000})
TEXT_CHECKBOX = changed({"model.trust_remote_code": "maybe", "train.packing": "false"})


def placed(field: str) -> bool:
    """Whether a problem's field is one the form shows (a widget, or an item of a list widget)."""
    return field in PATHS or any(field.startswith(path + ".") for path in PATHS)


# The children that check untrusted input under caps (a chat template, a regex, a Parquet file): a form's values
# may reach them by design; they run nothing of the form's and start no run.
GUARD_CHILDREN = (TEMPLATE_CHILD.name, LIMITED_CHILD.name)
REAL_POPEN = subprocess.Popen


def _guard_child_only(*args: Any, **kwargs: Any) -> Any:
    command = args[0] if args else kwargs.get("args", [])
    if any(str(part).endswith(GUARD_CHILDREN) for part in command):
        return REAL_POPEN(*args, **kwargs)
    raise AssertionError(f"a process was started: {command}")


def no_process() -> Any:
    """Fail the test if anything starts a process other than a guard's checking child."""
    return mock.patch.object(subprocess, "Popen", side_effect=_guard_child_only)


@fuzz(250)
@given(form_values())
@example(DEEP_JSON)
@example(TEXT_CHECKBOX)
def test_values_to_config_gives_a_config_or_field_problems(values: dict[str, Any]) -> None:
    try:
        config = values_to_config(values)
    except ConfigError as exc:
        assert exc.problems and all(placed(problem.field) for problem in exc.problems), exc.problems
    else:
        assert isinstance(config, RunConfig)


@fuzz(100)
@given(form_values())
@example(DEEP_JSON)
def test_preview_and_dataset_check_never_raise(values: dict[str, Any]) -> None:
    workspace = Path(tempfile.gettempdir())  # never written by these handlers
    with no_process():
        result = actions.preview(Caller(workspace), values)
        check = dp.check_dataset(values, with_tokens=False, workspace=workspace)
    assert all(placed(field) for field in result.errors), result.errors
    assert (result.config is None) == bool(result.errors)
    assert (result.command == "") == bool(result.errors)
    assert "Traceback" not in check.error and bool(check.error) != bool(check.summary)


@fuzz(60)
@given(form_values())
@example(DEEP_JSON)
@example(changed({"data.chat_template": False}))  # a template the guard's child checks, as Start's data check does
def test_start_starts_one_run_or_nothing(values: dict[str, Any]) -> None:
    workspace = Path(tempfile.mkdtemp(prefix="form-fuzz-"))
    calls: list[Path] = []
    try:
        with no_process():
            result = starting.start_run(Caller(workspace), values, calls.append)
        runs_dir = workspace / "runs"
        event("started" if result.run_dir else "refused")
        if result.run_dir is None:
            assert calls == [] and not runs_dir.exists()
            assert all(placed(field) for field in result.errors), result.errors
            assert result.message.startswith(("✗", "⧖"))
        else:
            assert calls == [result.run_dir] and result.run_dir.parent == runs_dir.resolve()
            assert (result.run_dir / "config.yaml").is_file()
    finally:
        shutil.rmtree(workspace)
