"""data.path as one path or a list of datasets: the YAML a user writes, the YAML a config saves, the errors."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from engine.config import ConfigError, DatasetEntry, RunConfig, load_config, parse_config, save_config
from engine.config.data import MAX_DATASETS, MAX_WEIGHT, ColumnMap

BRIEF_YAML = """
data:
  path:
    - {path: ../shared/datasets/alpaca_en_demo.json, max_samples: 200}
    - {path: assets/datasets/demo_sft_train.jsonl, weight: 2}
"""


def problems_of(data: dict) -> dict[str, str]:
    with pytest.raises(ConfigError) as caught:
        parse_config(data)
    return caught.value.by_field()


def test_a_list_reads_as_written(tmp_path: Path) -> None:
    path = tmp_path / "list.yaml"
    path.write_text(BRIEF_YAML, encoding="utf-8")
    data = load_config(path).data
    assert data.path == [
        DatasetEntry(path="../shared/datasets/alpaca_en_demo.json", max_samples=200),
        DatasetEntry(path="assets/datasets/demo_sft_train.jsonl", weight=2),
    ]
    assert isinstance(data.path, list) and data.paths() == [
        "../shared/datasets/alpaca_en_demo.json",
        "assets/datasets/demo_sft_train.jsonl",
    ]


def test_the_saved_yaml_writes_only_what_each_dataset_sets_and_reads_back_the_same(tmp_path: Path) -> None:
    config = parse_config(yaml.safe_load(BRIEF_YAML))
    saved = yaml.safe_load(config.to_yaml())
    assert saved["data"]["path"] == [
        {"path": "../shared/datasets/alpaca_en_demo.json", "max_samples": 200},
        {"path": "assets/datasets/demo_sft_train.jsonl", "weight": 2.0},
    ]
    save_config(config, tmp_path / "config.yaml")
    assert load_config(tmp_path / "config.yaml") == config


def test_a_busy_list_round_trips() -> None:
    config = parse_config(
        {
            "data": {
                "path": [
                    {"path": "a.csv", "format": "alpaca", "columns": {"instruction": "q", "output": "a"}},
                    {"path": "org/set", "split": "test", "weight": 0.25, "max_samples": 7},
                    {"path": "b.jsonl", "columns": {}},
                ],
                "format": "conversational",
                "eval_size": 3,
            }
        }
    )
    assert parse_config(yaml.safe_load(config.to_yaml())) == config
    assert parse_config(config.model_dump()) == config


def test_entries_take_the_sections_format_columns_and_split_where_they_set_none() -> None:
    data = parse_config(
        {
            "data": {
                "path": [{"path": "a.jsonl"}, {"path": "b.jsonl", "format": "auto", "split": "dev", "columns": {}}],
                "format": "alpaca",
                "columns": {"output": "answer"},
                "split": "validation",
            }
        }
    ).data
    first, second = data.entries()
    assert (first.format, first.columns, first.split) == ("alpaca", ColumnMap(output="answer"), "validation")
    assert (second.format, second.columns, second.split) == ("auto", ColumnMap(), "dev")


def test_shorthands_a_bare_path_in_the_list_and_one_mapping() -> None:
    assert parse_config({"data": {"path": ["a.jsonl", "b.jsonl"]}}).data.path == [
        DatasetEntry(path="a.jsonl"),
        DatasetEntry(path="b.jsonl"),
    ]
    assert parse_config({"data": {"path": {"path": "a.jsonl", "weight": 3}}}).data.path == [
        DatasetEntry(path="a.jsonl", weight=3)
    ]


def test_a_plain_string_is_unchanged() -> None:
    config = parse_config({"data": {"path": "assets/datasets/demo_sft_train.jsonl"}})
    assert config.data.path == "assets/datasets/demo_sft_train.jsonl"
    assert yaml.safe_load(config.to_yaml())["data"]["path"] == "assets/datasets/demo_sft_train.jsonl"
    assert RunConfig().data.path == "assets/datasets/demo_sft_train.jsonl"
    (entry,) = config.data.entries()
    assert (entry.path, entry.format, entry.weight, entry.max_samples) == (config.data.path, "auto", 1.0, None)


@pytest.mark.parametrize(
    ("path", "field", "fragment"),
    [
        ([], "data.path", "must list at least 1"),
        ("", "data.path", "must not be empty"),
        (3, "data.path", "must be text"),
        ([{"path": "a", "weight": 0}], "data.path.0.weight", "must be > 0"),
        ([{"path": "a", "weight": MAX_WEIGHT + 1}], "data.path.0.weight", f"must be <= {MAX_WEIGHT}"),
        ([{"path": "a", "weight": float("nan")}], "data.path.0.weight", "finite number"),
        ([{"path": "a"}, {"path": "b", "max_samples": 0}], "data.path.1.max_samples", "must be >= 1"),
        ([{"path": "a", "format": "csv"}], "data.path.0.format", "must be one of"),
        ([{"path": "a", "split": ""}], "data.path.0.split", "must not be empty"),
        ([{"path": ""}], "data.path.0.path", "must not be empty"),
        ([{"weight": 2}], "data.path.0", "needs a path"),
        ([" "], "data.path.0", "must not be empty"),
        ([7], "data.path.0", "must be a section"),
        ([{"path": "a", "wieght": 2}], "data.path.0.wieght", "did you mean weight?"),
        ([{"path": "a", "columns": {"ouput": "x"}}], "data.path.0.columns.ouput", "did you mean output?"),
        ([{"path": "a"}] * (MAX_DATASETS + 1), "data.path", f"must list at most {MAX_DATASETS}"),
        (["hf_" + "A1b2" * 9], "data.path.0", "access token"),
    ],
)
def test_bad_lists_name_the_dataset_and_field(path: object, field: str, fragment: str) -> None:
    problems = problems_of({"data": {"path": path}})
    assert list(problems) == [field], problems
    assert fragment in problems[field]


def test_every_entry_field_has_a_description_and_numbers_have_bounds() -> None:
    for name, info in DatasetEntry.model_fields.items():
        assert info.description, name
    assert {type(item).__name__ for item in DatasetEntry.model_fields["weight"].metadata} >= {"Gt", "Le"}
    assert {type(item).__name__ for item in DatasetEntry.model_fields["max_samples"].metadata} >= {"Ge", "Le"}
