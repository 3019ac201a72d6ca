"""The Chat tab: talk to the base model, a run's final adapter or any checkpoint, or to both side by side.

The model runs in a chat worker process (engine.chat.client), never in the studio: replies stream in without
blocking the page, a training run keeps its cores, and Unload frees the memory. One worker serves the whole
studio, so a loaded model survives a page refresh; a new message stops a reply still running. In demo mode a
run's model is loaded for the visitor who picked it (studio.chat.models): another visitor is told only that someone
else's model is in use, and cannot chat with it, stop it or unload it; the bundled base model is open to all.
The sampling widgets are built from ``engine.chat.client.SamplingParams`` (bounds, help text, validation; their
words translated under ``sampling.<field>``, studio.i18n.catalog). What the server writes here (the status line,
the notes, the worker's loading steps) is in the page's language; the worker's errors stay as it wrote them.
"""

from __future__ import annotations

import html
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gradio as gr

from engine.api import ChatClient, ChatError, ConfigError, SamplingParams
from studio import lanes
from studio.chat.models import caller_of, holder_for, model_choices, shown_label, spec_for
from studio.context import StudioContext
from studio.demo.policy import NORMAL, DemoPolicy
from studio.form.schema import FieldSpec, leaf_specs
from studio.form.values import values_to_config
from studio.i18n import catalog
from studio.i18n.catalog import SOURCE, key, text
from studio.i18n.problems import translate_problem
from studio.i18n.widgets import request_language, schema_text, t
from studio.markup import bold, message_html, progress_bar_html

MODES = ("Chat", "Side by side")  # the mode radio's values (what the handlers compare)
MODE_WORDS = dict(zip(MODES, ("chat.mode.chat", "chat.mode.side"), strict=True))  # their labels' keys
SAMPLING = sorted(leaf_specs(SamplingParams), key=lambda spec: spec.advanced)  # the widgets' order
SAMPLING_ROOT = "sampling"  # the key prefix of the sampling fields' words (studio.i18n.catalog.SCHEMA_ROOTS)
LOAD = key("chat.load")  # the Load button's word, also where a message points at it
OTHERS_MODEL = key("chat.others_model")  # "another visitor's model is in use"
NO_MODEL, NO_MODEL_FOR_YOU = key("chat.status.none"), key("chat.status.none_for_you")
LOADED, LOADING = key("chat.status.loaded"), key("chat.status.loading")
PARAMETERS, CONTEXT, LOAD_TIME = key("chat.status.parameters"), key("chat.status.context"), key("chat.status.seconds")
SIDE_AVAILABLE = key("chat.status.side_available")
NOT_LISTED, PICK_FIRST, LOAD_FAILED = key("chat.error.not_listed"), key("chat.error.pick_first"), key("chat.error.load")
NOTHING_OF_YOURS, NOTHING_LOADED, UNLOADED = key("chat.unload.others"), key("chat.unload.none"), key("chat.unload.done")
STOPPED, TOKEN_LIMIT, DROPPED = key("chat.finish.stopped"), key("chat.finish.length"), key("chat.finish.dropped")
FIX_SAMPLING, REPLY_FAILED = key("chat.error.sampling"), key("chat.error.reply")
TYPE_FIRST, LOAD_FIRST_OTHERS, LOAD_FIRST = key("chat.refuse.empty"), key("chat.refuse.others"), key("chat.refuse.load")
SIDE_NEEDS_ADAPTER = key("chat.refuse.side")
# The steps the chat worker reports while it loads (engine.chat.client, engine.chat.worker), in its English.
LOADING_STEPS = [key(f"chat.loading.{step}") for step in ("process", "imports", "tokenizer", "weights", "adapter")]
CHAT_HEIGHT = 380  # pixels: with the model row, a note and the message box, it fits a 1366x768 screen
STREAM_INTERVAL = 0.05  # seconds between page updates while a reply streams: smooth, without a message per token
Conversation = list[dict[str, str]]


# --- status line --------------------------------------------------------------------------------------------


def _pointing_at_load(name: str, lang: str, **values: object) -> list[str]:
    """The message ``name`` (its ``{load}`` the Load button's word, in bold) as pieces for ``message_html``."""
    before, _, after = text(name, lang, load="{load}", **values).partition("{load}")
    return [before, bold(text(LOAD, lang)), after]


