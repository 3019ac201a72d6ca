"""The engine as the studio reaches it: the one module of engine/ that studio/ imports (tests/test_architecture.py).

Everything here is light: importing it loads no ML library (the studio's cold start). What needs the training
libraries (a run's check, the tokenizer, the data check with tokens) is a function below that imports them when
called. The studio never writes a run's files itself: runs are created, started, stopped and resumed through
``runs`` and ``run_queue``, whose writers are the engine's.

The names, by concern:

- the config: RunConfig and its parts, loading, saving and checking it, its validation messages, what its
  rules across fields say (``RULE_MESSAGES``, ``STOPPING_MESSAGES``, ``HARDWARE_MESSAGES``, ``TRACKER_MESSAGES``;
  each method's in its record's ``rule_messages``) and what its sections' own checks say, a sweep file's too
  (``CHECK_MESSAGES``);
- the methods: the registry (``METHODS``, ``method_of``, ``method_charts``) and a reward's config;
- runs: ``runs`` (create, start, stop, resume, status, the run list), ``run_queue`` (runs waiting for devices),
  ``requests`` (Save now, Pause), ``init_from`` lineage, the run directory's files and states, a run's weights;
- the workspace's layout and the paths a browser may name;
- data: the data error, and the checks of a run's data (rows with images previewed with thumbnails);
- models: whether a base model reads images (``model_modality``);
- jobs: ``jobs`` (evaluate, export and benchmark jobs), ``evaluations``, ``benchmarks`` (lm-eval base against tuned:
  ``start_benchmark``, ``latest_benchmark``, ``table_rows``), ``export``;
- chat: ``ChatClient`` and its settings, ``ChatSeats`` (a bound on the workers of several clients);
- sweeps: starting, stopping and reading sweeps, and their search space.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine import runs
from engine.chat.client import ChatClient, ChatError, ModelSpec, Reply, SamplingParams, chat_tools
from engine.chat.seats import ChatSeats, NoSeat
from engine.config import (
    CONFIG_FILE_MESSAGES,
    RULE_MESSAGES,
    ConfigError,
    DatasetEntry,
    Problem,
    RunConfig,
    load_config,
    model_source_fields,
    parse_config,
    run_source_fields,
    save_config,
)
from engine.config.data import DATA_MESSAGES
from engine.config.launch import LAUNCH_MESSAGES
from engine.config.names import NAME_MESSAGES, name_problem
from engine.config.schema.errors import ABOUT_KEY, MESSAGES, SUGGESTION, UNKNOWN_KEY, problems_from_validation
from engine.config.schema.secrets import SECRET_MESSAGES
from engine.config.sections import BUNDLED_MODELS, DEMO_MODEL, FIELD_MESSAGES
from engine.config.stopping import STOPPING_MESSAGES
from engine.data.embedded_images import EMBEDDED_IMAGES_ENV, IMAGE_CACHE_ENV
from engine.data.errors import DataError
from engine.data.images import IMAGE_ROOTS_ENV
from engine.data.loading import decoded_bytes
from engine.data.template_guard import CHECK_BUDGET_S
from engine.data.warnings import EVAL_FILE_PREFIX, EVAL_LABEL, WARNINGS
from engine.evaluate import benchmarks, evaluations
from engine.evaluate.evaluations import SCORING_PREFERENCE, SCORING_REWARDS, is_unpaired, scoring_of
from engine.export import exports as export
from engine.runs import jobs, requests
from engine.runs import queue as run_queue
from engine.runs.artifacts import ArtifactError
from engine.runs.jobs import JobStatus
from engine.runs.lineage import FIELD as INIT_FROM_FIELD
from engine.runs.lineage import init_from_problems, pinned, resolve_init_from, runs_with_weights, source_label
from engine.runs.queue import limit_reached
from engine.runs.status import RunSummary
from engine.store.completions import COMPLETIONS_FILE, OLDER_COMPLETIONS_FILE, latest_completions
from engine.store.paths import PROJECT_ROOT, PathNotAllowed, confine, env_roots, find_local_path, is_hub_id
from engine.store.rundir import (
    ABORTED,
    ACTIVE_STATES,
    COMPLETED,
    CONFIG_FILE,
    FAILED,
    LOG_FILE,
    METRICS_FILE,
    OPEN_STATES,
    PAUSED,
    PRUNED,
    QUEUED,
    RUN_STATES,
    STATUS_FILE,
    TRAINING_STATES,
    RunStatus,
    checkpoint_steps,
    final_weights,
    is_run_dir,
    iter_metrics,
    log_tail,
    read_status,
    write_text_atomic,
)
from engine.store.workspace import (
    DATASETS_DIR,
    VISITORS_DIR,
    configs_dir,
    datasets_dir,
    exports_dir,
    image_cache_of,
    recent_models_file,
    runs_dir,
    visitor_datasets_dir,
    visitor_exports_dir,
    visitor_key_file,
    workspace_of,
)
from engine.sweeps import (
    SweepError,
    SweepSummary,
    TrialSummary,
    continue_sweep,
    driver_pid,
    start_sweep,
    stop_sweep,
    sweep_status,
    sweeps_dir,
)
from engine.sweeps.config import SWEEP_MESSAGES, SweepConfig
from engine.sweeps.control import compact_base, driver_log_tail, read_sweep_text, sweep_yaml
from engine.sweeps.metrics import default_objective, known_metric, objective_metrics
from engine.sweeps.sections import SWEEP_SECTION_MESSAGES, SpaceEntry, entry_field
from engine.sweeps.space import SPACE_MESSAGES, EntryProblem, choice_labels, find_field
from engine.sweeps.study import SWEEP_FILE, sweep_dir
from engine.sweeps.summary import PRUNE_REASONS, format_params, format_value, outcome_text
from engine.training.hardware import HARDWARE_MESSAGES
from engine.training.method_data import FORMAT_MISFIT, FORMAT_WORDS, MISFIT_ADVICE, MODALITY_MISFIT
from engine.training.methods import METHODS, Method, method_charts, method_of
from engine.training.methods.base import evaluation_key
from engine.training.methods.reward_spec import REWARD_MESSAGES, RewardSpec
from engine.training.modality import VISION as VISION_MODALITY
from engine.training.modality import model_modality
from engine.training.trackers import TRACKER_MESSAGES

if TYPE_CHECKING:
    from pathlib import Path

    from engine.data.pipeline import DataReport
    from engine.data.preview import ImageRows, TokenCheck
    from engine.training.check import CheckReport

# What the config sections' own checks (their pydantic validators) say, a run's and a sweep file's (its search space's
# too, and what reading a sweep's text and its base file says), table by table: each table is written beside its
# checks, English with ``{placeholders}`` (the studio says them in the visitor's language, ``check.<name>``). A table
# of such messages added to the engine is added here.
CHECK_MESSAGES: tuple[dict[str, str], ...] = (
    SECRET_MESSAGES,
    NAME_MESSAGES,
    FIELD_MESSAGES,
    DATA_MESSAGES,
    LAUNCH_MESSAGES,
    REWARD_MESSAGES,
    SWEEP_SECTION_MESSAGES,
    SWEEP_MESSAGES,
    SPACE_MESSAGES,
    CONFIG_FILE_MESSAGES,
)

__all__ = [
    "ABOUT_KEY",
    "ABORTED",
    "ACTIVE_STATES",
    "COMPLETED",
    "COMPLETIONS_FILE",
    "CONFIG_FILE",
    "DATASETS_DIR",
    "BUNDLED_MODELS",
    "CHECK_MESSAGES",
    "DEMO_MODEL",
    "EVAL_FILE_PREFIX",
    "EVAL_LABEL",
    "FAILED",
    "FORMAT_MISFIT",
    "FORMAT_WORDS",
    "HARDWARE_MESSAGES",
    "INIT_FROM_FIELD",
    "LOG_FILE",
    "MESSAGES",
    "METHODS",
    "METRICS_FILE",
    "MISFIT_ADVICE",
    "MODALITY_MISFIT",
    "EMBEDDED_IMAGES_ENV",
    "IMAGE_CACHE_ENV",
    "IMAGE_ROOTS_ENV",
    "OLDER_COMPLETIONS_FILE",
    "OPEN_STATES",
    "PAUSED",
    "PROJECT_ROOT",
    "PRUNE_REASONS",
    "PRUNED",
    "QUEUED",
    "RULE_MESSAGES",
    "RUN_STATES",
    "SCORING_PREFERENCE",
    "SCORING_REWARDS",
    "STATUS_FILE",
    "STOPPING_MESSAGES",
    "SUGGESTION",
    "SWEEP_FILE",
    "TRACKER_MESSAGES",
    "TRAINING_STATES",
    "UNKNOWN_KEY",
    "VISITORS_DIR",
    "WARNINGS",
    "ArtifactError",
    "ChatClient",
    "ChatError",
    "ChatSeats",
    "ConfigError",
    "DataError",
    "DatasetEntry",
    "EntryProblem",
    "JobStatus",
    "Method",
    "ModelSpec",
    "NoSeat",
    "PathNotAllowed",
    "Problem",
    "Reply",
    "RewardSpec",
    "RunConfig",
    "RunStatus",
    "RunSummary",
    "SamplingParams",
    "SpaceEntry",
    "SweepConfig",
    "SweepError",
    "SweepSummary",
    "TrialSummary",
    "VISION_MODALITY",
    "benchmarks",
    "check_run",
    "check_target_modules",
    "chat_tools",
    "check_tokens",
    "checkpoint_steps",
    "choice_labels",
    "compact_base",
    "configs_dir",
    "confine",
    "continue_sweep",
    "datasets_dir",
    "default_objective",
    "driver_log_tail",
    "driver_pid",
    "entry_field",
    "env_roots",
    "evaluation_key",
    "evaluations",
    "export",
    "exports_dir",
    "final_weights",
    "find_field",
    "find_local_path",
    "format_params",
    "format_value",
    "has_images",
    "image_cache_of",
    "image_rows",
    "init_from_problems",
    "inspect_run_data",
    "is_hub_id",
    "is_run_dir",
    "is_unpaired",
    "iter_metrics",
    "jobs",
    "known_metric",
    "latest_completions",
    "limit_reached",
    "load_config",
    "load_tokenizer",
    "log_tail",
    "meta_model",
    "method_charts",
    "method_of",
    "model_modality",
    "name_problem",
    "outcome_text",
    "objective_metrics",
    "parse_config",
    "model_source_fields",
    "run_source_fields",
    "pinned",
    "problems_from_validation",
    "read_status",
    "read_sweep_text",
    "recent_models_file",
    "requests",
    "resolve_init_from",
    "reward_names",
    "run_queue",
    "runs",
    "runs_dir",
    "runs_with_weights",
    "save_config",
    "scoring_of",
    "source_label",
    "start_sweep",
    "stop_sweep",
    "sweep_dir",
    "sweep_status",
    "sweep_yaml",
    "sweeps_dir",
    "tracker_problems",
    "visitor_datasets_dir",
    "visitor_exports_dir",
    "visitor_key_file",
    "workspace_of",
    "write_text_atomic",
    "decoded_bytes",
]


# The checks that reach the training libraries: each imports its module when called, so importing this module
# stays light (the studio's cold start).


def check_run(
    config: RunConfig, template_budget_s: float = CHECK_BUDGET_S, workspace: Path | None = None
) -> CheckReport:
    """Everything ``python -m engine check`` checks before launch (engine.training.check.check_run)."""
    from engine.training import check

    return check.check_run(config, template_budget_s, workspace)


def meta_model(config: RunConfig) -> Any:
    """The run's model built on the meta device, without weights (engine.training.modeling.meta_model)."""
    from engine.training.modeling import meta_model as build

    return build(config)


