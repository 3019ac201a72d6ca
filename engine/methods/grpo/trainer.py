"""Group relative policy optimisation with TRL's GRPOTrainer: the model samples ``num_generations`` answers per
prompt with transformers' ``generate`` (or vLLM on a GPU, when asked), the reward functions score them
(engine.training.rewards), and each answer is pushed up or down by how it fares against its group.

Generation is the slow part of a step, so TRL generates for ``steps_per_generation`` optimizer steps at once and
reuses the samples (the "subclassing Trainer" guide's reason for it); the config exposes that knob.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.methods.base import TrainerParts

if TYPE_CHECKING:
    from engine.config import RunConfig
    from engine.training.hardware import Hardware


def prepare_data(config: RunConfig, tokenizer: Any) -> Any:
    """The run's prompts with their reference answers (engine.data.prompts)."""
    from engine.data.prompts import prepare_prompt_datasets

    return prepare_prompt_datasets(config, tokenizer)


def check_data(config: RunConfig, tokenizer: Any) -> None:
    """Before launch: each reward function imports, has TRL's signature and scores two rows with finite numbers,
    and the columns it reads are in the data (engine.training.rewards.check_rewards)."""
    from engine.data.prompts import first_prompt_rows
    from engine.training.rewards import check_rewards

    check_rewards(config.grpo.rewards, first_prompt_rows(config), tokenizer)


def training_kwargs(config: RunConfig, hardware: Hardware) -> dict[str, Any]:
    """GRPOConfig's own arguments, from the grpo section."""
    grpo = config.grpo
    return {
        "num_generations": grpo.num_generations,
        "max_completion_length": grpo.max_completion_length,
        "temperature": grpo.temperature,
        "top_p": grpo.top_p,
        "beta": grpo.beta,
        "loss_type": grpo.loss_type,
        "scale_rewards": grpo.scale_rewards,
        "steps_per_generation": grpo.steps_per_generation,
        "num_iterations": grpo.num_iterations,
        "epsilon": grpo.epsilon,
        "epsilon_high": grpo.epsilon_high,
        "mask_truncated_completions": grpo.mask_truncated_completions,
        "use_vllm": grpo.use_vllm,
        "reward_weights": [reward.weight for reward in grpo.rewards],
        # The reward functions read the reference and row columns: keep every column of the data.
        "remove_unused_columns": False,
    }


def args_class() -> type:
    """TRL's GRPOConfig."""
    from trl import GRPOConfig

    return GRPOConfig


def build_trainer(parts: TrainerParts) -> Any:
    """TRL's GRPOTrainer with the run's reward functions."""
    from engine.training.rewards import reward_functions

    rewards = reward_functions(parts.config.grpo.rewards, parts.tokenizer)
    return counted_grpo_trainer_class()(reward_funcs=rewards, **parts.trainer_kwargs())


def counted_grpo_trainer_class() -> type:
    """GRPOTrainer that writes samples of its answers to the run directory, and without Trainer's token count.

    - At each training log, the newest generation's first SAMPLES_PER_LOG answers go to completions.jsonl
      (engine.store.completions) with each reward's score, for the Monitor's sample panel. TRL keeps them for
      its own console / wandb printing (``_logs``), which a run directory has no use for.
    - GRPOTrainer counts the prompt and generated tokens itself (state.num_input_tokens_seen, which the
      throughput chart reads); Trainer's count looks for ``input_ids`` in batches that have none and warned on
      every step.
    """
    from trl import GRPOTrainer

    class CountedGRPOTrainer(GRPOTrainer):
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

            samples = newest_samples(self._logs, self.reward_weights.tolist(), self.state.global_step)
            key = [(sample["prompt"], sample["completion"]) for sample in samples]
            if samples and key != getattr(self, "_written", None):  # a generation serves several steps
                self._written = key
                append_completions(Path(self.args.output_dir).parent, samples)

    return CountedGRPOTrainer


SAMPLES_PER_LOG = 16


def newest_samples(logs: dict[str, Any], weights: list[float], step: int) -> list[dict[str, Any]]:
    """The first SAMPLES_PER_LOG answers of the newest generation in TRL's ``_logs``, as completions.jsonl lines."""
    import math
    import time

    from engine.training.rewards import completion_text

    prompts, completions = list(logs["prompt"]), list(logs["completion"])
    scores = {name: list(values) for name, values in logs["rewards"].items()}
    advantages = list(logs["advantages"])
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
