"""The concurrency lanes of the studio's slow Gradio events (docs/architecture.md, "Concurrency lanes").

Gradio 6 runs each event in a lane of its own that is one request wide (``concurrency_limit`` 1) and shared by
every visitor: while one request runs, the same event from every other page waits. That is harmless for an event
that takes milliseconds and a stall for one that takes seconds. The slow events therefore get a wider lane (one
visitor's request leaves room for others) whose every request is bounded in time (a chat template is probed in a
killable child with a time budget, engine.data.template_guard), or no lane at all when the request only waits on a
child process that serialises what must be serial itself (the chat worker).
"""

from __future__ import annotations

from typing import Any

# Requests of one slow event that run at once. More than one, so that a visitor's slow request leaves room for
# others; few, because each does CPU work (and may start a template child of up to 256 MiB) on a small machine.
SLOW_LANE_WIDTH = 4

# The dataset panel's checks (rows, then tokens and examples), from every trigger: one lane for all of them.
DATASET_CHECK: dict[str, Any] = {"concurrency_id": "dataset-check", "concurrency_limit": SLOW_LANE_WIDTH}
# Start validates the form and the dataset (the slow part) before a lock that lets one run start at a time.
START: dict[str, Any] = {"concurrency_id": "start", "concurrency_limit": SLOW_LANE_WIDTH}
# The estimate imports the training libraries once, loads the tokenizer and builds a weightless model.
ESTIMATE: dict[str, Any] = {"concurrency_id": "estimate", "concurrency_limit": SLOW_LANE_WIDTH}
# The reward check loads the data's first rows and calls each reward once (built-ins only in the demo; a regex has a
# time limit, engine.training.rewards.scoring).
REWARD_CHECK: dict[str, Any] = {"concurrency_id": "reward-check", "concurrency_limit": SLOW_LANE_WIDTH}
# Waiting on the chat worker: engine.chat.client lets a new load replace one under way, and keeps its own line of
# replies, first come first served, one place per caller (a new message takes the place of the caller's own before
# it; a model loaded for a visitor answers no one else), so a lane would only make others wait for nothing.
NO_LANE: dict[str, Any] = {"concurrency_limit": None}
