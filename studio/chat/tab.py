"""The Chat tab: talk to the base model, a run's final adapter or any checkpoint, or to both side by side.

The model runs in a chat worker process (engine.chat.client), never in the studio: replies stream in without
blocking the page, a training run keeps its cores, and Unload frees the memory. One worker serves the whole
studio, so a loaded model survives a page refresh; a new message stops a reply still running. In demo mode a
run's model is loaded for the visitor who picked it (studio.chat.models): another visitor is told only that someone
else's model is in use, and cannot chat with it, stop it or unload it; the bundled base model is open to all.
The sampling widgets are built from ``engine.chat.client.SamplingParams`` (bounds, help text, validation).
"""

from __future__ import annotations

import html
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gradio as gr

from engine.chat.client import ChatClient, ChatError, SamplingParams
from engine.config import ConfigError
from studio import lanes
from studio.chat.models import caller_of, holder_for, model_choices, spec_for
from studio.context import StudioContext
from studio.demo.policy import NORMAL, DemoPolicy
from studio.form.schema import FieldSpec, leaf_specs, values_to_config
from studio.markup import bold, message_html, progress_bar_html

MODES = ("Chat", "Side by side")
SAMPLING = sorted(leaf_specs(SamplingParams), key=lambda spec: spec.advanced)  # the widgets' order
OTHERS_MODEL = "another visitor's model is in use"
CHAT_HEIGHT = 380  # pixels: with the model row, a note and the message box, it fits a 1366x768 screen
STREAM_INTERVAL = 0.05  # seconds between page updates while a reply streams: smooth, without a message per token
Conversation = list[dict[str, str]]


# --- status line --------------------------------------------------------------------------------------------


def status_html(client: ChatClient, caller: str | None = None) -> str:
    """What is loaded (or loading), in one line; for a caller who may not use it, only that it is not theirs."""
    if not client.may_use(caller):
        return message_html(
            [f"No model loaded for you ({OTHERS_MODEL}). Pick one and press ", bold("Load"), "."], "warn"
        )
    if client.loading is not None:
        return _progress_html(client.loading.fraction, client.loading.message)
    info = client.info
    if info is None:
        return message_html(["No model loaded. Pick one and press ", bold("Load"), "."], "warn")
    facts = [f"{info.parameters / 1e6:,.1f}M parameters", info.device, f"loaded in {info.seconds:.1f} s"]
    if info.context_length:
        facts.insert(2, f"context {info.context_length} tokens")
    side = " · side by side available" if info.is_adapter else ""
    return message_html([bold("Loaded:"), f" {info.label} — {' · '.join(facts)}{side}"], "ok")


def _progress_html(fraction: float, message: str) -> str:
    percent = max(0, min(100, round(100 * fraction)))
    text = f"<span>Loading… {html.escape(message)}</span><b>{percent}%</b>"
    return progress_bar_html(percent, text, "ts-chat-loading")


# --- handlers -----------------------------------------------------------------------------------------------


def load_clicked(
    client: ChatClient, workspace: Path, key: str | None, policy: DemoPolicy = NORMAL, visitor: str | None = None
) -> Iterator[str]:
    """Load the picked model, yielding the status line as loading goes on. Only what the list offers loads:
    a key is never taken as a path to anything else on this machine. It replaces whatever model is loaded (one
    worker serves the studio); in demo mode a run's model then serves this visitor only, and a failure names the
    run's files as the visitor knows them (``workspace/runs/...``), not by the server's paths."""
    caller = caller_of(policy, visitor)
    try:
        if key and key not in {value for _, value in model_choices(workspace, policy, visitor)}:
            raise ChatError("that model is not in the list (any more); press ↻ and pick again")
        spec = spec_for(workspace, key)
        for _ in client.load(spec, owner=holder_for(spec, caller)):
            yield status_html(client, caller)
    except ChatError as exc:
        yield message_html(f"Could not load: {policy.shown(str(exc), workspace)}", "error")
        return
    yield status_html(client, caller)


