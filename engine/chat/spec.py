"""What a chat is about, apart from the process that holds the model: the sampling parameters, which model to load
(``ModelSpec`` resolved against the disk), what the worker reports of it, and the checks on a conversation and
its tools. The worker (engine.chat.worker) imports this and not the client; standard library and config only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from engine.config import ConfigError, RunConfig, load_config, parse_config
from engine.config.schema import advanced
from engine.config.schema.errors import problems_from_validation
from engine.data.tools import parse_tools, tools_problems
from engine.store.paths import find_local_path
from engine.store.rundir import (
    CONFIG_FILE,
    checkpoint_path,
    checkpoint_steps,
    has_weights,
    read_status,
    result_dir,
)
from engine.training.methods import method_of

ROLES = ("system", "user", "assistant")


class ChatError(RuntimeError):
    """Chat cannot go on: a model that cannot be found or loaded, a bad conversation, a worker that died."""


class SamplingParams(BaseModel):
    """How a reply is drawn. Bounds and descriptions serve as validation and as the studio's help text; the
    ``advanced`` fields are folded away in the studio."""

    model_config = ConfigDict(extra="forbid")

    temperature: float = Field(0.7, ge=0, le=2, description="0: always the likeliest token (greedy); higher: varied.")
    top_p: float = Field(0.9, gt=0, le=1, description="Sample among the likeliest tokens holding this probability.")
    max_new_tokens: int = Field(256, ge=1, le=4096, description="The longest reply, in tokens.")
    repetition_penalty: float = Field(
        1.0, ge=1, le=2, description="Above 1 discourages repeating tokens (1 = off).", json_schema_extra=advanced()
    )
    seed: int | None = Field(
        None,
        ge=0,
        le=2**32 - 1,
        description="The same seed gives the same reply; empty: random.",
        json_schema_extra=advanced(),
    )

    @property
    def greedy(self) -> bool:
        """Whether the reply is decoded greedily (temperature 0), so top-p and the seed play no part."""
        return self.temperature == 0


def parse_sampling(values: Mapping[str, Any]) -> SamplingParams:
    """Validated sampling parameters; a ConfigError naming each bad field (``top_p: must be <= 1``) otherwise."""
    try:
        return SamplingParams.model_validate(dict(values))
    except ValidationError as exc:
        raise ConfigError(problems_from_validation(exc, SamplingParams)) from None


@dataclass(frozen=True)
class ModelSpec:
    """What to chat with: a base model (``base``), or a run's final result, or its checkpoint ``checkpoint``."""

    base: str | None = None  # hub id or local directory of a base model (when no run is given)
    run_dir: Path | None = None
    checkpoint: int | None = None

    def to_args(self) -> list[str]:
        """The chat-worker command line arguments that name this spec."""
        args = ["--base", self.base] if self.base else []
        args += ["--run-dir", str(self.run_dir)] if self.run_dir is not None else []
        return args + (["--checkpoint", str(self.checkpoint)] if self.checkpoint is not None else [])


@dataclass(frozen=True)
class ResolvedModel:
    """A spec checked against the disk: which base to load and which trained weights go on top."""

    label: str  # for people: "Base · assets/demo-model", "demo-dates · checkpoint 10"
    config: RunConfig  # the run's config, or a default one naming the base: how to load it
    weights: Path | None  # the adapter or whole-model directory; None for a plain base model
    is_adapter: bool  # the weights are a peft adapter on top of the base

    @property
    def from_run(self) -> bool:
        """Whether the model comes from a run (so the run's chat template applies)."""
        return self.weights is not None


