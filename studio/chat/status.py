"""The Chat tab's status line: what is loaded (its size, device, context and load time; or that its run was deleted
since), the loading bar with the chat worker's steps, or that nothing is (or, for a demo visitor, that their model
was unloaded for being unused), each in the page's language; for a demo visitor, only that a model in use is not
theirs."""

from __future__ import annotations

import html

from engine.api import ChatClient
from studio.chat.models import loaded_run_gone, shown_label, worker_tag
from studio.demo.caller import Caller
from studio.i18n import catalog
from studio.i18n.catalog import SOURCE, key, text
from studio.markup import bold, message_html, progress_bar_html

LOAD = key("chat.load")  # the Load button's word, also where a message points at it
OTHERS_MODEL = key("chat.others_model")  # "another visitor's model is in use"
NO_MODEL, NO_MODEL_FOR_YOU = key("chat.status.none"), key("chat.status.none_for_you")
LOADED, LOADING = key("chat.status.loaded"), key("chat.status.loading")
PARAMETERS, CONTEXT, LOAD_TIME = key("chat.status.parameters"), key("chat.status.context"), key("chat.status.seconds")
SIDE_AVAILABLE = key("chat.status.side_available")
RUN_DELETED = key("chat.status.run_deleted")  # the loaded model's run was deleted since it was loaded
UNUSED = key("chat.status.unused")  # a demo visitor's model was unloaded for being unused (engine.chat.seats)
# The steps the chat worker reports while it loads (engine.chat.client, engine.chat.worker), in its English.
LOADING_STEPS = [key(f"chat.loading.{step}") for step in ("process", "imports", "tokenizer", "weights", "adapter")]


def _pointing_at_load(name: str, lang: str, **values: object) -> list[str]:
    """The message ``name`` (its ``{load}`` the Load button's word, in bold) as pieces for ``message_html``."""
    before, _, after = text(name, lang, load="{load}", **values).partition("{load}")
    return [before, bold(text(LOAD, lang)), after]


def status_html(client: ChatClient, caller: Caller) -> str:
    """What is loaded (or loading), in one line in the caller's language; for a caller who may not use it, only
    that it is not theirs."""
    lang = caller.language
    if not client.may_use(worker_tag(caller)):
        return message_html(_pointing_at_load(NO_MODEL_FOR_YOU, lang, others=text(OTHERS_MODEL, lang)), "warn")
    if client.loading is not None:
        return _progress_html(client.loading.fraction, client.loading.message, lang)
    info = client.info
    if info is None and client.unused_label is not None:
        minutes = f"{caller.policy.chat_idle_minutes:g}"
        label = shown_label(client.unused_label, lang)
        return message_html(_pointing_at_load(UNUSED, lang, label=label, minutes=minutes), "warn")
    if info is None:
        return message_html(_pointing_at_load(NO_MODEL, lang), "warn")
    label = shown_label(info.label, lang)
    if loaded_run_gone(client, caller):
        return message_html(_pointing_at_load(RUN_DELETED, lang, label=label), "warn")
    facts = [
        text(PARAMETERS, lang, count=f"{info.parameters / 1e6:,.1f}"),
        info.device,
        text(LOAD_TIME, lang, seconds=f"{info.seconds:.1f}"),
    ]
    if info.context_length:
        facts.insert(2, text(CONTEXT, lang, tokens=info.context_length))
    side = f" · {text(SIDE_AVAILABLE, lang)}" if info.is_adapter else ""
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