def unload_clicked(client: ChatClient, caller: str | None = None) -> str:
    """Unload the model (its process exits, so its memory is freed); never another visitor's."""
    if not client.may_use(caller):
        return message_html(f"Nothing of yours to unload ({OTHERS_MODEL}).", "warn")
    if client.pid is None and client.loading is None:
        return message_html("No model is loaded.", "warn")
    if not client.unload_for(caller):  # someone else's model was loaded since the check above
        return message_html(f"Nothing of yours to unload ({OTHERS_MODEL}).", "warn")
    return message_html("Unloaded: the model's memory is free again.", "ok")


def stop_clicked(client: ChatClient, caller: str | None = None) -> None:
    """End the reply being generated (never another visitor's); what was written so far stays."""
    client.stop(caller)


def parse_sampling_widgets(values: list[Any]) -> SamplingParams:
    """SamplingParams from the widget values (in SAMPLING order); ConfigError names the bad fields."""
    return values_to_config({spec.path: value for spec, value in zip(SAMPLING, values, strict=True)}, SamplingParams)


def _conversation(system: str, history: Conversation) -> Conversation:
    return ([{"role": "system", "content": system.strip()}] if system.strip() else []) + history


def _stream(
    client: ChatClient,
    system: str,
    history: Conversation,
    sampling: SamplingParams,
    adapter: bool,
    caller: str | None = None,
) -> Iterator[None]:
    """Append the assistant's reply to ``history`` as it streams; yields after each batch of deltas."""
    prompt = _conversation(system, history)
    history.append({"role": "assistant", "content": ""})
    text, shown = "", time.monotonic()
    for delta in client.generate(prompt, sampling, use_adapter=adapter, caller=caller):
        text += delta
        history[-1]["content"] = text.lstrip()  # a tokenizer may start the reply with a space
        if time.monotonic() - shown >= STREAM_INTERVAL:
            shown = time.monotonic()
            yield
    yield


def _finish_note(client: ChatClient) -> str:
    finish = client.last_finish
    parts = {"cancelled": "Stopped.", "length": "Reached the token limit."}.get(finish.get("reason"), "")
    if finish.get("dropped"):
        parts += f" {finish['dropped']} early messages were left out to fit the model's context."
    return message_html(parts.strip(), "warn")


def respond(
    client: ChatClient,
    text: str,
    system: str,
    mode: str,
    histories: dict[str, Conversation],
    *sampling_values: Any,
    caller: str | None = None,
) -> Iterator[list[Any]]:
    """Send ``text``; yield [chat, base, tuned, histories, textbox, note] as the reply (or replies) stream in.

    Side by side answers with the adapter switched off (the base model) on the left, then on the right. Only a
    model ``caller`` may use answers (``caller_of``: in demo mode, not another visitor's).
    """
    histories = {name: list(turns) for name, turns in (histories or {}).items()}
    chat, base, tuned = (histories.setdefault(name, []) for name in ("chat", "base", "tuned"))

    def view(textbox: Any = None, note: Any = None) -> list[Any]:
        """The outputs; None leaves the text box or the note as it is."""
        keep = [gr.skip() if value is None else value for value in (textbox, note)]
        # Copies: the reply's message is edited in place as it streams, each yield must be a snapshot.
        return [[dict(turn) for turn in turns] for turns in (chat, base, tuned)] + [histories, *keep]

    problem = _refusal(client, text, mode, caller)
    try:
        sampling = parse_sampling_widgets(list(sampling_values))
    except ConfigError as exc:
        problem = problem or "Fix the sampling settings: " + "; ".join(map(str, exc.problems))
    if problem:
        yield view(note=message_html(problem, "warn"))
        return
    targets = [(chat, True)] if mode != "Side by side" else [(base, False), (tuned, True)]
    for history, _ in targets:
        history.append({"role": "user", "content": text.strip()})
    yield view("", "")
    try:
        for history, adapter in targets:
            for _ in _stream(client, system, history, sampling, adapter, caller):
                yield view()
            if client.last_finish.get("reason") == "cancelled":
                break  # Stop ends the whole exchange, not only the left reply
    except ChatError as exc:
        for history, _ in targets:  # an empty reply would be sent back to the model as if it had said nothing
            if history[-1]["role"] == "assistant" and not history[-1]["content"]:
                history.pop()
        yield view(note=message_html(f"The reply failed: {exc}", "error"))
        return
    yield view(note=_finish_note(client))