def check_target_modules(config: RunConfig, model: Any) -> None:
    """Refuse LoRA target modules the model does not have (engine.training.builders.check_target_modules)."""
    from engine.training.builders import check_target_modules as check

    check(config, model)


def load_tokenizer(config: RunConfig) -> Any:
    """The run's tokenizer (engine.training.modeling.load_tokenizer)."""
    from engine.training.modeling import load_tokenizer as load

    return load(config)


def reward_names(specs: list[RewardSpec]) -> list[str]:
    """The names a run's reward functions have in its metrics (``rewards/<name>/mean``) and samples, in order
    (engine.training.rewards.functions.reward_names)."""
    from engine.training.rewards.functions import reward_names as names

    return names(specs)


def tracker_problems(config: RunConfig) -> list[Problem]:
    """Why a tracker of the run could not log (engine.training.trackers.tracker_problems)."""
    from engine.training.trackers import tracker_problems as problems

    return problems(config)


def inspect_run_data(config: RunConfig, tokenizer: Any = None, template_budget_s: float = CHECK_BUDGET_S) -> DataReport:
    """The dataset check of a run, and that its method trains on the data (engine.training.method_data)."""
    from engine.training import method_data

    return method_data.inspect_run_data(config, tokenizer, template_budget_s)


def check_tokens(
    config: RunConfig, tokenizer: Any, n: int = 3, template_budget_s: float = CHECK_BUDGET_S
) -> TokenCheck:
    """The first rows as the model sees them, and what carries loss (engine.data.preview.check_tokens)."""
    from engine.data import preview

    return preview.check_tokens(config, tokenizer, n, template_budget_s)


def has_images(fmt: str) -> bool:
    """Whether data of a detected format holds rows with images (engine.data.preview.has_images)."""
    from engine.data import preview

    return preview.has_images(fmt)


def image_rows(config: RunConfig, n: int = 3) -> ImageRows:
    """The first rows of data with images, each with its images' thumbnails (engine.data.preview.image_rows): no
    processor, so no torch."""
    from engine.data import preview

    return preview.image_rows(config, n)