def status_html(client: ChatClient, caller: str | None = None, lang: str = SOURCE) -> str:
    """What is loaded (or loading), in one line in ``lang``; for a caller who may not use it, only that it is not
    theirs."""
    if not client.may_use(caller):
        return message_html(_pointing_at_load(NO_MODEL_FOR_YOU, lang, others=text(OTHERS_MODEL, lang)), "warn")
    if client.loading is not None:
        return _progress_html(client.loading.fraction, client.loading.message, lang)
    info = client.info
    if info is None:
        return message_html(_pointing_at_load(NO_MODEL, lang), "warn")
    facts = [
        text(PARAMETERS, lang, count=f"{info.parameters / 1e6:,.1f}"),
        info.device,
        text(LOAD_TIME, lang, seconds=f"{info.seconds:.1f}"),
    ]
    if info.context_length:
        facts.insert(2, text(CONTEXT, lang, tokens=info.context_length))
    side = f" · {text(SIDE_AVAILABLE, lang)}" if info.is_adapter else ""
    label = shown_label(info.label, lang)
    return message_html([bold(text(LOADED, lang)), f" {label} — {' · '.join(facts)}{side}"], "ok")


def loading_step(message: str, lang: str = SOURCE) -> str:
    """A step the chat worker reports while it loads (English) in ``lang``; one it does not know as it is."""

    def said_label(values: dict[str, str]) -> dict[str, str]:
        return {**values, "label": shown_label(values["label"], lang)} if "label" in values else values

    return catalog.say_again(message, LOADING_STEPS, lang, said_label)


def _progress_html(fraction: float, message: str, lang: str = SOURCE) -> str:
    """The loading bar; ``message`` is the chat worker's (English) step."""
    percent = max(0, min(100, round(100 * fraction)))
    step = loading_step(message, lang)
    line = f"<span>{html.escape(text(LOADING, lang))} {html.escape(step)}</span><b>{percent}%</b>"
    return progress_bar_html(percent, line, "ts-chat-loading")


# --- handlers -----------------------------------------------------------------------------------------------


def load_clicked(
    client: ChatClient,
    workspace: Path,
    key: str | None,
    policy: DemoPolicy = NORMAL,
    visitor: str | None = None,
    lang: str = SOURCE,
) -> Iterator[str]:
    """Load the picked model, yielding the status line as loading goes on. Only what the list offers loads:
    a key is never taken as a path to anything else on this machine. It replaces whatever model is loaded (one
    worker serves the studio); in demo mode a run's model then serves this visitor only, and a failure names the
    run's files as the visitor knows them (``workspace/runs/...``), not by the server's paths. Its lines are in
    ``lang`` (the worker's own error stays English)."""
    caller = caller_of(policy, visitor)
    try:
        if not key:
            raise ChatError(text(PICK_FIRST, lang))
        if key not in {value for _, value in model_choices(workspace, policy, visitor)}:
            raise ChatError(text(NOT_LISTED, lang))
        spec = spec_for(workspace, key)
        for _ in client.load(spec, owner=holder_for(spec, caller)):
            yield status_html(client, caller, lang)
    except ChatError as exc:
        yield message_html(text(LOAD_FAILED, lang, error=policy.shown(str(exc), workspace)), "error")
        return
    yield status_html(client, caller, lang)


def unload_clicked(client: ChatClient, caller: str | None = None, lang: str = SOURCE) -> str:
    """Unload the model (its process exits, so its memory is freed); never another visitor's."""
    others = message_html(text(NOTHING_OF_YOURS, lang, others=text(OTHERS_MODEL, lang)), "warn")
    if not client.may_use(caller):
        return others
    if client.pid is None and client.loading is None:
        return message_html(text(NOTHING_LOADED, lang), "warn")
    if not client.unload_for(caller):  # someone else's model was loaded since the check above
        return others
    return message_html(text(UNLOADED, lang), "ok")


def stop_clicked(client: ChatClient, caller: str | None = None) -> None:
    """End the reply being generated (never another visitor's); what was written so far stays."""
    client.stop(caller)


def parse_sampling_widgets(values: list[Any]) -> SamplingParams:
    """SamplingParams from the widget values (in SAMPLING order); ConfigError names the bad fields."""
    return values_to_config({spec.path: value for spec, value in zip(SAMPLING, values, strict=True)}, SamplingParams)


def sampling_problems(error: ConfigError, lang: str = SOURCE) -> str:
    """What is wrong with the sampling settings in ``lang``, each field by its label."""
    paths = {spec.path for spec in SAMPLING}

    def said(field: str, message: str) -> str:
        message = translate_problem(message, lang)
        where = text(f"{SAMPLING_ROOT}.{field}.label", lang) if field in paths else field
        return f"{where}: {message}" if where else message

    return "; ".join(said(problem.field, problem.message) for problem in error.problems)


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
    reply, shown = "", time.monotonic()
    for delta in client.generate(prompt, sampling, use_adapter=adapter, caller=caller):
        reply += delta
        history[-1]["content"] = reply.lstrip()  # a tokenizer may start the reply with a space
        if time.monotonic() - shown >= STREAM_INTERVAL:
            shown = time.monotonic()
            yield
    yield