def _refusal(client: ChatClient, text: str, mode: str, caller: str | None = None) -> str | None:
    """Why a message cannot be sent now, or None."""
    if not text or not text.strip():
        return "Type a message first."
    if not client.may_use(caller):
        return f"Load a model first ({OTHERS_MODEL}): pick one above and press Load."
    if client.info is None:
        return "Load a model first (pick one above and press Load)."
    if mode == "Side by side" and not client.info.is_adapter:
        return "Side by side compares the base with a fine-tuned adapter: load a LoRA run or checkpoint."
    return None


def clear_clicked() -> list[Any]:
    """Empty every conversation."""
    return [[], [], [], {}, ""]


# --- layout -------------------------------------------------------------------------------------------------


def _sampling_widget(spec: FieldSpec) -> gr.components.Component:
    """A slider for a bounded number; a text box for the optional seed (empty means a new draw)."""
    if spec.text_number:
        return gr.Textbox(label=spec.label, info=spec.help, placeholder="empty: random", max_lines=1)
    step = 1 if spec.kind == "int" else 0.05
    low = spec.minimum + step if spec.exclusive[0] else spec.minimum
    return gr.Slider(low, spec.maximum, value=spec.default, step=step, label=spec.label, info=spec.help)


class ChatTab:
    """The Chat tab's components and events; one chat worker for the whole studio."""

    def __init__(self, ctx: StudioContext, client: ChatClient | None = None):
        self.ctx, self.workspace = ctx, ctx.workspace
        self.client = client or ChatClient(ctx.workspace)
        self.histories = gr.State({})
        with gr.Row(equal_height=True, elem_id="ts-chat-head"):
            choices = model_choices(self.workspace, ctx.policy)  # a visitor's runs join when the tab opens
            self.model = gr.Dropdown(
                choices=choices,
                value=choices[0][1],
                show_label=False,
                container=False,
                scale=5,
                elem_id="ts-chat-model",
            )
            self.refresh = gr.Button("↻", scale=0, min_width=46, elem_id="ts-chat-refresh")
            self.load = gr.Button("Load", variant="primary", scale=0, min_width=100, elem_id="ts-chat-load")
            self.unload = gr.Button("Unload", scale=0, min_width=100, elem_id="ts-chat-unload")
            self.mode = gr.Radio(
                list(MODES),
                value=MODES[0],
                show_label=False,
                container=False,
                scale=0,
                min_width=250,
                elem_id="ts-chat-mode",
            )
        policy = ctx.policy
        self.status = gr.HTML(elem_classes="ts-html", elem_id="ts-chat-status")
        # Per visitor: shown on page load and whenever the visitor id arrives (gr.on with no triggers runs at load
        # and on a change of its inputs). Not a callable value: Gradio would publish that load event in the API.
        gr.on(
            None,
            lambda who: status_html(self.client, caller_of(policy, who)),
            [ctx.visitor],
            self.status,
            show_progress="hidden",
            api_visibility="private",
        )
        with gr.Row(equal_height=False):
            with gr.Column(scale=3, elem_id="ts-chat-main"):
                self._conversation_view()
            with gr.Column(scale=1, min_width=320, elem_id="ts-chat-settings"):
                self.system = gr.Textbox(
                    label="System prompt", lines=2, max_lines=6, placeholder="optional", elem_id="ts-chat-system"
                )
                self.sampling = [_sampling_widget(spec) for spec in SAMPLING if not spec.advanced]
                with gr.Accordion("More sampling", open=False):
                    self.sampling += [_sampling_widget(spec) for spec in SAMPLING if spec.advanced]
        self._wire()

    def _conversation_view(self) -> None:
        self.chatbot = gr.Chatbot(show_label=False, height=CHAT_HEIGHT, elem_id="ts-chatbot", buttons=["copy"])
        with gr.Row(visible=False, elem_id="ts-chat-side") as self.side_row:
            self.base_bot = gr.Chatbot(label="Base model", height=CHAT_HEIGHT, elem_id="ts-chatbot-base")
            self.tuned_bot = gr.Chatbot(label="Fine-tuned", height=CHAT_HEIGHT, elem_id="ts-chatbot-tuned")
        self.note = gr.HTML(elem_classes="ts-html", elem_id="ts-chat-note")  # above the box: always in view
        with gr.Row(equal_height=True, elem_id="ts-chat-compose"):
            self.text = gr.Textbox(
                placeholder="Type a message and press Enter",
                show_label=False,
                container=False,
                scale=5,
                elem_id="ts-chat-input",
            )
            self.send = gr.Button("Send", variant="primary", scale=0, min_width=88, elem_id="ts-chat-send")
            self.stop = gr.Button("Stop", variant="stop", scale=0, min_width=88, elem_id="ts-chat-stop")
            self.clear = gr.Button("Clear", scale=0, min_width=88, elem_id="ts-chat-clear")

    def _wire(self) -> None:
        private: dict[str, Any] = {"api_visibility": "private"}
        client, workspace = self.client, self.workspace
        policy, visitor = self.ctx.policy, self.ctx.visitor
        relist = {
            "fn": lambda key, who: _relisted(key, model_choices(workspace, policy, who)),
            "inputs": [self.model, visitor],
            "outputs": [self.model],
            "show_progress": "hidden",
            **private,
        }
        self.refresh.click(**relist)
        if self.ctx.tabs is not None:  # runs finish and checkpoints appear while the tab is hidden
            self.ctx.tabs.change(**relist)
            # ... and another visitor may have loaded a model meanwhile (one worker serves the studio)
            self.ctx.tabs.change(
                lambda who: status_html(client, caller_of(policy, who)),
                [visitor],
                [self.status],
                show_progress="hidden",
                **private,
            )

        def load(key: str | None, who: str | None) -> Iterator[str]:
            yield from load_clicked(client, workspace, key, policy, who)

        def send(who: str | None, *values: Any) -> Iterator[list[Any]]:
            for outputs in respond(client, *values, caller=caller_of(policy, who)):
                # The note says why a reply failed (the worker's error may name its files); the replies stay as written.
                yield [*outputs[:-1], policy.shown(outputs[-1], workspace)]

        self.load.click(load, [self.model, visitor], [self.status], **private, **lanes.NO_LANE)
        self.unload.click(
            lambda who: unload_clicked(client, caller_of(policy, who)),
            [visitor],
            [self.status],
            **private,
            **lanes.NO_LANE,
        )
        self.mode.change(
            lambda mode: [gr.Chatbot(visible=mode != "Side by side"), gr.Row(visible=mode == "Side by side")],
            [self.mode],
            [self.chatbot, self.side_row],
            **private,
        )
        outputs = [self.chatbot, self.base_bot, self.tuned_bot, self.histories, self.text, self.note]
        gr.on(
            [self.send.click, self.text.submit],
            send,
            [visitor, self.text, self.system, self.mode, self.histories, *self.sampling],
            outputs,
            show_progress="minimal",
            **private,
            **lanes.NO_LANE,
        )
        # Stop reaches the worker directly; the streaming handler then ends by itself with the partial reply kept.
        self.stop.click(
            lambda who: stop_clicked(client, caller_of(policy, who)), [visitor], None, concurrency_limit=None, **private
        )
        self.clear.click(clear_clicked, None, outputs[:5], **private)


def _relisted(key: str | None, choices: list[tuple[str, str]]) -> dict[str, Any]:
    """The picker with new choices. Its value is left alone while the pick is still offered: ``key`` is the pick
    when the refresh was asked (on opening the tab), and one made since, before this answer arrives on a busy
    machine, must not be undone. A pick no longer offered (a run deleted) falls back to the first choice."""
    if key in {value for _, value in choices}:
        return gr.update(choices=choices)
    return gr.update(choices=choices, value=choices[0][1])


def build_chat_tab(ctx: StudioContext) -> ChatTab:
    """Build the Chat tab inside the current ``gr.Tab``."""
    return ChatTab(ctx)
