"""What a training method is (see engine.training.methods): its description, and what the recipe hands it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.config import RunConfig

if TYPE_CHECKING:
    from engine.training.hardware import Hardware


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
    """One training method.

    - ``formats``: the dataset formats it trains on (``engine.data`` detects them); data in another format is
      refused before launch.
    - ``charts``: metrics of its own that the Monitor draws.
    - ``evaluation``: how Evaluate scores its runs (``engine.evaluate``): ``"answers"`` is eval loss and
      perplexity on the answer tokens, and exact match of greedy answers; ``"preference"`` is how often the
      model ranks the chosen answer first, base → tuned, and the implicit reward margin
      (engine.evaluate.preference); ``"rewards"`` is the mean of each of the run's reward functions on greedy
      answers to held-out prompts, the starting point → tuned (engine.evaluate.rewards).
    - ``reference``: whether it trains against a reference model (its implicit reward is then what it
      optimises, and Evaluate ranks its pairs by that reward too).
    - ``prepare_data(config, tokenizer)``: the tokenized datasets, with ``.train``, ``.eval`` and ``.report``
      (an ``engine.data.DataReport``).
    - ``training_kwargs(config, hardware)``: the method's own arguments of its ``args_class`` (pure: no library
      import; ``hardware`` for the device-aware ones);
      the arguments every method shares come from ``engine.training.builders.common_training_kwargs``.
    - ``args_class()``: the TRL config class (a transformers TrainingArguments).
    - ``build_trainer(parts)``: the TRL trainer, ready to ``train()``.
    - ``writes_samples``: whether its runs write samples of what they generate to completions.jsonl
      (engine.store.completions), which the Monitor lists.
    - ``check_data(config, tokenizer)``: checks before launch beyond the rows' format, raising ConfigError (GRPO:
      its reward functions, called on two rows); None when the method has none.
    """

    name: str
    title: str
    formats: tuple[str, ...]
    prepare_data: Callable[[RunConfig, Any], Any]
    training_kwargs: Callable[[RunConfig, Hardware], dict[str, Any]]
    args_class: Callable[[], type]
    build_trainer: Callable[[TrainerParts], Any]
    charts: tuple[MetricChart, ...] = ()
    evaluation: str = "answers"
    reference: bool = False
    writes_samples: bool = False
    check_data: Callable[[RunConfig, Any], None] | None = None
