"""The reward functions of GRPO (method grpo): the built-ins and the user's own, in TRL's reward signature.

- ``reward_functions(specs, tokenizer)``: one function per RewardSpec for GRPOTrainer, each named for its metrics.
- ``reward_columns(spec)``: the data columns a reward reads.
- ``check_rewards(specs, rows, tokenizer, field)``: before launch, load each reward and score the first rows once.
- ``completion_text(completion)``: a completion's text, from a string or a message list.

A reward that fails while training raises RewardError naming the reward and the data row. Nothing here imports
torch or TRL at module level.
"""

from engine.training.rewards.check import check_rewards
from engine.training.rewards.functions import RewardError, reward_functions
from engine.training.rewards.scoring import completion_text, math_match_score, reward_columns

__all__ = [
    "RewardError",
    "check_rewards",
    "completion_text",
    "math_match_score",
    "reward_columns",
    "reward_functions",
]