def _finish_note(client: ChatClient, lang: str = SOURCE) -> str:
    finish = client.last_finish
    reason = {"cancelled": STOPPED, "length": TOKEN_LIMIT}.get(finish.get("reason"))
    parts = text(reason, lang) if reason else ""
    if finish.get("dropped"):
        parts += " " + text(DROPPED, lang, count=finish["dropped"])
    return message_html(parts.strip(), "warn")


def respond(
    client: ChatClient,
    message: str,
    system: str,
    mode: str,
    histories: dict[str, Conversation],
    *sampling_values: Any,
    caller: str | None = None,
    lang: str = SOURCE,
) -> Iterator[list[Any]]:
    """Send ``message``; yield [chat, base, tuned, histories, textbox, note] as the reply (or replies) stream in.

    Side by side answers with the adapter switched off (the base model) on the left, then on the right. Only a
    model ``caller`` may use answers (``caller_of``: in demo mode, not another visitor's). The note is in ``lang``.
    """
    histories = {name: list(turns) for name, turns in (histories or {}).items()}
    chat, base, tuned = (histories.setdefault(name, []) for name in ("chat", "base", "tuned"))

    def view(textbox: Any = None, note: Any = None) -> list[Any]:
        """The outputs; None leaves the text box or the note as it is."""
        keep = [gr.skip() if value is None else value for value in (textbox, note)]
        # Copies: the reply's message is edited in place as it streams, each yield must be a snapshot.
        return [[dict(turn) for turn in turns] for turns in (chat, base, tuned)] + [histories, *keep]

    problem = _refusal(client, message, mode, caller, lang)
    try:
        sampling = parse_sampling_widgets(list(sampling_values))
    except ConfigError as exc:
        problem = problem or text(FIX_SAMPLING, lang, problems=sampling_problems(exc, lang))
    if problem:
        yield view(note=message_html(problem, "warn"))
        return
    targets = [(chat, True)] if mode != "Side by side" else [(base, False), (tuned, True)]
    for history, _ in targets:
        history.append({"role": "user", "content": message.strip()})
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
        yield view(note=message_html(text(REPLY_FAILED, lang, error=exc), "error"))
        return
    yield view(note=_finish_note(client, lang))


def _refusal(client: ChatClient, message: str, mode: str, caller: str | None = None, lang: str = SOURCE) -> str | None:
    """Why a message cannot be sent now (in ``lang``), or None."""
    if not message or not message.strip():
        return text(TYPE_FIRST, lang)
    if not client.may_use(caller):
        return text(LOAD_FIRST_OTHERS, lang, others=text(OTHERS_MODEL, lang), load=text(LOAD, lang))
    if client.info is None:
        return text(LOAD_FIRST, lang, load=text(LOAD, lang))
    if mode == "Side by side" and not client.info.is_adapter:
        return text(SIDE_NEEDS_ADAPTER, lang)
    return None


def clear_clicked() -> list[Any]:
    """Empty every conversation."""
    return [[], [], [], {}, ""]


# --- layout -------------------------------------------------------------------------------------------------


