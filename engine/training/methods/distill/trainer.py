"""On-policy distillation with TRL's DistillationTrainer: the model samples an answer to each prompt with
transformers' ``generate`` (or vLLM on a GPU), and the loss is the divergence of its next-token distributions from
the teacher's on those answers (``distill.beta``: forward KL, Jensen-Shannon or reverse KL).

The prompts and the samples written to the run directory are the sampling methods' (engine.training.methods.online):
DistillationTrainer keeps its samples in the same ``_logs`` as GRPOTrainer, without rewards, and counts its tokens
the same way.

A teacher is a model (a hub id, or a local directory of a transformers model; a merged export of a run is one) or
a finished run given by its directory or one of its checkpoints (RUN/checkpoints/checkpoint-N): that run's base
with its adapter merged in, or its whole model. It loads as the run's own base does (dtype, quantization, device,
attention: engine.training.modeling.load_model), and must share the model's vocabulary: the loss compares the two
next-token distributions token by token.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.config import ConfigError, Problem
from engine.runs.artifacts import ArtifactError, TrainedWeights, open_run, trained_weights
from engine.runs.lineage import locate
from engine.store.paths import find_local_path, is_hub_id, resolve_model_source
from engine.training.methods.base import CAUSAL_LM, TrainerParts
from engine.training.methods.distill import RULE_MESSAGES
from engine.training.methods.online.trainer import prepare_data, sampling_trainer_class

if TYPE_CHECKING:
    from engine.config import RunConfig
    from engine.training.hardware import Hardware

__all__ = [
    "args_class",
    "build_trainer",
    "check_data",
    "find_teacher",
    "frozen_models",
    "load_teacher",
    "prepare_data",
    "training_kwargs",
]


FIELD = "distill.teacher"


@dataclass(frozen=True)
class Teacher:
    """What a teacher loads from: the model that holds its architecture and tokenizer, and a run's weights on it."""

    base: str  # a hub id or a local directory
    revision: str | None
    weights: TrainedWeights | None = None  # a run's adapter (merged into ``base``) or whole model
    run_name: str | None = None  # the run whose weights they are

    def described(self) -> str:
        """What the teacher is, in words (the check prints it)."""
        at = f" (revision {self.revision})" if self.revision else ""
        if self.weights is None:
            return f"{self.base}{at}"
        where = f"{self.run_name}'s {self.weights.label} ({self.weights.path})"
        return f"{where}, merged into its base {self.base}{at}" if self.weights.is_adapter else f"{where}{at}"

    def loading_config(self, config: RunConfig) -> RunConfig:
        """``config`` as the teacher loads: its base in the model's place, with the run's dtype and quantization."""
        update = {"name_or_path": self.base, "revision": self.revision, "init_from": None}
        return config.model_copy(update={"model": config.model.model_copy(update=update)})

    def load_options(self, config: RunConfig) -> dict[str, Any]:
        """What transformers' from_pretrained takes to read the teacher's files for ``config``'s run."""
        return {"revision": self.revision, "trust_remote_code": config.model.trust_remote_code}


def find_teacher(config: RunConfig) -> Teacher:
    """The teacher ``config.distill.teacher`` names; ConfigError at the field when it names nothing there (a path
    that is gone: Evaluate and a resume find it again) or a run that cannot teach (still running, without weights,
    a reward model)."""
    value = config.distill.teacher or ""
    try:
        run_dir, step = locate(value, None)
    except ArtifactError:  # no run there: a model
        if find_local_path(value) is None and not is_hub_id(value):  # a path, gone or never there
            message = f"no model directory or run at {value!r}, and it is no hub id (org/name)"
            raise ConfigError([Problem(FIELD, message)]) from None
        return Teacher(resolve_model_source(value), config.distill.teacher_revision)
    try:
        run = open_run(run_dir, step)
        weights = trained_weights(run, step)
    except ArtifactError as exc:
        raise ConfigError([Problem(FIELD, str(exc))]) from None
    from engine.training.methods import method_of

    kind = method_of(run.config).model
    if kind.auto_class != CAUSAL_LM.auto_class:
        words = f"{run.name} trains a {kind.auto_class.removeprefix('AutoModelFor')} model"
        raise ConfigError([Problem(FIELD, f"{words}; a teacher is a language model that writes text")])
    return Teacher(resolve_model_source(run.config.model.name_or_path), run.config.model.revision, weights, run.name)


def check_lines(config: RunConfig) -> list[str]:
    """What the check says of the teacher: what it loads."""
    return [f"teacher: {find_teacher(config).described()}"]


