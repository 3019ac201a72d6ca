"""RunConfig, composed from the shared sections and each training method's own, and how it is read from and written
to YAML. Reached as ``engine.config`` (see its __init__.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, ValidationError, create_model, field_validator, model_validator

from engine.config.data import DataSection, DatasetEntry
from engine.config.launch import LaunchSection
from engine.config.names import check_name
from engine.config.schema import MODEL_SOURCE, RUN_SOURCE, ConfigError, Problem, problems_from_validation
from engine.config.sections import (
    AdapterSection,
    EarlyStopping,
    ModelSection,
    QuantizationSection,
    Section,
    TrainSection,
)
from engine.config.stopping import early_stopping_problems
from engine.config.vision import VisionSection
from engine.training.methods import DEFAULT_METHOD, METHODS, rows_batched_names
from engine.training.methods.reward_spec import RewardSpec

# The training methods, as engine.training.methods registers them.
TrainingMethod = Literal[tuple(METHODS)]  # type: ignore[valid-type]
# The methods with a config section of their own, named after them, and their sections.
METHOD_SECTIONS = {name: method.section for name, method in METHODS.items() if method.section is not None}

__all__ = [
    "METHOD_SECTIONS",
    "TrainingMethod",
    "AdapterSection",
    "CONFIG_FILE_MESSAGES",
    "ConfigError",
    "DataSection",
    "DatasetEntry",
    "EarlyStopping",
    "RewardSpec",
    "LaunchSection",
    "ModelSection",
    "Problem",
    "QuantizationSection",
    "RULE_MESSAGES",
    "RunConfig",
    "TrainSection",
    "VisionSection",
    "load_config",
    "model_source_fields",
    "run_source_fields",
    "vision_problems",
    "parse_config",
    "read_config_data",
    "save_config",
]


class _RunConfigBase(Section):
    """Everything a fine-tuning run needs, validated before any process starts. Each method with knobs adds its
    section after these (``dpo:`` for dpo; engine.training.methods), read only when the run uses that method."""

    name: str | None = Field(
        None,
        description="A short name for the run (shown in the run list, and part of its directory's name).",
    )
    method: TrainingMethod = Field(
        DEFAULT_METHOD,
        description="How the model is trained: " + "; ".join(method.summary for method in METHODS.values()) + ".",
    )
    model: ModelSection = Field(default_factory=ModelSection, description="The base model.")
    quantization: QuantizationSection = Field(
        default_factory=QuantizationSection, description="Quantized loading of the base (QLoRA)."
    )
    adapter: AdapterSection = Field(default_factory=AdapterSection, description="What is trained.")
    vision: VisionSection = Field(
        default_factory=VisionSection, description="Vision-language models: image size and the parts that train."
    )
    data: DataSection = Field(default_factory=DataSection, description="The dataset.")
    train: TrainSection = Field(default_factory=TrainSection, description="The training loop.")
    launch: LaunchSection = Field(default_factory=LaunchSection, description="Processes and devices.")

    @field_validator("name")
    @classmethod
    def _usable_name(cls, value: str | None) -> str | None:
        """A name becomes part of a file name: the one rule of engine.config.names (blank means no name)."""
        return check_name(value) if value and value.strip() else value

    @model_validator(mode="after")
    def _check_combinations(self) -> _RunConfigBase:
        """Cross-field rules; each message starts with the field to fix so the studio can place it."""
        problems = _combination_problems(self)
        if problems:
            raise ValueError("\n".join(str(problem) for problem in problems))
        return self

    @property
    def has_eval_data(self) -> bool:
        """Whether the config names evaluation data (a separate file or a held-out share)."""
        return bool(self.data.eval_path) or self.data.eval_size > 0

    def to_yaml(self) -> str:
        """The config as YAML, in field order, ready to save or show. Another method's section is left out while it
        holds its defaults (it does not apply, and reads back the same)."""
        unused = {
            name
            for name, section in METHOD_SECTIONS.items()
            if name != self.method and getattr(self, name) == section()
        }
        if self.vision == VisionSection():  # a text model's runs (most) read back the same without it
            unused.add("vision")
        data = self.model_dump(mode="json", exclude=unused)
        for name in METHOD_SECTIONS.keys() - unused:
            data[name] = getattr(self, name).to_yaml_data()
        return yaml.dump(data, Dumper=_ExactDumper, sort_keys=False, allow_unicode=True)


# RunConfig: the shared sections, then one per method with knobs, as the methods' packages define them.
RunConfig = create_model(
    "RunConfig",
    __base__=_RunConfigBase,
    __module__=__name__,
    __doc__=_RunConfigBase.__doc__,
    **{
        name: (section, Field(default_factory=section, description=METHODS[name].section_help))
        for name, section in METHOD_SECTIONS.items()
    },
)


def model_source_fields() -> tuple[str, ...]:
    """The dotted paths of every field that names a model to load (marked ``names_model`` in its section): the base
    model's, and a method's own (distill's teacher)."""
    return _marked_fields(MODEL_SOURCE)


def run_source_fields() -> tuple[str, ...]:
    """The dotted paths of every field that may name a run of the workspace (marked ``names_run``): the run a run
    starts from (model.init_from), and a method's own (distill's teacher)."""
    return _marked_fields(RUN_SOURCE)


def _marked_fields(marker: str) -> tuple[str, ...]:
    """The dotted paths of the sections' fields whose schema extra holds ``marker``."""
    found = []
    for section_name, section_field in RunConfig.model_fields.items():
        section = section_field.annotation
        if not (isinstance(section, type) and issubclass(section, Section)):
            continue
        for name, field in section.model_fields.items():
            extra = field.json_schema_extra
            if isinstance(extra, dict) and extra.get(marker):
                found.append(f"{section_name}.{name}")
    return tuple(found)


# Characters YAML 1.1 reads as line breaks: PyYAML writes them raw inside single quotes, and reading folds them
# into spaces; double quotes escape them, so the file reads back as exactly the config that was checked.
_LINE_BREAKS = ("\x85", "\u2028", "\u2029")


class _ExactDumper(yaml.SafeDumper):
    """SafeDumper whose strings always read back unchanged."""


def _represent_exact_str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = '"' if any(mark in value for mark in _LINE_BREAKS) else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_ExactDumper.add_representer(str, _represent_exact_str)


# What each rule across fields below says, by name: English with ``{placeholders}`` for what varies (a method's name,
# a count, a field's value). The one definition of each message: the studio reads a message back into its template and
# values and says it in the visitor's language (studio.i18n.problems, keys ``rule.<name>``). The methods' own rules
# keep theirs in their packages (``Method.rule_messages``), early stopping's in engine.config.stopping.
RULE_MESSAGES = {
    "vision_lora_parts": "LoRA needs the language model or the vision tower to train; for the projector alone use "
    "adapter.method full",
    "vision_nothing_trains": "nothing would train: turn on at least one part",
    "quantized_full": "{mode} base weights cannot be trained; use adapter.method lora",
    "loftq_quantized": "loftq quantizes the base itself; set quantization.mode to none",
    "eval_without_data": "evaluation needs eval data: set data.eval_path or data.eval_size",
    "eval_on_start_without_data": "needs eval data: set data.eval_path or data.eval_size",
    "eval_size_fraction": "must be a fraction below 1 or a whole number of rows",
    "warmup_fraction": "must be a fraction below 1 or a whole number of steps",
    "dora_init": "DoRA does not combine with {init} init",
    # English says "1 GPU" and "2 GPUs": one template each, so neither carries a word as a value.
    "devices_one_gpu": "names {gpus} GPU for {processes} processes: name one GPU per process, or leave it empty",
    "devices_gpus": "names {gpus} GPUs for {processes} processes: name one GPU per process, or leave it empty",
    "padding_free_method": "{method} batches whole pairs or sampled answers with padding; padding-free is for "
    "{batched} only (use auto or off)",
    "padding_free_remote_code": "rows are kept apart by transformers' own attention code; code shipped with the "
    "model may let them attend to each other (use auto, which turns it off for such models, or off)",
    "padding_free_packing": "packing always trains padding-free (each packed row keeps its own positions); use auto "
    "or on",
    "group_by_length_method": "{method} keeps TRL's own batching; length grouping is for {batched} only",
    "group_by_length_packing": "packed rows all have max_length tokens; turn packing off",
    "packing_method": "{method} trains on {trains_on}; packing is for {batched} only",
    "trackio_only": "used only by trackio: add trackio to train.report_to, or leave this empty",
}


def vision_problems(config: RunConfig) -> list[Problem]:
    """A vision-language run must train something of the parts the vision section leaves trainable (checked with the
    model's modality, engine.training.method_data: a text model's run ignores the section)."""
    vision = config.vision
    if config.adapter.is_lora and not (vision.train_language_model or vision.train_vision_tower):
        return [Problem("vision.train_language_model", RULE_MESSAGES["vision_lora_parts"])]
    if not (vision.train_language_model or vision.train_vision_tower or vision.train_projector):
        return [Problem("vision.train_language_model", RULE_MESSAGES["vision_nothing_trains"])]
    return []


def _combination_problems(config: RunConfig) -> list[Problem]:
    """Rules that involve more than one field."""
    problems: list[Problem] = []
    quantized = config.quantization.mode != "none"
    if quantized and config.adapter.method != "lora":
        problems.append(
            Problem("quantization.mode", RULE_MESSAGES["quantized_full"].format(mode=config.quantization.mode))
        )
    if quantized and config.adapter.init == "loftq":
        problems.append(Problem("adapter.init", RULE_MESSAGES["loftq_quantized"]))
    if config.train.eval_strategy != "no" and not config.has_eval_data:
        problems.append(Problem("train.eval_strategy", RULE_MESSAGES["eval_without_data"]))
    if config.train.eval_on_start and not config.has_eval_data:
        problems.append(Problem("train.eval_on_start", RULE_MESSAGES["eval_on_start_without_data"]))
    if config.data.eval_size >= 1 and not config.data.eval_size.is_integer():
        problems.append(Problem("data.eval_size", RULE_MESSAGES["eval_size_fraction"]))
    if config.train.warmup >= 1 and not config.train.warmup.is_integer():
        problems.append(Problem("train.warmup", RULE_MESSAGES["warmup_fraction"]))
    if config.adapter.use_dora and config.adapter.init in ("pissa", "olora", "loftq"):
        problems.append(Problem("adapter.use_dora", RULE_MESSAGES["dora_init"].format(init=config.adapter.init)))
    launch, gpus = config.launch, len(config.launch.devices or ())
    if gpus and launch.device != "cpu" and launch.num_processes > 1 and gpus != launch.num_processes:
        # One GPU per process (torchrun's rank N takes the Nth); a single process may use several.
        words = RULE_MESSAGES["devices_one_gpu" if gpus == 1 else "devices_gpus"]
        problems.append(Problem("launch.devices", words.format(gpus=gpus, processes=launch.num_processes)))
    problems += _batching_problems(config)
    problems += _tracker_problems(config)
    problems += early_stopping_problems(config)
    return problems + METHODS[config.method].problems(config)


def _batching_problems(config: RunConfig) -> list[Problem]:
    """How batches are formed (padding-free, packing, length grouping): what each method and kernel can take."""
    train, method, problems = config.train, METHODS[config.method], []
    names = {"method": method.name, "batched": rows_batched_names(), "trains_on": method.trains_on}
    if train.padding_free == "on" and not method.rows_batched:
        problems.append(Problem("train.padding_free", RULE_MESSAGES["padding_free_method"].format(**names)))
    if train.padding_free == "on" and config.model.trust_remote_code:
        problems.append(Problem("train.padding_free", RULE_MESSAGES["padding_free_remote_code"]))
    if train.padding_free == "off" and train.packing:
        problems.append(Problem("train.padding_free", RULE_MESSAGES["padding_free_packing"]))
    if train.group_by_length and not method.rows_batched:
        problems.append(Problem("train.group_by_length", RULE_MESSAGES["group_by_length_method"].format(**names)))
    if train.group_by_length and train.packing:
        problems.append(Problem("train.group_by_length", RULE_MESSAGES["group_by_length_packing"]))
    if train.packing and not method.rows_batched:
        problems.append(Problem("train.packing", RULE_MESSAGES["packing_method"].format(**names)))
    return problems


def _tracker_problems(config: RunConfig) -> list[Problem]:
    """trackio's own fields do nothing unless trackio is among the trackers: a Space typed there would silently
    get no metrics."""
    train = config.train
    if "trackio" in train.report_to:
        return []
    return [
        Problem(f"train.{name}", RULE_MESSAGES["trackio_only"])
        for name in ("trackio_project", "trackio_space")
        if getattr(train, name) is not None
    ]


# What reading a config file says when it holds no config, by name: English with ``{placeholders}`` (the file's path,
# the reader's own error as it wrote it), said again by the studio where it shows a sweep's base file (keys
# ``check.<name>``).
CONFIG_FILE_MESSAGES = {
    "config_not_found": "config file not found: {path}",
    "config_unreadable": "cannot read config file {path}: {error}",
    "config_not_yaml": "{path} is not valid YAML: {error}",
    "config_too_deep": "{path} is not a usable config: values nested too deeply",
    "config_empty": "{path} is empty: write the sections to set (model, data, train, ...), or start from a preset",
    "config_not_a_mapping": "the config must be a mapping of sections (model, data, train, ...)",
}


def parse_config(data: Any) -> RunConfig:
    """Validate a mapping (from YAML, a form or a test) into a RunConfig, or raise ConfigError."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError([Problem("", CONFIG_FILE_MESSAGES["config_not_a_mapping"])])
    try:
        return RunConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_as_written(problems_from_validation(exc, RunConfig), data)) from None


def _as_written(problems: list[Problem], data: dict[str, Any]) -> list[Problem]:
    """The problems named by the fields the user wrote: one dataset given as a mapping (``path: {path: ...}``,
    without a list's dash) is validated as a list of one, whose problems pydantic places at ``data.path.0``."""
    section = data.get("data")
    if not (isinstance(section, dict) and isinstance(section.get("path"), dict)):
        return problems
    one = "data.path.0"
    return [
        Problem("data.path" + problem.field[len(one) :], problem.message)
        if problem.field == one or problem.field.startswith(one + ".")
        else problem
        for problem in problems
    ]


def load_config(path: str | Path) -> RunConfig:
    """Read and validate a YAML config file, or raise ConfigError saying what is wrong with it."""
    return parse_config(read_config_data(path))


def read_config_data(path: str | Path) -> dict[str, Any]:
    """A YAML config file as the mapping it holds, not yet validated (the CLI's ``--set`` changes it first); a
    ConfigError when it cannot be read, is not YAML, or is empty."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise _unusable("config_not_found", path=path) from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:  # ValueError: a path with a NUL byte
        raise _unusable("config_unreadable", path=path, error=exc) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise _unusable("config_not_yaml", path=path, error=exc) from None
    except RecursionError:  # PyYAML composes nested lists and mappings recursively
        raise _unusable("config_too_deep", path=path) from None
    if data is None:
        # An empty file (or one of comments only) is more likely a mistake than a wish for every default.
        raise _unusable("config_empty", path=path)
    if not isinstance(data, dict):
        raise _unusable("config_not_a_mapping")
    return data


def _unusable(message: str, /, **values: object) -> ConfigError:
    """The ConfigError of a config file that holds no config: the message ``message`` of CONFIG_FILE_MESSAGES."""
    return ConfigError([Problem("", CONFIG_FILE_MESSAGES[message].format(**values))])


def save_config(config: RunConfig, path: str | Path) -> None:
    """Write the config as YAML atomically (a reader never sees half a file)."""
    from engine.store.rundir import write_text_atomic

    write_text_atomic(Path(path), config.to_yaml())
