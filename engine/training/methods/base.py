"""What a training method is (see engine.training.methods): the record its package registers, and what the recipe
hands it.

This module imports no ML library and nothing of engine.config at run time: engine.config builds RunConfig from
the methods' sections, so the records must load before it.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engine.config.schema import Problem, Section
    from engine.training.methods.reward_spec import RewardSpec

# A run's config (engine.config.RunConfig) as the methods see it. engine.config composes RunConfig from the methods'
# records and sections, so this package does not import it, not even for annotations: the imports run one way.
RunConfig = Any

# How Evaluate scores a method's runs (engine.evaluate): "answers" is eval loss and perplexity on the answer
# tokens, and exact match of greedy answers; "preference" is how often the model ranks the chosen answer first,
# base -> tuned, and the implicit reward margin; "rewards" is the mean of each of the run's reward functions on
# greedy answers to held-out prompts, the starting point -> tuned.
SCORINGS = ("answers", "preference", "rewards")


@dataclass(frozen=True)
class ModelKind:
    """What a method trains: the transformers auto class that loads it, peft's task type for its adapter, what its
    head needs at load time, and whether it generates text (Chat, and scorings that generate, need that)."""

    auto_class: str
    peft_task: str
    generates: bool = True
    head_kwargs: tuple[tuple[str, Any], ...] = ()

    @property
    def peft_auto_class(self) -> str:
        """peft's auto class that loads an adapter of this kind with its base (AutoPeftModelForCausalLM)."""
        return "AutoPeftModel" + self.auto_class.removeprefix("AutoModel")

    def load_class(self) -> Any:
        """The transformers auto class (imports transformers)."""
        import transformers

        return getattr(transformers, self.auto_class)


# A language model: what every method trains unless it says otherwise.
CAUSAL_LM = ModelKind("AutoModelForCausalLM", "CAUSAL_LM")
# A vision-language model (images and text in, text out), trained as a language model on its answers.
IMAGE_TEXT_TO_TEXT = ModelKind("AutoModelForImageTextToText", "CAUSAL_LM")
# One score per sequence (a reward model): a single-label sequence-classification head on the base.
SEQUENCE_SCORE = ModelKind(
    "AutoModelForSequenceClassification", "SEQ_CLS", generates=False, head_kwargs=(("num_labels", 1),)
)


@dataclass(frozen=True)
class MetricChart:
    """A chart of one logged metric that a method adds to the Monitor, beside loss, learning rate, gradient
    norm and throughput (a metrics.jsonl key, as the trainer logs it)."""

    key: str
    title: str
    unit: str
    # Whether a run with this config logs the metric at all (GRPO logs no KL when beta is 0); None: always.
    logged_by: Callable[[RunConfig], bool] | None = None

    def drawn_for(self, config: RunConfig) -> bool:
        """Whether the Monitor draws this chart for a run with ``config``."""
        return self.logged_by is None or self.logged_by(config)


@dataclass(frozen=True)
class QualityMetric:
    """A metric that tells how well a method's run did, offered as a sweep's objective and watched by early stopping
    (a held-out one): its metrics.jsonl key (``eval_loss``, ``train_loss``: engine.sweeps.objective reads those two
    from eval and train events), and which way is better. A key starting ``eval_`` is logged only by a run that
    evaluates."""

    key: str
    direction: str  # "minimize" or "maximize"

    @property
    def needs_eval(self) -> bool:
        return logged_by_evaluations(self.key)


EVALUATION_PREFIX = "eval_"  # how Trainer names what an evaluation logs: eval_loss, eval_reward, ...


def logged_by_evaluations(key: str) -> bool:
    """Whether a metrics.jsonl key is one that evaluations log."""
    return key.startswith(EVALUATION_PREFIX)


def evaluation_key(key: str) -> str:
    """The key under which an evaluation logs what a training step logs as ``key`` (reward -> eval_reward)."""
    return EVALUATION_PREFIX + key


# What most methods' losses are: how well the run fits its data, lower better, the held-out one first.
LOSS_METRICS = (QualityMetric("eval_loss", "minimize"), QualityMetric("train_loss", "minimize"))