def _sampling_widget(spec: FieldSpec) -> gr.components.Component:
    """A slider for a bounded number; a text box for the optional seed (empty means a new draw). Its label and
    help are the schema's, in the page's language."""
    label = schema_text(f"{SAMPLING_ROOT}.{spec.path}.label", spec.label)
    info = schema_text(f"{SAMPLING_ROOT}.{spec.path}.help", spec.help) if spec.help else None
    if spec.text_number:
        return gr.Textbox(label=label, info=info, placeholder=t("chat.seed.placeholder"), max_lines=1)
    step = 1 if spec.kind == "int" else 0.05
    low = spec.minimum + step if spec.exclusive[0] else spec.minimum
    return gr.Slider(low, spec.maximum, value=spec.default, step=step, label=label, info=info)


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
            self.load = gr.Button(t(LOAD), variant="primary", scale=0, min_width=100, elem_id="ts-chat-load")
            self.unload = gr.Button(t("chat.unload"), scale=0, min_width=100, elem_id="ts-chat-unload")
            self.mode = gr.Radio(
                [(t(MODE_WORDS[mode]), mode) for mode in MODES],
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
        def status(who: str | None, request: gr.Request) -> str:
            return status_html(self.client, caller_of(policy, who), request_language(request))

        gr.on(
            None,
            status,
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
                    label=t("chat.system"),
                    lines=2,
                    max_lines=6,
                    placeholder=t("chat.system.placeholder"),
                    elem_id="ts-chat-system",
                )
                self.sampling = [_sampling_widget(spec) for spec in SAMPLING if not spec.advanced]
                with gr.Accordion(t("chat.more_sampling"), open=False):
                    self.sampling += [_sampling_widget(spec) for spec in SAMPLING if spec.advanced]
        self._wire()

    def _conversation_view(self) -> None:
        self.chatbot = gr.Chatbot(show_label=False, height=CHAT_HEIGHT, elem_id="ts-chatbot", buttons=["copy"])
        with gr.Row(visible=False, elem_id="ts-chat-side") as self.side_row:
            self.base_bot = gr.Chatbot(label=t("chat.base_model"), height=CHAT_HEIGHT, elem_id="ts-chatbot-base")
            self.tuned_bot = gr.Chatbot(label=t("chat.fine_tuned"), height=CHAT_HEIGHT, elem_id="ts-chatbot-tuned")
        self.note = gr.HTML(elem_classes="ts-html", elem_id="ts-chat-note")  # above the box: always in view
        with gr.Row(equal_height=True, elem_id="ts-chat-compose"):
            self.text = gr.Textbox(
                placeholder=t("chat.input.placeholder"),
                show_label=False,
                container=False,
                scale=5,
                elem_id="ts-chat-input",
            )
            self.send = gr.Button(t("chat.send"), variant="primary", scale=0, min_width=88, elem_id="ts-chat-send")
            self.stop = gr.Button(t("chat.stop"), variant="stop", scale=0, min_width=88, elem_id="ts-chat-stop")
            self.clear = gr.Button(t("chat.clear"), scale=0, min_width=88, elem_id="ts-chat-clear")

    def _wire(self) -> None:
        private: dict[str, Any] = {"api_visibility": "private"}
        client, workspace = self.client, self.workspace
        policy, visitor = self.ctx.policy, self.ctx.visitor

        def relisted(request: gr.Request, pick: str | None, who: str | None) -> dict[str, Any]:
            return _relisted(pick, model_choices(workspace, policy, who, request_language(request)))

        def status(request: gr.Request, who: str | None) -> str:
            return status_html(client, caller_of(policy, who), request_language(request))

        relist = {
            "fn": relisted,
            "inputs": [self.model, visitor],
            "outputs": [self.model],
            "show_progress": "hidden",
            **private,
        }
        self.refresh.click(**relist)
        if (on_open := self.ctx.on_open()) is not None:  # runs finish and checkpoints appear while it is hidden
            on_open(**relist)
            # ... and another visitor may have loaded a model meanwhile (one worker serves the studio)
            on_open(
                status,
                [visitor],
                [self.status],
                show_progress="hidden",
                **private,
            )

        def load(request: gr.Request, pick: str | None, who: str | None) -> Iterator[str]:
            yield from load_clicked(client, workspace, pick, policy, who, request_language(request))

        def unload(request: gr.Request, who: str | None) -> str:
            return unload_clicked(client, caller_of(policy, who), request_language(request))

        def send(request: gr.Request, who: str | None, *values: Any) -> Iterator[list[Any]]:
            lang = request_language(request)
            for outputs in respond(client, *values, caller=caller_of(policy, who), lang=lang):
                # The note says why a reply failed (the worker's error may name its files); the replies stay as written.
                yield [*outputs[:-1], policy.shown(outputs[-1], workspace)]

        self.load.click(load, [self.model, visitor], [self.status], **private, **lanes.NO_LANE)
        self.unload.click(
            unload,
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


def _relisted(pick: str | None, choices: list[tuple[str, str]]) -> dict[str, Any]:
    """The picker with new choices. Its value is left alone while the pick is still offered: ``pick`` is the pick
    when the refresh was asked (on opening the tab), and one made since, before this answer arrives on a busy
    machine, must not be undone. A pick no longer offered (a run deleted) falls back to the first choice."""
    if pick in {value for _, value in choices}:
        return gr.update(choices=choices)
    return gr.update(choices=choices, value=choices[0][1])


def build_chat_tab(ctx: StudioContext) -> ChatTab:
    """Build the Chat tab inside the current ``gr.Tab``."""
    return ChatTab(ctx)
