"""The worker side the sampling methods share: their prompts, the check of their reward functions before launch,
the TRL arguments of their common knobs, and a trainer that writes samples of its answers to the run directory.

The methods' sections are named after them (``config.<method>``, ``Method.settings``), so nothing here names one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engine.config import RunConfig
    from engine.config.schema import Section
    from engine.training.methods.base import TrainerParts

SAMPLES_PER_LOG = 16


def prepare_data(config: RunConfig, tokenizer: Any) -> Any:
    """The run's prompts with their reference answers (engine.data.prompts)."""
    from engine.data.prompts import prepare_prompt_datasets

    return prepare_prompt_datasets(config, tokenizer)


def check_data(config: RunConfig, tokenizer: Any) -> None:
    """Before launch: each reward function imports, has TRL's signature and scores two rows with finite numbers,
    and the columns it reads are in the data (engine.training.rewards.check_rewards); a fault is named at
    ``<method>.rewards.<i>``."""
    from engine.data.prompts import first_prompt_rows
    from engine.training.methods import method_of
    from engine.training.rewards import check_rewards

    specs = method_of(config).rewards(config)
    check_rewards(specs, first_prompt_rows(config), tokenizer, field=f"{config.method}.rewards")


def sampling_kwargs(settings: Section) -> dict[str, Any]:
    """The TRL arguments (GRPOConfig's and RLOOConfig's alike) of the knobs every sampling section has."""
    return {
        "num_generations": settings.num_generations,
        "max_completion_length": settings.max_completion_length,
        "temperature": settings.temperature,
        "top_p": settings.top_p,
        "beta": settings.beta,
        "steps_per_generation": settings.steps_per_generation,
        "num_iterations": settings.num_iterations,
        "epsilon": settings.epsilon,
        "epsilon_high": settings.epsilon_high,
        "mask_truncated_completions": settings.mask_truncated_completions,
        "use_vllm": settings.use_vllm,
        "reward_weights": [reward.weight for reward in settings.rewards],
        # The reward functions read the reference and row columns: keep every column of the data.
        "remove_unused_columns": False,
    }


def frozen_reference(config: RunConfig) -> list[dict[str, Any]]:
    """The reference a sampling method with a KL term (its section's beta > 0) keeps beside a full or freeze
    fine-tune, for the memory estimate (engine.training.methods.reference); none without the term."""
    from engine.training.methods import method_of
    from engine.training.methods.reference import frozen_copy

    return frozen_copy(config) if method_of(config).settings(config).beta > 0 else []


def reference_lines(config: RunConfig) -> list[str]:
    """What the check says of a sampling method's reference: none without a KL term, else the kept one."""
    from engine.training.methods import method_of
    from engine.training.methods.reference import kept_reference_line

    if method_of(config).settings(config).beta == 0:
        return ["reference: none (beta 0: no KL term)"]
    return [kept_reference_line(config)]


def reward_functions_of(parts: TrainerParts) -> list[Any]:
    """The run's reward functions in TRL's signature (engine.training.rewards)."""
    from engine.training.methods import method_of
    from engine.training.rewards import reward_functions

    config = parts.config
    return reward_functions(method_of(config).rewards(config), parts.tokenizer)


def sampling_trainer_class(base: type) -> type:
    """``base`` (TRL's GRPOTrainer, RLOOTrainer or DistillationTrainer) writing samples of its answers to the run
    directory, and without Trainer's token count.

    - At each training log, the newest generation's first SAMPLES_PER_LOG answers go to completions.jsonl
      (engine.store.completions) with each reward's score (where it has rewards), for the Monitor's sample panel.
      TRL keeps them for its own console / wandb printing (``_logs``), which a run directory has no use for.
    - The trainer counts the prompt and generated tokens itself (state.num_input_tokens_seen, which the
      throughput chart reads); Trainer's count looks for ``input_ids`` in batches that have none and warned on
      every step.
    - Its prompts come in the same order whether the run was resumed or not (engine.training.methods.online.epochs).
    """

    class SamplingTrainer(base):  # type: ignore[misc,valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            from engine.training.methods.online.epochs import SamplerEpochs

            self.epoch_sampler = None  # made with the train loader (_get_train_sampler), when training starts
            super().__init__(*args, **kwargs)
            self.add_callback(SamplerEpochs(self))

        def _get_train_sampler(self, dataset: Any = None) -> Any:
            from engine.training.methods.online.epochs import EpochReplayedSampler

            self.epoch_sampler = EpochReplayedSampler(super()._get_train_sampler(dataset))
            return self.epoch_sampler

        def _track_num_input_tokens(self, inputs: dict[str, Any]) -> None:
            return

        def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
            training = self.model.training
            super().log(logs, start_time)
            if training and self.accelerator.is_main_process:
                self._write_samples()

        def _write_samples(self) -> None:
            from pathlib import Path

            from engine.store.completions import append_completions

            weights = self.reward_weights.tolist() if hasattr(self, "reward_weights") else []  # distill: none
            samples = newest_samples(self._logs, weights, self.state.global_step)
            key = [(sample["prompt"], sample["completion"]) for sample in samples]
            if samples and key != getattr(self, "_written", None):  # a generation serves several steps
                self._written = key
                append_completions(Path(self.args.output_dir).parent, samples)

    SamplingTrainer.__name__ = SamplingTrainer.__qualname__ = f"Counted{base.__name__}"
    return SamplingTrainer


def newest_samples(logs: dict[str, Any], weights: list[float], step: int) -> list[dict[str, Any]]:
    """The first SAMPLES_PER_LOG answers of the newest generation in TRL's ``_logs``, as completions.jsonl lines."""
    import math
    import time

    from engine.training.rewards import completion_text

    prompts, completions = list(logs["prompt"]), list(logs["completion"])
    # A trainer without rewards (DistillationTrainer) logs neither scores nor advantages.
    scores = {name: list(values) for name, values in logs.get("rewards", {}).items()}
    advantages = list(logs.get("advantages", []))
    samples = []
    for index in range(min(SAMPLES_PER_LOG, len(completions))):
        rewards = {name: values[index] for name, values in scores.items()}
        weighted = [w * r for w, r in zip(weights, rewards.values(), strict=False) if not math.isnan(r)]
        samples.append(
            {
                "step": step,
                "time": time.time(),
                "prompt": _prompt_text(prompts[index]),
                "completion": completion_text(completions[index]),
                "rewards": rewards,
                "reward": sum(weighted) if weighted else None,
                "advantage": advantages[index] if index < len(advantages) else None,
            }
        )
    return samples


def _prompt_text(prompt: Any) -> str:
    """A prompt as the panel shows it: a string, or a conversation's last user turn."""
    if isinstance(prompt, str):
        return prompt
    users = [turn.get("content", "") for turn in prompt if isinstance(turn, dict) and turn.get("role") == "user"]
    return str(users[-1]) if users else ""
