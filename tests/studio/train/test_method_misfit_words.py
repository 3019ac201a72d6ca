"""The refusal of data that the chosen method does not train on, in the page's language: its sentence, the data's
kind and the advice, each said again from the engine's own templates (engine.training.method_data), with the file,
the methods and the formats kept as the engine named them. The data are the real bundled sets."""

from __future__ import annotations

import pytest

from engine.api import ConfigError, RunConfig, inspect_run_data, parse_config
from engine.store.paths import PROJECT_ROOT
from studio.form.values import config_to_values
from studio.i18n.catalog import text
from studio.train import dataset as dp

DPO_SET = PROJECT_ROOT / "assets" / "datasets" / "demo_dpo_train.jsonl"


def refusal(config: RunConfig) -> str:
    with pytest.raises(ConfigError) as caught:
        inspect_run_data(config)
    [problem] = caught.value.problems
    return problem.message


@pytest.mark.parametrize("lang", ["zh-CN", "ja", "ko"])
def test_preference_data_under_sft_is_refused_in_the_pages_language(lang: str) -> None:
    config = parse_config({"method": "sft", "data": {"path": str(DPO_SET)}})
    english = refusal(config)
    assert english.startswith(f"{DPO_SET} is preference data") and "set method to dpo" in english

    check = dp.check_dataset(config_to_values(config), lang=lang)

    said = text(
        "misfit.message",
        lang,
        source=str(DPO_SET),
        what=text("misfit.format.preference", lang),
        method="sft",
        formats=english.split("sft trains on ")[1].split(" data;")[0],
        advice=text("misfit.advice.set_method", lang, methods=english.split("set method to ")[1]),
    )
    assert said in check.error, check.error
    assert "preference data" not in check.error and "set method to" not in check.error


def test_in_english_the_refusal_reads_as_the_engine_wrote_it() -> None:
    config = parse_config({"method": "sft", "data": {"path": str(DPO_SET)}})
    check = dp.check_dataset(config_to_values(config))
    assert refusal(config) in check.error