def load_teacher(config: RunConfig, hardware: Hardware) -> Any:
    """The teacher, frozen and in eval mode: its base loaded as the run's own (load_model), a run's adapter merged
    in, or a run's whole model in its base's place."""
    from engine.training.modeling import load_model

    teacher = find_teacher(config)
    loading = teacher.loading_config(config)
    whole = teacher.weights is not None and not teacher.weights.is_adapter
    model = load_model(loading, hardware, weights=teacher.weights.path if whole else None)
    if teacher.weights is not None and teacher.weights.is_adapter:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, str(teacher.weights.path)).merge_and_unload()
    model.requires_grad_(False)
    return model.eval()


def check_data(config: RunConfig, tokenizer: Any) -> None:
    """Before launch: the teacher resolves, its tokenizer loads and holds the model's vocabulary, and its output
    layer is as wide; ConfigError at ``distill.teacher`` saying what differs."""
    from transformers import AutoConfig, AutoTokenizer

    from engine.training.vision import text_tokenizer

    teacher = find_teacher(config)
    student = resolve_model_source(config.model.name_or_path)
    if teacher.weights is None and teacher.base == student and not config.model.init_from:
        raise ConfigError([Problem(FIELD, RULE_MESSAGES["teacher_is_model"])])
    options = teacher.load_options(config)
    try:
        own = AutoTokenizer.from_pretrained(teacher.base, **options)
        width = AutoConfig.from_pretrained(teacher.base, **options).get_text_config().vocab_size
    except (OSError, ValueError) as exc:  # a missing directory, a hub id that cannot be reached, not a model
        raise ConfigError([Problem(FIELD, f"cannot load the teacher {teacher.base!r}: {_first_line(exc)}")]) from None
    vocabulary, theirs = text_tokenizer(tokenizer).get_vocab(), own.get_vocab()
    if vocabulary != theirs:
        differ = len(set(vocabulary.items()) ^ set(theirs.items()))
        message = (
            f"the teacher's tokenizer is not the model's: {len(theirs):,} tokens against {len(vocabulary):,}, "
            f"{differ:,} of them (token and id) not in both. Distillation compares the two next-token "
            "distributions token by token, so both must share one vocabulary"
        )
        raise ConfigError([Problem(FIELD, message)])
    own_width = (
        AutoConfig.from_pretrained(
            student, revision=config.model.revision, trust_remote_code=config.model.trust_remote_code
        )
        .get_text_config()
        .vocab_size
    )
    if width != own_width:
        message = f"the teacher's output layer has {width:,} tokens and the model's {own_width:,}: they must match"
        raise ConfigError([Problem(FIELD, message)])


def frozen_models(config: RunConfig) -> list[dict[str, Any]]:
    """The teacher's config.json, for the memory estimate: it loads beside the model, frozen (a run's merged adapter
    leaves its base's shape)."""
    from transformers import AutoConfig

    teacher = find_teacher(config)
    return [AutoConfig.from_pretrained(teacher.base, **teacher.load_options(config)).to_dict()]


def training_kwargs(config: RunConfig, hardware: Hardware) -> dict[str, Any]:
    """DistillationConfig's own arguments, from the distill section."""
    distill = config.distill
    return {
        "beta": distill.beta,
        "max_completion_length": distill.max_completion_length,
        "temperature": distill.temperature,
        "top_p": distill.top_p,
        # The prompts' extra columns stay beside them, as for the sampling methods (TRL's default here too).
        "remove_unused_columns": False,
    }


def args_class() -> type:
    """TRL's DistillationConfig."""
    from trl import DistillationConfig

    return DistillationConfig


def build_trainer(parts: TrainerParts) -> Any:
    """TRL's DistillationTrainer with the run's teacher, writing samples of its answers (sampling_trainer_class)."""
    from trl import DistillationTrainer

    from engine.training.hardware import detect_hardware

    teacher = load_teacher(parts.config, detect_hardware())
    return _sampled(sampling_trainer_class(DistillationTrainer))(teacher_model=teacher, **parts.trainer_kwargs())


def _sampled(base: type) -> type:
    """``base`` keeping each training generation's prompts and answers in ``_logs``, where the sampling trainer reads
    its samples. DistillationTrainer keeps them only with ``log_completions``, which also prints them and writes a
    Parquet file per log into the checkpoints folder; and it keeps each prompt as its chat-templated text."""

    class SampledDistillationTrainer(base):  # type: ignore[misc,valid-type]
        def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
            output = super()._generate_and_score_completions(inputs)
            if self.model.training:
                answers = self.processing_class.batch_decode(output["completion_ids"], skip_special_tokens=True)
                self._logs["prompt"].extend(example["prompt"] for example in inputs)
                self._logs["completion"].extend(answers)
            return output

    return SampledDistillationTrainer


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip() or type(exc).__name__).splitlines()[0]
