"""The Chat tab: talk to the base model, a run's final adapter or any checkpoint, or to both side by side.

The model runs in a chat worker process (engine.chat.client), never in the studio: replies stream in without
blocking the page, a training run keeps its cores, and Unload frees the memory. One worker serves the whole
studio, so a loaded model survives a page refresh; a new message stops a reply still running. In demo mode each
visitor's run model loads in a worker of their own and each bundled model in one that visitors share
(studio.chat.pool), so no visitor's Load or Unload replaces another's model, and a run's model answers only the
visitor who loaded it (studio.chat.models).
The sampling widgets are built from ``engine.chat.client.SamplingParams`` (bounds, help text, validation; their
words translated under ``sampling.<field>``, studio.i18n.catalog). What the server writes here (the status line,
the notes, the worker's loading steps) is in the page's language; the worker's errors stay as it wrote them.
The status line is studio.chat.status; what the buttons do, without Gradio, studio.chat.actions. While a
vision-language model is loaded, an image box beside the message takes an upload that goes with the message (to
both sides of Side by side) and shows in the user's turn (studio.chat.images).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import gradio as gr

from engine.api import ChatClient
from studio import lanes
from studio.chat.actions import (
    SAMPLING,
    SAMPLING_ROOT,
    Conversation,
    clear_clicked,
    exchange,
    load_pressed,
    stop_clicked,
    unload_pressed,
)
from studio.chat.images import IMAGE_LABEL, forget_images, takes_images
from studio.chat.models import loaded_pick, model_choices
from studio.chat.pool import ChatClients
from studio.chat.status import LOAD, status_html
from studio.context import StudioContext
from studio.demo.caller import Caller
from studio.form.schema import FieldSpec
from studio.i18n.widgets import schema_text, t

MODES = ("Chat", "Side by side")  # the mode radio's values (what the handlers compare)
MODE_WORDS = dict(zip(MODES, ("chat.mode.chat", "chat.mode.side"), strict=True))  # their labels' keys
# What the Tools box shows while empty: one function schema, as a tool-calling dataset's rows hold them.
TOOLS_EXAMPLE = '[{"name": "get_weather", "description": "The weather in a city", "parameters": {"type": "object", '
TOOLS_EXAMPLE += '"properties": {"city": {"type": "string"}}, "required": ["city"]}}]'
CHAT_HEIGHT = 380  # pixels: with the model row, a note and the message box, it fits a 1366x768 screen
IMAGE_HEIGHT, IMAGE_WIDTH = 42, 96  # pixels: the image box beside the message, as tall as the message box


def respond(
    client: ChatClient,
    caller: Caller,
    message: str,
    system: str,
    mode: str,
    histories: dict[str, Conversation],
    *sampling_values: Any,
    tools: str = "",
    image: str | None = None,
) -> Iterator[list[Any]]:
    """Send ``message``; yield [chat, base, tuned, histories, textbox, note] as the reply (or replies) stream in
    (studio.chat.actions.exchange, with the Tools box's ``tools`` and the image box's uploaded ``image``), gr.skip()
    where the text box or the note stays as it is. The note says why a reply failed as the caller may see it (the
    worker's error may name its files); the replies stay as written."""
    exchanged = exchange(client, caller, message, system, mode, histories, *sampling_values, tools=tools, image=image)
    for outputs in exchanged:
        *shown, note = [gr.skip() if value is None else value for value in outputs]
        yield [*shown, caller.shown(note)]


def image_box(client: ChatClient, caller: Caller) -> dict[str, Any]:
    """The image box beside the message: shown while the caller's loaded model reads images; hidden, and emptied
    (an image left in it would go with the next message), while it does not."""
    return gr.update(visible=True) if takes_images(client, caller) else gr.update(visible=False, value=None)


def image_follows_text(outputs: list[Any], image: str | None) -> Any:
    """The image box's output beside ``respond``'s: emptied when the text box is (the message is sent), its image
    put back when the message is (a reply that failed before writing anything), else left as it is."""
    textbox = outputs[4]
    if textbox == "":
        return None
    return image if isinstance(textbox, str) else gr.skip()


def _upload_path(image: gr.Image) -> None:
    """Have ``image`` hand its upload's path over unopened (type "filepath"). Gradio's Image opens every upload with
    Pillow first, so a file Pillow cannot identify, or one over Pillow's own pixel limit, would fail there with a
    bare "Error"; the chat worker checks the file instead, and says why it cannot be used (engine.chat.images).
    Gradio has already checked that the file is one of its uploads."""
    opening = image.preprocess

    def unopened(payload: Any) -> Any:
        path = getattr(payload, "path", None)
        return path if path is not None else opening(payload)  # an inline image (a data: URL) is written to a file

    image.preprocess = unopened  # type: ignore[method-assign]


def page_view(client: ChatClient, caller: Caller) -> list[Any]:
    """A page just loaded (or reloaded): the status line, the picker with the caller's models set to the model that
    is loaded (else the first), and that model's pick, which the page remembers as the one it has shown."""
    choices = model_choices(caller)
    loaded = loaded_pick(client, caller, choices)
    picker = gr.update(choices=choices, value=loaded or choices[0][1])
    return [status_html(client, caller), picker, loaded]


def opened_view(client: ChatClient, caller: Caller, pick: str | None, shown: str | None) -> list[Any]:
    """The tab opened (or ↻ pressed): the status line, the picker with new choices, and the loaded model's pick.
    ``shown`` is the loaded model's pick the page showed last: when another model is loaded since (by another page:
    one worker serves every page of the studio, or of a visitor), the picker shows it; else the caller's own
    ``pick`` stays (``_relisted``)."""
    choices = model_choices(caller)
    loaded = loaded_pick(client, caller, choices)
    if loaded is not None and loaded != shown:
        picker = gr.update(choices=choices, value=loaded)
    else:
        picker = _relisted(pick, choices, loaded)
    return [status_html(client, caller), picker, loaded]


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
    """The Chat tab's components and events; one chat worker for the whole studio (``client``), or in demo mode one
    per visitor's run model and one per bundled model (``chats``, studio.chat.pool)."""

    def __init__(self, ctx: StudioContext, client: ChatClient | None = None):
        self.ctx, self.workspace = ctx, ctx.workspace
        self.chats = ChatClients(ctx.workspace, ctx.policy, client)
        self.client = self.chats.shared
        # The page's conversations; their kept images go when the page's session ends (Gradio keeps a closed page's
        # state an hour, for a reopened tab).
        self.histories = gr.State({}, delete_callback=forget_images)
        with gr.Row(equal_height=True, elem_id="ts-chat-head"):
            # Nobody's in particular: a visitor's runs join when the tab opens.
            choices = model_choices(Caller(self.workspace, ctx.policy))
            self.model = gr.Dropdown(
                choices=choices,
                value=choices[0][1],
                label=t("chat.model.label"),  # not shown: read out by screen readers (else Gradio's "Dropdown")
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
        self.status = gr.HTML(elem_classes="ts-html", elem_id="ts-chat-status")
        self.shown_loaded = gr.State(None)  # the loaded model's pick this page last showed (opened_view)
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
                with gr.Accordion(t("chat.tools"), open=False, elem_id="ts-chat-tools-box"):
                    # The functions a tool-calling run was trained to call, rendered by the model's chat template.
                    self.tools = gr.Textbox(
                        label=t("chat.tools.label"),
                        info=t("chat.tools.help"),
                        lines=4,
                        max_lines=12,
                        placeholder=TOOLS_EXAMPLE,
                        elem_id="ts-chat-tools",
                    )
                self.sampling = [_sampling_widget(spec) for spec in SAMPLING if not spec.advanced]
                with gr.Accordion(t("chat.more_sampling"), open=False):
                    self.sampling += [_sampling_widget(spec) for spec in SAMPLING if spec.advanced]

        # Per visitor: shown on page load and whenever the visitor id arrives (gr.on with no triggers runs at load
        # and on a change of its inputs): the status line, in the picker the model that is loaded, and the image box
        # when that model reads images. Not a callable value: Gradio would publish that load event in the API.
        def page_loaded(caller: Caller) -> list[Any]:
            client = self.chats.for_caller(caller)
            return [*page_view(client, caller), image_box(client, caller)]

        gr.on(
            None,
            ctx.handler(page_loaded),
            ctx.inputs(),
            [self.status, self.model, self.shown_loaded, self.image],
            show_progress="hidden",
            api_visibility="private",
        )
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
                label=t("chat.input.label"),  # not shown: read out by screen readers (else Gradio's "Textbox")
                show_label=False,
                container=False,
                scale=5,
                elem_id="ts-chat-input",
            )
            # Shown while a vision-language model is loaded (image_box); its upload's path goes with the message.
            self.image = gr.Image(
                type="filepath",
                image_mode=None,  # the file as uploaded: the chat worker reads it as training read the run's images
                sources=["upload"],
                label=t(IMAGE_LABEL),
                show_label=False,
                buttons=[],
                container=False,
                height=IMAGE_HEIGHT,
                scale=0,
                min_width=IMAGE_WIDTH,
                visible=False,
                elem_id="ts-chat-image",
            )
            _upload_path(self.image)
            self.send = gr.Button(t("chat.send"), variant="primary", scale=0, min_width=88, elem_id="ts-chat-send")
            self.stop = gr.Button(t("chat.stop"), variant="stop", scale=0, min_width=88, elem_id="ts-chat-stop")
            self.clear = gr.Button(t("chat.clear"), scale=0, min_width=88, elem_id="ts-chat-clear")

    def _wire(self) -> None:
        private: dict[str, Any] = {"api_visibility": "private"}
        client, ctx = self.chats.for_caller, self.ctx

        # Each handler answers the caller with the caller's client: their models, in the language of the page.
        def relisted(caller: Caller, pick: str | None, shown: str | None) -> list[Any]:
            chat = client(caller)  # once: the status and the image box describe the same client
            return [*opened_view(chat, caller, pick, shown), image_box(chat, caller)]

        # Runs finish and checkpoints appear while the tab is hidden, and another page may have loaded a model
        # meanwhile (one worker serves the pages of the studio, or of a visitor): one event brings the list, the
        # status and the picker up to date.
        relist = {
            "fn": ctx.handler(relisted),
            "inputs": ctx.inputs(self.model, self.shown_loaded),
            "outputs": [self.status, self.model, self.shown_loaded, self.image],
            "show_progress": "hidden",
            **private,
        }
        self.refresh.click(**relist)
        if (on_open := ctx.on_open()) is not None:
            on_open(**relist)

        def loaded(caller: Caller) -> list[Any]:
            chat = client(caller)
            return [loaded_pick(chat, caller, model_choices(caller)), image_box(chat, caller)]

        def image_shown(caller: Caller) -> dict[str, Any]:
            return image_box(client(caller), caller)

        def load(caller: Caller, pick: str | None) -> Iterator[str]:
            yield from load_pressed(self.chats, caller, pick)

        def unload(caller: Caller) -> str:
            return unload_pressed(self.chats, caller)

        def send(caller: Caller, *values: Any) -> Iterator[list[Any]]:
            *rest, tools, image = values
            for outputs in respond(client(caller), caller, *rest, tools=tools, image=image):
                yield [*outputs, image_follows_text(outputs, image)]

        def stop(caller: Caller) -> None:
            stop_clicked(client(caller), caller)

        self.load.click(ctx.handler(load), ctx.inputs(self.model), [self.status], **private, **lanes.NO_LANE).then(
            ctx.handler(loaded), ctx.inputs(), [self.shown_loaded, self.image], show_progress="hidden", **private
        )  # this page has shown the model it loaded: opening the tab again keeps a pick made since
        self.unload.click(
            ctx.handler(unload),
            ctx.inputs(),
            [self.status],
            **private,
            **lanes.NO_LANE,
        ).then(ctx.handler(image_shown), ctx.inputs(), [self.image], show_progress="hidden", **private)
        self.mode.change(
            lambda mode: [gr.Chatbot(visible=mode != "Side by side"), gr.Row(visible=mode == "Side by side")],
            [self.mode],
            [self.chatbot, self.side_row],
            **private,
        )
        outputs = [self.chatbot, self.base_bot, self.tuned_bot, self.histories, self.text, self.note]
        gr.on(
            [self.send.click, self.text.submit],
            ctx.handler(send),
            ctx.inputs(self.text, self.system, self.mode, self.histories, *self.sampling, self.tools, self.image),
            [*outputs, self.image],
            show_progress="minimal",
            **private,
            **lanes.NO_LANE,
        )
        # Stop reaches the worker directly; the streaming handler then ends by itself with the partial reply kept.
        self.stop.click(ctx.handler(stop), ctx.inputs(), None, concurrency_limit=None, **private)
        self.clear.click(
            lambda histories: [*clear_clicked(histories), None], [self.histories], [*outputs[:5], self.image], **private
        )


def _relisted(pick: str | None, choices: list[tuple[str, str]], loaded: str | None = None) -> dict[str, Any]:
    """The picker with new choices. Its value is left alone while the pick is still offered: ``pick`` is the pick
    when the refresh was asked (on opening the tab), and one made since, before this answer arrives on a busy
    machine, must not be undone. A pick no longer offered (a run deleted) falls back to the ``loaded`` model's pick,
    else to the first choice."""
    if pick in {value for _, value in choices}:
        return gr.update(choices=choices)
    return gr.update(choices=choices, value=loaded or choices[0][1])


def build_chat_tab(ctx: StudioContext) -> ChatTab:
    """Build the Chat tab inside the current ``gr.Tab``."""
    return ChatTab(ctx)
