"""The chat worker process (``python -m engine chat-worker``): one model, replies streamed as JSON lines.

Requests arrive on stdin, one JSON object a line:
``{"op": "generate", "id": N, "messages": [...], "sampling": {...}, "adapter": true}`` (a user message may carry
``"images": [path, ...]`` for a vision-language model: engine.chat.images),
``{"op": "cancel", "id": N}`` and ``{"op": "unload"}`` (the process exits; so does it at the end of stdin,
which is how it follows a parent that died). Events go to stdout: ``progress`` and then ``ready`` (or
``error``) while loading; ``token`` (a text delta) and then ``done`` (or ``error``) for each reply.

Replies run one at a time in a thread, so stdin is read (and a cancel heard) while a reply is generated.
The worker is a guest on the machine: it lowers its priority, and uses a single torch thread while a
training run of the workspace is active (else only the cores that are idle).
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import IO, Any

from engine.chat.images import (
    ImageRefused,
    canonical_messages,
    chat_images,
    text_only_refusal,
    vision_conversation,
    without_images,
)
from engine.chat.spec import (
    ChatError,
    ModelSpec,
    ResolvedModel,
    SamplingParams,
    max_message_chars,
    resolve_model,
    too_long,
)

NICENESS = 10  # below the studio and any training, which must never wait for a chat reply


class Channel:
    """The protocol's output: whole JSON lines on a private copy of stdout, one writer at a time.

    Libraries print to stdout (warnings, progress bars); fd 1 is pointed at stderr so none of it can break a
    line of the protocol.
    """

    def __init__(self) -> None:
        self._out: IO[str] = os.fdopen(os.dup(1), "w", encoding="utf-8")
        os.dup2(2, 1)
        sys.stdout = sys.stderr
        self._lock = threading.Lock()

    def emit(self, event: str, **fields: Any) -> None:
        with self._lock:
            try:
                self._out.write(json.dumps({"event": event, **fields}) + "\n")
                self._out.flush()
            except (BrokenPipeError, ValueError):
                os._exit(0)  # the parent is gone: nobody is listening


class DeltaStreamer:
    """A transformers streamer that sends each new piece of text as soon as it decodes cleanly.

    The whole reply is decoded every time (the cost is small next to a forward pass) and only the new suffix
    is sent, so the deltas always add up to exactly ``decode(reply_tokens)``. A trailing U+FFFD means a
    character split across tokens: it is held back until its last byte arrives.
    """

    def __init__(self, tokenizer: Any, send: Callable[[str], None]):
        self.tokenizer, self.send = tokenizer, send
        self.tokens: list[int] = []
        self.sent = ""
        self._prompt_seen = False

    def put(self, value: Any) -> None:
        if not self._prompt_seen:  # generate() first hands over the prompt
            self._prompt_seen = True
            return
        self.tokens.extend(value.reshape(-1).tolist())
        self._flush(final=False)

    def end(self) -> None:
        self._flush(final=True)

    def _flush(self, final: bool) -> None:
        text = self.tokenizer.decode(self.tokens, skip_special_tokens=True)
        if not final and text.endswith("\ufffd"):
            return
        if text.startswith(self.sent) and len(text) > len(self.sent):
            self.send(text[len(self.sent) :])
            self.sent = text


class Model:
    """The loaded model and tokenizer (a vision-language model's processor), and how to turn a conversation into a
    prompt that fits."""

    def __init__(self, resolved: ResolvedModel, progress: Callable[[float, str], None]):
        from engine.data.tokenize import resolve_chat_template
        from engine.training.hardware import detect_hardware, resolve_device
        from engine.training.modality import is_vision_model
        from engine.training.modeling import load_model, load_tokenizer
        from engine.training.vision import text_tokenizer

        config, hardware = resolved.config, detect_hardware()
        source = _with_model_path(config, resolved.weights, resolved.is_adapter)
        where = source.model.name_or_path
        self.vision = is_vision_model(config)  # it reads images: its processor renders the prompt
        self.max_pixels = config.vision.max_pixels  # a chat's images are scaled down as the run's were
        progress(0.35, "loading the tokenizer")
        with _stage(f"the tokenizer of {where}"):
            self.processor = load_tokenizer(source)  # a vision-language model's processor, else the tokenizer
        self.tokenizer = text_tokenizer(self.processor)
        # The template training used (data.chat_template, else the tokenizer's own, else the engine's default):
        # a fine-tuned model answers well only to turns formatted the way it learned them.
        self.template = resolve_chat_template(self.processor, config.data.chat_template)
        # A template from the config is the user's: it rendered the training rows within its budget, but a visitor's
        # message is new text (a template can loop on a trigger word), so each conversation is rendered first in
        # the template guard's child. The tokenizer's own template is trusted, as everywhere.
        self.guarded = config.data.chat_template is not None
        progress(0.5, "loading the weights")
        with _stage(f"the weights of {where}"):
            self.model = load_model(source, hardware)
        if resolved.is_adapter and resolved.weights is not None:
            progress(0.8, "loading the adapter")
            from peft import PeftModel

            with _stage(f"the adapter in {resolved.weights}"):
                self.model = PeftModel.from_pretrained(self.model, str(resolved.weights))
        if config.quantization.mode == "none" and resolve_device(config, hardware) == "cuda":
            self.model.to("cuda")
        self.model.eval()
        self.is_adapter = resolved.is_adapter
        text_config = self.model.config.get_text_config()  # a vision-language model's context is its language model's
        self.context_length = getattr(text_config, "max_position_embeddings", None)
        self.max_chars = max_message_chars(self.context_length, longest_token(self.tokenizer))

    def prompt(
        self, messages: list[dict[str, Any]], max_new_tokens: int, tools: list[dict[str, Any]] | None = None
    ) -> tuple[dict[str, Any], int, int]:
        """The model's inputs for the conversation (token ids with the ``tools`` it may call, and for a
        vision-language model its turns' images as pixel values), the reply budget, and how many early turns were
        left out.

        The oldest user / assistant turns go first, a pair at a time (the system prompt stays), until prompt plus
        reply fit the model's context; a last message too long on its own is an error. The fewest turns to leave
        out are found by bisection (fewer turns never make a longer prompt): a long conversation is rendered a
        handful of times, not once for every pair it loses (801 turns took 58 s that way:
        benchmarks/chat_long_conversation.py).
        """
        conversation = self._conversation(messages)
        system = conversation[:1] if conversation[0]["role"] == "system" else []
        turns = conversation[len(system) :]
        if self.guarded:
            self._probe(self._as_text(messages), tools)
        self._check_length(system + turns[-1:], tools)
        limit = self.context_length

        def render(cut: int) -> dict[str, Any]:
            return self.processor.apply_chat_template(
                system + turns[cut:],
                tools=tools,
                chat_template=self.template,
                add_generation_prompt=True,
                tokenize=True,
                return_tensors="pt",
                return_dict=True,
            )

        cuts = pair_cuts(len(turns))
        low, high, rendered = 0, len(cuts) - 1, {}  # the last cut (the last message alone) is taken whatever it gives
        while low < high and limit is not None:
            middle = (low + high) // 2
            rendered[middle] = render(cuts[middle])
            if rendered[middle]["input_ids"].shape[1] + max_new_tokens <= limit:
                high = middle
            else:
                low = middle + 1
        inputs = rendered[low] if low in rendered else render(cuts[low])
        prompt_length = inputs["input_ids"].shape[1]
        budget = max_new_tokens if limit is None else min(max_new_tokens, limit - prompt_length)
        if budget < 1:
            raise too_long(limit)
        return self._on_device(inputs), budget, cuts[low]

    def _check_length(self, shortest: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> None:
        """ChatError when the shortest prompt the conversation allows (system prompt, last message, tools), rendered
        as text, holds more characters than the context could hold: refused before tokenizing it, which takes
        seconds over megabytes (tools above all, which the client cannot measure as the template renders them)."""
        if self.max_chars is None:
            return
        text = self.processor.apply_chat_template(
            shortest, tools=tools, chat_template=self.template, add_generation_prompt=True, tokenize=False
        )
        if len(text) > self.max_chars:
            raise too_long(self.context_length)

    def _conversation(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The turns as the processing class renders them: for a vision-language model content parts holding the
        images (checked, then read: engine.chat.images); a text model refuses images. ChatError says why."""
        try:
            if self.vision:
                image_tokens = [getattr(self.processor, "image_token", None) or ""]
                return vision_conversation(messages, self.max_pixels, image_tokens)
            if chat_images(messages):
                raise ChatError(text_only_refusal("the loaded model"))
        except ImageRefused as exc:
            raise ChatError(str(exc)) from None
        return without_images(messages)

    def _as_text(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The turns as text, each image its placeholder (what the template guard renders)."""
        return canonical_messages(messages) if self.vision else without_images(messages)

    def _on_device(self, inputs: Any) -> dict[str, Any]:
        """The inputs on the model's device, pixel values in the model's float type."""
        import torch

        moved = {}
        for name, value in inputs.items():
            value = value.to(self.model.device)
            moved[name] = value.to(self.model.dtype) if torch.is_floating_point(value) else value
        return moved

    def _probe(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> None:
        """Render the conversation with the configured template in a child under the check's budget and memory
        cap (engine.data.template_guard); ChatError with the guard's reason when it is refused."""
        from engine.data.errors import DataError
        from engine.data.template_guard import Conversation, probe_template, special_tokens_of

        conversation = Conversation("the conversation", 1, messages, tools=tools)
        try:
            probe_template(
                self.template,
                [conversation],
                special_tokens_of(self.tokenizer),
                completion_only_loss=False,
                generation_prompt=True,
            )
        except DataError as exc:
            raise ChatError(str(exc)) from None


@contextlib.contextmanager
def _stage(what: str) -> Iterator[None]:
    """Say which step of loading failed, and where: library messages alone rarely name the directory."""
    try:
        yield
    except Exception as exc:
        raise ChatError(f"could not load {what}: {_describe(exc)}") from exc


def _with_model_path(config: Any, weights: Path | None, is_adapter: bool) -> Any:
    """The config, pointed at the trained whole model when there is one (an adapter loads on the base)."""
    if weights is None or is_adapter:
        return config
    return config.model_copy(update={"model": config.model.model_copy(update={"name_or_path": str(weights)})})


class Replier:
    """Generates the replies, one at a time, in a thread of its own."""

    def __init__(self, model: Model, channel: Channel, workspace: Path | None):
        self.model, self.channel, self.workspace = model, channel, workspace
        self.requests: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.cancelled: set[int] = set()  # ids of replies to end (or never start); read by the generate loop
        self.closing = threading.Event()
        import torch

        self.default_threads = torch.get_num_threads()
        self.thread = threading.Thread(target=self._serve, daemon=True, name="chat-replies")
        self.thread.start()

    def _serve(self) -> None:
        while (request := self.requests.get()) is not None and not self.closing.is_set():
            try:
                self._reply(request)
            except Exception as exc:  # one bad request must not end the worker
                traceback.print_exc()
                self.channel.emit("error", id=request.get("id"), message=_describe(exc))

    def _threads(self) -> int:
        """One thread while a training run is active (it keeps its cores); else only the cores that are idle.

        A niced process with several threads on a busy CPU is the worst case: its threads wait on each other at
        every barrier while the scheduler favours everyone else (measured: 120 tokens of the demo model took
        48 s on two threads of a loaded 2-core machine, 0.7 s on one).
        """
        from engine.runs.status import active_runs

        if self.workspace is not None and active_runs(self.workspace):
            return 1
        idle = (os.cpu_count() or 1) - int(os.getloadavg()[0])
        return max(1, min(self.default_threads, idle))

    def _reply(self, request: dict[str, Any]) -> None:
        import torch
        from transformers import StoppingCriteriaList

        request_id = request["id"]
        if request_id in self.cancelled:
            self.channel.emit("done", id=request_id, reason="cancelled", tokens=0, dropped=0)
            return
        sampling = SamplingParams.model_validate(request["sampling"])
        if not request.get("adapter", True) and not self.model.is_adapter:
            raise ChatError("the loaded model has no adapter to switch off")
        threads = self._threads()
        torch.set_num_threads(threads)
        inputs, budget, dropped = self.model.prompt(request["messages"], sampling.max_new_tokens, request.get("tools"))
        ids = inputs["input_ids"]
        cancelled, closing = self.cancelled, self.closing
        stop = stop_when(lambda: request_id in cancelled or closing.is_set())
        send = partial(self.channel.emit, "token", id=request_id)
        streamer = DeltaStreamer(self.model.tokenizer, lambda text: send(text=text))
        off = self.model.model.disable_adapter() if not request.get("adapter", True) else contextlib.nullcontext()
        if sampling.seed is not None:
            torch.manual_seed(sampling.seed)
        with torch.inference_mode(), off:
            output = self.model.model.generate(
                **inputs,
                streamer=streamer,
                stopping_criteria=StoppingCriteriaList([stop]),
                **_generation_kwargs(sampling, budget, self.model.tokenizer),
            )
        tokens = output.shape[1] - ids.shape[1]
        reason = "cancelled" if request_id in cancelled else "length" if tokens >= budget else "stop"
        prompt = int(ids.shape[1])  # what the model read: the template's render, tools included
        self.channel.emit(
            "done", id=request_id, reason=reason, tokens=tokens, dropped=dropped, threads=threads, prompt_tokens=prompt
        )


def stop_when(stopped: Callable[[], bool]) -> Any:
    """A generate() stopping criterion that ends every row once ``stopped()`` says so (a cancelled reply, a closing
    worker). Its answer lies on the ids' device: generate() ORs it with its own flags there, and a CPU answer beside
    a model on CUDA is an error (it was, on the first GPU run of Chat)."""
    import torch
    from transformers import StoppingCriteria

    class Stop(StoppingCriteria):
        def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
            return torch.full((input_ids.shape[0],), stopped(), dtype=torch.bool, device=input_ids.device)

    return Stop()


def _generation_kwargs(sampling: SamplingParams, budget: int, tokenizer: Any) -> dict[str, Any]:
    """generate() arguments: greedy at temperature 0 (sampling knobs left out so none is silently ignored)."""
    kwargs: dict[str, Any] = {
        "max_new_tokens": budget,
        "do_sample": not sampling.greedy,
        "repetition_penalty": sampling.repetition_penalty,
        "pad_token_id": tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id,
    }
    if not sampling.greedy:
        kwargs |= {"temperature": sampling.temperature, "top_p": sampling.top_p, "top_k": 0}
    return kwargs


def _describe(exc: Exception) -> str:
    """A ChatError is already written for people; anything else keeps its type name as a clue."""
    return str(exc) if isinstance(exc, ChatError) else f"{type(exc).__name__}: {exc}"


def pair_cuts(turns: int) -> list[int]:
    """How many of a conversation's ``turns`` may be left out from its start, fewest first: whole user / assistant
    pairs, then all but the last message."""
    cuts = list(range(0, turns, 2))
    return cuts if cuts[-1] == turns - 1 else [*cuts, turns - 1]


def longest_token(tokenizer: Any) -> int:
    """The characters of the tokenizer's longest token as its vocabulary spells it (added tokens included; a
    byte-level tokenizer spells each byte as one character)."""
    return max(map(len, tokenizer.get_vocab()), default=1)


def _load(spec: ModelSpec, channel: Channel) -> Model:
    started = time.monotonic()
    resolved = resolve_model(spec)
    channel.emit("progress", fraction=0.1, message="importing torch and transformers")
    model = Model(resolved, lambda fraction, message: channel.emit("progress", fraction=fraction, message=message))
    channel.emit(
        "ready",
        info={
            "label": resolved.label,
            "is_adapter": resolved.is_adapter,
            "parameters": sum(p.numel() for p in model.model.parameters()),
            "device": str(model.model.device),
            "context_length": model.context_length,
            "seconds": round(time.monotonic() - started, 2),
            "pid": os.getpid(),
            "vision": model.vision,
            "max_message_chars": model.max_chars,
        },
    )
    return model


def serve(spec: ModelSpec, workspace: Path | None = None) -> int:
    """Load the model for ``spec`` and answer requests from stdin until unload or end of input."""
    channel = Channel()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl+C in the studio's terminal is the studio's to handle
    # A hang-up ends it: how the warm fork server says the process that started it died (engine.store.fork_server).
    # Set, not inherited: a studio started under nohup would pass on an ignored SIGHUP and keep an orphan alive.
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    with contextlib.suppress(OSError):
        os.nice(NICENESS)
    try:
        replier = Replier(_load(spec, channel), channel, workspace)
    except Exception as exc:
        traceback.print_exc()  # the whole story goes to the log; the event carries the gist
        channel.emit("error", message=_describe(exc))
        return 1
    for line in sys.stdin:
        try:
            request = json.loads(line)
        except json.JSONDecodeError:
            continue  # only the client writes here; a broken line is dropped rather than ending the model
        if request.get("op") == "generate":
            replier.requests.put(request)
        elif request.get("op") == "cancel":
            replier.cancelled.add(request.get("id"))
        elif request.get("op") == "unload":
            break
    replier.closing.set()  # a reply still running ends at its next token
    replier.requests.put(None)
    replier.thread.join(10)
    return 0
