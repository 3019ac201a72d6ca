"""What early stopping (``train.early_stopping``, engine.config.sections.EarlyStopping) needs of the rest of a config.

It is transformers' ``EarlyStoppingCallback``, which reads the best metric that Trainer tracks for
``load_best_model_at_end``; so turning it on also keeps the best checkpoint and makes it the run's result, and asks
for what that needs: evaluations, and a checkpoint at every evaluation (the same strategy, save_steps a multiple of
eval_steps), as transformers' TrainingArguments would refuse otherwise only once the worker has started. The rules
are checked before launch, each naming the field to change.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.config.schema.errors import Problem
from engine.training.methods import listed_metric, method_of

if TYPE_CHECKING:
    from engine.config import RunConfig

# What each rule below says, by name, with ``{placeholders}`` for what varies (the studio says it again in the
# visitor's language: studio.i18n.problems, keys ``rule.<name>``).
STOPPING_MESSAGES = {
    "early_stopping_without_eval": "early stopping watches the evaluations: set train.eval_strategy to steps or epoch "
    "(with eval data)",
    "early_stopping_save_strategy": "must be {eval_strategy}, as train.eval_strategy, with early stopping: the best "
    "model is kept from the checkpoint saved at its evaluation",
    "early_stopping_save_steps": "must be a multiple of train.eval_steps ({eval_steps}) with early stopping: the best "
    "model is kept from the checkpoint saved at its evaluation",
    "early_stopping_metric": "{metric} does not tell how well a {method} run does, and the best checkpoint by it "
    "would become the run's result: watch {metrics}",
}


def early_stopping_problems(config: RunConfig) -> list[Problem]:
    """What early stopping needs of the rest of the config: evaluations, and a checkpoint at each of them (the
    best model is kept from one)."""
    train = config.train
    if not train.early_stopping.enabled:
        return []
    if train.eval_strategy == "no":
        return [Problem("train.early_stopping.patience", STOPPING_MESSAGES["early_stopping_without_eval"])]
    if train.save_strategy != train.eval_strategy:
        words = STOPPING_MESSAGES["early_stopping_save_strategy"]
        return [Problem("train.save_strategy", words.format(eval_strategy=train.eval_strategy))]
    if train.eval_strategy == "steps" and train.save_steps % train.eval_steps:
        words = STOPPING_MESSAGES["early_stopping_save_steps"]
        return [Problem("train.save_steps", words.format(eval_steps=train.eval_steps))]
    return _watched_metric_problems(config)


def _watched_metric_problems(config: RunConfig) -> list[Problem]:
    """A metric that a method lists must be one of the run's method (engine.training.methods.listed_metric): GRPO's
    eval_loss is a policy loss, 0 whenever a group's answers score alike."""
    metric, method = config.train.early_stopping.metric, method_of(config)
    listed = listed_metric(metric)
    if listed is None or listed in method.quality_metrics:
        return []
    own = ", ".join(each.key for each in method.held_out_metrics())
    words = STOPPING_MESSAGES["early_stopping_metric"].format(metric=metric, method=method.name, metrics=own)
    return [Problem("train.early_stopping.metric", words)]
