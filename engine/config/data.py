"""The data section of a RunConfig: which file(s) or hub dataset a run reads, in which format, and which columns
hold what."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, SerializationInfo, Tag, field_serializer, field_validator, model_validator

from engine.config.schema import MAX_COUNT, Section, advanced
from engine.config.schema.secrets import refuse_secrets

# The longest chat template a config may give (the longest in common use, with tool instructions, is ~20 kB).
MAX_TEMPLATE_CHARS = 65536
# What a dataset of a list is told when it names no path, by name: English, the one definition of each message (the
# studio says it again in the visitor's language: studio.i18n.problems, keys ``check.<name>``). The braces are the
# YAML to write, not placeholders.
DATA_MESSAGES = {
    "dataset_path_empty": "must not be empty: give a file or hub id",
    "dataset_without_path": "needs a path: {path: FILE, weight: ..., max_samples: ...}",
}


class ColumnMap(Section):
    """Which dataset columns hold what; empty fields mean the usual name for the format."""

    instruction: str | None = Field(None, description="alpaca: the instruction column (default instruction).")
    input: str | None = Field(None, description="alpaca: the optional input column (default input).")
    output: str | None = Field(None, description="alpaca: the answer column (default output).")
    system: str | None = Field(None, description="Optional system prompt column (default system).")
    messages: str | None = Field(None, description="conversational: the list of turns (messages/conversations).")
    prompt: str | None = Field(None, description="prompt-completion, prompt-only and preference: the prompt column.")
    completion: str | None = Field(None, description="prompt-completion and kto: the completion column.")
    text: str | None = Field(None, description="text: the plain-text column (default text).")
    chosen: str | None = Field(None, description="preference: the preferred answer column.")
    rejected: str | None = Field(None, description="preference: the rejected answer column.")
    label: str | None = Field(
        None, description="kto: the column that marks an answer desirable (true) or not (default label, or kto_tag)."
    )
    images: str | None = Field(
        None, description="vision: the column of each row's image paths (default images, or image for one)."
    )


# The two formats of answers judged against each other: a chosen and a rejected answer per prompt, or single answers
# labelled desirable or not (TRL's unpaired preference format, named after KTO, which trains on it).
PREFERENCE_FORMAT, UNPAIRED_FORMAT = "preference", "kto"
DatasetFormat = Literal[
    "auto", "alpaca", "conversational", "prompt_completion", "prompt", "text", "preference", "kto", "tools", "vision"
]
# Datasets one run may list in data.path: each is read whole into memory (engine.data.loading).
MAX_DATASETS = 64
# The largest weight of a dataset: rows are repeated in memory, so a big file times a big weight stays bounded.
MAX_WEIGHT = 100


class DatasetEntry(Section):
    """One of several datasets a run trains on (an item of data.path). Empty format, columns and split take the
    section's own (data.format, data.columns, data.split)."""

    path: str = Field(
        ..., min_length=1, description="Local JSON / JSONL / CSV / Parquet / TXT file, or a hub dataset id."
    )
    format: DatasetFormat | None = Field(
        None, description="Format of this dataset (auto detects it from the columns); empty: data.format."
    )
    columns: ColumnMap | None = Field(
        None, description="Column mapping of this dataset when its names differ; empty: data.columns."
    )
    split: str | None = Field(None, min_length=1, description="Split to read from a hub dataset; empty: data.split.")
    weight: float = Field(
        1.0,
        gt=0,
        le=MAX_WEIGHT,
        description=(
            "How much of it trains: 2 uses each row twice, 0.5 half of its rows (drawn with train.seed), "
            "applied after max_samples."
        ),
    )
    max_samples: int | None = Field(
        None, ge=1, le=MAX_COUNT, description="Use at most its first N rows, before the weight (empty: all)."
    )

    @model_validator(mode="before")
    @classmethod
    def _path_alone(cls, value: Any) -> Any:
        """``- file.jsonl`` in a YAML list is ``{path: file.jsonl}``; a mapping must name its path. Both are said
        at the item (data.path.N), where the user wrote it."""
        if isinstance(value, str):
            if not value.strip():
                raise ValueError(DATA_MESSAGES["dataset_path_empty"])
            refuse_secrets(value)
            return {"path": value}
        if isinstance(value, dict) and "path" not in value:
            raise ValueError(DATA_MESSAGES["dataset_without_path"])
        return value

    def resolved(self, data: DataSection) -> DatasetEntry:
        """This entry with the section's format, columns and split where it has none of its own."""
        return self.model_copy(
            update={
                "format": self.format or data.format,
                "columns": self.columns if self.columns is not None else data.columns,
                "split": self.split or data.split,
            }
        )


