"""trust_remote_code is off unless the user turns it on, and every loader passes on exactly what was set."""

from __future__ import annotations

from typing import Any

import pytest

from engine.config import ConfigError, RunConfig, parse_config
from engine.training.hardware import CPU_ONLY
from studio.form.values import default_values, values_to_config
from studio.train.actions import starting_values


class Loaded(Exception):
    """Raised by the stand-in loaders once they have recorded their arguments."""


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Replace the transformers loaders with ones that record their keyword arguments and stop."""
    import transformers

    calls: list[dict[str, Any]] = []

    def record(*args: Any, **kwargs: Any) -> Any:
        calls.append(kwargs)
        raise Loaded

    for loader in (transformers.AutoTokenizer, transformers.AutoModelForCausalLM, transformers.AutoConfig):
        monkeypatch.setattr(loader, "from_pretrained", record)
    return calls


def test_off_by_default_everywhere_a_config_comes_from() -> None:
    assert RunConfig().model.trust_remote_code is False
    assert parse_config({"model": {"name_or_path": "org/model"}}).model.trust_remote_code is False
    assert default_values()["model.trust_remote_code"] is False
    assert starting_values()["model.trust_remote_code"] is False  # the demo preset the Train tab opens on
    assert "trust_remote_code: false" in RunConfig().to_yaml()


@pytest.mark.parametrize(
    ("sent", "expected"), [(False, False), (True, True), ("false", False), ("0", False), ("", False), ("true", True)]
)
def test_the_checkbox_reads_text_as_a_person_means_it(sent: Any, expected: bool) -> None:
    values = {**default_values(), "model.trust_remote_code": sent}
    assert values_to_config(values).model.trust_remote_code is expected


def test_a_checkbox_value_that_is_neither_is_refused() -> None:
    with pytest.raises(ConfigError) as caught:
        values_to_config({**default_values(), "model.trust_remote_code": "maybe"})
    assert caught.value.by_field() == {"model.trust_remote_code": "must be true or false"}


@pytest.mark.parametrize("trust", [False, True])
def test_loaders_pass_the_setting_through(recorded: list[dict[str, Any]], trust: bool) -> None:
    from engine.training.check import meta_parameter_count
    from engine.training.modeling import load_model, load_tokenizer

    config = parse_config({"model": {"trust_remote_code": trust}})
    for load in (lambda: load_tokenizer(config), lambda: load_model(config, CPU_ONLY)):
        with pytest.raises(Loaded):
            load()
    with pytest.raises(Loaded):
        meta_parameter_count(config, CPU_ONLY)
    assert [call["trust_remote_code"] for call in recorded] == [trust, trust, trust]