def resolve_model(spec: ModelSpec) -> ResolvedModel:
    """Check a spec against the disk, without loading anything; ChatError says what is missing and what to do."""
    if spec.run_dir is None:
        if not spec.base:
            raise ChatError("choose a base model or a run to chat with")
        if spec.checkpoint is not None:
            raise ChatError("a checkpoint belongs to a run: give the run directory too")
        if spec.base.startswith(("/", ".", "~")) and find_local_path(spec.base) is None:
            raise ChatError(f"no model at {spec.base}: there is no such directory (and it is not a hub id)")
        return ResolvedModel(f"Base · {spec.base}", parse_config({"model": {"name_or_path": spec.base}}), None, False)
    run_dir = Path(spec.run_dir).resolve()
    if not (run_dir / CONFIG_FILE).is_file():
        raise ChatError(f"no run at {run_dir} (it has no {CONFIG_FILE})")
    config = load_config(run_dir / CONFIG_FILE)
    name = config.name or run_dir.name
    method = method_of(config)
    if not method.model.generates:
        raise ChatError(f"{name} is a {method.title} run: its model scores answers and does not write any")
    is_adapter = config.adapter.is_lora
    steps = checkpoint_steps(run_dir)
    if spec.checkpoint is not None:
        if spec.checkpoint not in steps:
            have = ", ".join(map(str, steps)) or "none"
            raise ChatError(f"{name} has no checkpoint {spec.checkpoint} (its checkpoints: {have})")
        return ResolvedModel(
            f"{name} · checkpoint {spec.checkpoint}", config, checkpoint_path(run_dir, spec.checkpoint), is_adapter
        )
    final = result_dir(run_dir, is_adapter)
    if not has_weights(final):
        state = read_status(run_dir).state or "unknown"
        hint = f"pick one of its checkpoints ({', '.join(map(str, steps))})" if steps else "it has no checkpoint yet"
        raise ChatError(f"{name} has no final {final.name} yet (it is {state}); {hint}")
    return ResolvedModel(f"{name} · final {final.name}", config, final, is_adapter)


@dataclass(frozen=True)
class LoadProgress:
    """One step of loading: how far along (0 to 1) and what is happening."""

    fraction: float
    message: str


@dataclass(frozen=True)
class ModelInfo:
    """The loaded model, as the worker reports it once ready."""

    label: str
    is_adapter: bool  # a base + adapter: side by side with the base is possible
    parameters: int
    device: str
    context_length: int | None
    seconds: float  # how long loading took
    pid: int | None = None  # the process that holds the model (a warm fork's is not the process the client started)
    vision: bool = False  # it reads images (a vision-language model): a user turn may carry them (engine.chat.images)
    # The most characters a system prompt and the last message together may hold and still fit the context: more
    # are refused before they reach the worker (whose tokenizer would take seconds over megabytes); None: no bound.
    max_message_chars: int | None = None


# Characters per token above the longest token's own length, kept in hand for what a tokenizer's normalizer does.
CHARS_MARGIN = 2


def max_message_chars(context_length: int | None, longest_token: int) -> int | None:
    """How many characters a text can hold and still fit ``context_length`` tokens, for a tokenizer whose longest
    token spells ``longest_token`` characters (or bytes, for a byte-level one, which spell at least as many
    characters): each token covers at most that many, so a longer text needs more tokens than the context holds.
    With a margin (CHARS_MARGIN), since a normalizer may shorten a text before it is split."""
    return None if context_length is None else context_length * max(1, longest_token) * CHARS_MARGIN


def kept_chars(messages: list[dict[str, Any]]) -> int:
    """The characters of what a prompt always keeps (the worker drops the turns between when they do not fit): the
    system prompt and the last message."""
    system = messages[0]["content"] if messages[0].get("role") == "system" and len(messages) > 1 else ""
    return len(system) + len(messages[-1]["content"])


def too_long(context_length: int | None) -> ChatError:
    """The refusal of a message that cannot fit the model's context, wherever it is found."""
    return ChatError(f"the message is too long for the model's context of {context_length} tokens; shorten it")


# Always without progress bars (the worker's stderr is read back as its error), and one tokenizer thread.


def chat_tools(value: Any) -> list[dict[str, Any]] | None:
    """The tools a reply may call, as the chat template takes them (``tools=``): a JSON list (text or list) of
    function schemas, bare or wrapped in ``{"type": "function", "function": ...}``; None for none (empty text, an
    empty list). Raises ChatError saying what is wrong, as a training row's tools would be refused
    (engine.data.tools)."""
    problems = tools_problems(value, "tools")
    if problems:
        raise ChatError("; ".join(problems))
    return parse_tools(value) or None


def check_messages(messages: list[dict[str, Any]]) -> None:
    """A conversation the worker can format: known roles, text content, ending with the user's turn."""
    if not messages or messages[-1].get("role") != "user":
        raise ChatError("the conversation must end with a user message")
    for message in messages:
        if message.get("role") not in ROLES or not isinstance(message.get("content"), str):
            raise ChatError(f"each message needs a role ({', '.join(ROLES)}) and text content, not {message!r}")