def _path_kind(value: Any) -> str:
    """Which member of data.path a value is meant as: a list of datasets, or one path (the errors say so)."""
    return "list" if isinstance(value, (list, tuple)) else "path"


# One path or hub id, or a list of datasets; the discriminator reports the errors of the member meant only.
DataPath = Annotated[
    Annotated[str, Field(min_length=1), Tag("path")]
    | Annotated[list[DatasetEntry], Field(min_length=1, max_length=MAX_DATASETS), Tag("list")],
    Discriminator(_path_kind),
]


class DataSection(Section):
    """Where the training data comes from and how it is shaped."""

    path: DataPath = Field(
        "assets/datasets/demo_sft_train.jsonl",
        description=(
            "Local JSON / JSONL / CSV / Parquet / TXT file, or a hub dataset id; or a list of datasets trained "
            "together, each {path, format, columns, split, weight, max_samples}, their rows concatenated in order."
        ),
    )
    format: DatasetFormat = Field(
        "auto",
        description=(
            "Dataset format; auto detects it from the columns (prompt: prompts alone, for grpo). Also that of each "
            "listed dataset without one."
        ),
    )
    columns: ColumnMap = Field(
        default_factory=ColumnMap,
        description="Column mapping when the names differ from the usual ones (also for listed datasets without one).",
    )
    split: str = Field(
        "train",
        min_length=1,
        description="Split to read from a hub dataset; a slice reads only its first rows (train[:5000]).",
        json_schema_extra=advanced(),
    )
    eval_path: str | None = Field(None, description="Separate evaluation file (or hub id); overrides eval_size.")
    eval_size: float = Field(
        0.0,
        ge=0,
        le=MAX_COUNT,
        description="Held-out evaluation rows taken from the training data: a fraction if < 1, a count if >= 1.",
    )
    max_samples: int | None = Field(
        None, ge=1, le=MAX_COUNT, description="Use at most this many training rows (empty: all)."
    )
    chat_template: str | None = Field(
        None,
        max_length=MAX_TEMPLATE_CHARS,
        description="Jinja chat template that overrides the tokenizer's (empty: the tokenizer's own).",
        json_schema_extra=advanced(),
    )
    completion_only_loss: bool = Field(True, description="Compute the loss on the answers only, not on the prompts.")
    placeholders: dict[str, str] = Field(
        default_factory=dict,
        description="Values for {{name}} placeholders in the data (e.g. name, author in identity sets).",
        json_schema_extra=advanced(),
    )

    @field_validator("path", mode="before")
    @classmethod
    def _one_mapping_is_a_list(cls, value: Any) -> Any:
        """``path: {path: file, weight: 2}`` (one dataset written without the list's dash) is a list of one."""
        return [value] if isinstance(value, dict) else value

    def entries(self) -> list[DatasetEntry]:
        """The training datasets with their format, columns and split filled in: one for a plain path."""
        if isinstance(self.path, list):
            return [entry.resolved(self) for entry in self.path]
        return [DatasetEntry(path=self.path, format=self.format, columns=self.columns, split=self.split)]

    def paths(self) -> list[str]:
        """The training data's paths (or hub ids), in order."""
        return [self.path] if isinstance(self.path, str) else [entry.path for entry in self.path]

    @field_serializer("path")
    def _entries_as_written(self, path: str | list[DatasetEntry], info: SerializationInfo) -> Any:
        """A list of datasets as the user writes it: only what differs from the defaults ({path, weight: 2})."""
        if isinstance(path, str):
            return path
        return [entry.model_dump(mode=info.mode, exclude_defaults=True) for entry in path]