@dataclass(frozen=True)
class TrainerParts:
    """What the recipe has built when it asks a method for its trainer."""

    config: RunConfig
    model: Any  # ready to train: quantized, adapter attached
    tokenizer: Any
    data: Any  # what the method's prepare_data returned
    args: Any  # what to_training_args returned (an instance of the method's args_class)
    callbacks: list[Any]

    def trainer_kwargs(self) -> dict[str, Any]:
        """The keyword arguments every TRL trainer takes alike. The model arrives with its adapter attached, so no
        peft_config is passed (with LoRA, DPO and KTO then take the base with the adapter off as reference)."""
        return {
            "model": self.model,
            "args": self.args,
            "train_dataset": self.data.train,
            "eval_dataset": self.data.eval,
            "processing_class": self.tokenizer,
            "callbacks": self.callbacks,
        }


@dataclass(frozen=True)
class Method:
    """One training method: what the config, the data check, the Monitor, Evaluate and the demo need to know of it.

    - ``name``: the value of RunConfig's ``method``, and the name of its config section when it has one.
    - ``summary``: what it trains on, for the ``method`` field's help.
    - ``formats``: the dataset formats it trains on (``engine.data`` detects them); data in another format is
      refused before launch.
    - ``section``: its config section (a ``engine.config.schema.Section``), read only when the run uses this method;
      ``section_help`` is that section's description.
    - ``rules``: checks across fields, each ``rule(config) -> [Problem]``, run when the config uses this method.
    - ``rule_messages``: what its rules say, by name: English with ``{placeholders}`` for what varies, the one
      definition each rule formats its message from; the studio says them in the visitor's language
      (``rule.<name>``), so a name means one message across the methods (a rule the methods share, one name).
    - ``fits``: what the method asks of other sections' fields whose defaults its rules refuse (GRPO evaluates whole
      groups of answers: the eval batch size must be a multiple of the group's size), each
      ``fit(config) -> {dotted path: value}``, the smallest change that satisfies its rule ({} when nothing needs to
      change); a form sets them when the method is picked (``Method.fitted``), so that the pick does not leave an
      error in a field the user never opened. ``config`` there has valid sections but its rules unchecked.
    - ``rows_batched``: it trains on single rows that the engine batches, so padding-free batches, packing and
      length grouping apply; the others batch what ``trains_on`` says (whole pairs, sampled answers) themselves.
    - ``charts``: metrics of its own that the Monitor draws.
    - ``quality_metrics``: the metrics that tell how well its run did, the first a sweep's default objective and
      the first held-out one what early stopping watches (the losses, unless its loss says nothing of that: GRPO's
      is a policy loss, 0 whenever a group's answers score alike); a sweep and early stopping refuse another
      method's metric, or the losses where they are not listed.
    - ``scoring``: how Evaluate scores its runs (one of SCORINGS).
    - ``reference``: whether it trains against a reference model (its implicit reward is then what it
      optimises, and Evaluate ranks its pairs by that reward too).
    - ``writes_samples``: whether its runs write samples of what they generate to completions.jsonl
      (engine.store.completions), which the Monitor lists.
    - ``demo_caps``: fields of its section that a public demo caps, each with the demo's limit that caps it
      (``"generations"``: the demo policy's ``max_generations``).
    - ``model``: what it trains (``CAUSAL_LM``, or ``SEQUENCE_SCORE`` for a reward model).
    - ``package``: the method's package; its ``trainer`` module is the worker side (``Method.trainer()``), and its
      optional ``scoring`` module scores its runs in Evaluate in place of the default for ``scoring``
      (``Method.scorer()``).

    The trainer module defines ``prepare_data(config, tokenizer)`` (the tokenized datasets, with ``.train``,
    ``.eval`` and ``.report``), ``training_kwargs(config, hardware)`` (its own arguments of ``args_class``, pure),
    ``args_class()`` (the TRL config class), ``build_trainer(parts)`` (the TRL trainer, ready to ``train()``) and,
    optionally, ``check_data(config, tokenizer)`` (checks before launch beyond the rows' format, raising
    ConfigError), ``check_lines(config)`` (what the check prints of it) and ``frozen_models(config)`` (the
    config.json of each model it loads beside the trained one and never trains, for the memory estimate: distill's
    teacher, the reference a full or freeze run keeps: engine.training.methods.reference).
    """

    name: str
    title: str
    summary: str
    formats: tuple[str, ...]
    package: str
    section: type[Section] | None = None
    section_help: str = ""
    rules: tuple[Callable[[RunConfig], list[Problem]], ...] = ()
    rule_messages: dict[str, str] = field(default_factory=dict)
    fits: tuple[Callable[[RunConfig], dict[str, Any]], ...] = ()
    rows_batched: bool = False
    trains_on: str = ""
    charts: tuple[MetricChart, ...] = ()
    quality_metrics: tuple[QualityMetric, ...] = LOSS_METRICS
    scoring: str = "answers"
    reference: bool = False
    writes_samples: bool = False
    demo_caps: dict[str, str] = field(default_factory=dict)
    model: ModelKind = CAUSAL_LM

    def trainer(self) -> ModuleType:
        """The worker side of the method (its package's ``trainer`` module): imported only where a run is checked
        or trained, since it reaches the data pipeline and the training libraries."""
        return importlib.import_module(f"{self.package}.trainer")

    def scorer(self) -> ModuleType | None:
        """The method's own Evaluate scoring (its package's ``scoring`` module, with ``score(run, weights,
        tokenizer, data, max_rows, progress)``), or None where the default scoring of its kind serves."""
        name = f"{self.package}.scoring"
        return importlib.import_module(name) if importlib.util.find_spec(name) is not None else None

    def data_check(self) -> Callable[[RunConfig, Any], None] | None:
        """The method's own check before launch beyond the rows' format (its trainer's ``check_data``), or None."""
        return getattr(self.trainer(), "check_data", None)

    def frozen_models(self, config: RunConfig) -> list[dict[str, Any]]:
        """The config.json (as a dict) of each model the method loads beside the trained one, frozen (its trainer's
        ``frozen_models``); [] for most methods."""
        frozen = getattr(self.trainer(), "frozen_models", None)
        return frozen(config) if frozen is not None else []

    def check_lines(self, config: RunConfig) -> list[str]:
        """What the check says of the run beyond the shared lines (its trainer's ``check_lines``: distill's teacher,
        the reference of a method that keeps one); [] for the others."""
        lines = getattr(self.trainer(), "check_lines", None)
        return lines(config) if lines is not None else []

    def settings(self, config: RunConfig) -> Section | None:
        """The method's section of ``config`` (None for a method without knobs)."""
        return getattr(config, self.name) if self.section is not None else None

    def rewards(self, config: RunConfig) -> list[RewardSpec]:
        """The reward functions of a method that learns from rewards (its section's ``rewards``); else []."""
        settings = self.settings(config)
        return list(getattr(settings, "rewards", None) or [])

    def fitted(self, config: RunConfig) -> dict[str, Any]:
        """The values (dotted path -> value) of fields outside the method's section that its ``fits`` change so that
        its rules take ``config``; {} when none need to change."""
        changes: dict[str, Any] = self._watch_fit(config)
        for fit in self.fits:
            changes.update(fit(config))
        return changes

    def _watch_fit(self, config: RunConfig) -> dict[str, Any]:
        """Early stopping's metric, where it is on and watches another method's (eval_loss after GRPO is picked):
        the method's first held-out one (engine.config.stopping refuses the other). Off, it is left as it is: the
        rule says what to watch once it is turned on."""
        from engine.training.methods import listed_metric

        stopping = config.train.early_stopping
        listed = listed_metric(stopping.metric) if stopping.enabled else None
        if listed is None or listed in self.quality_metrics:
            return {}
        held_out = self.held_out_metrics()
        return {"train.early_stopping.metric": held_out[0].key} if held_out else {}

    def held_out_metrics(self) -> tuple[QualityMetric, ...]:
        """Its quality metrics that evaluations log (what early stopping can watch)."""
        return tuple(metric for metric in self.quality_metrics if metric.needs_eval)

    def problems(self, config: RunConfig) -> list[Problem]:
        """What its rules find wrong with ``config``."""
        return [problem for rule in self.rules for problem in rule(config)]
