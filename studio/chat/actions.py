"""What the Chat tab's buttons do, as plain functions of the chat client (engine.chat.client): load and unload a
model, read the sampling widgets, and hold a conversation (one reply, or the base and tuned replies side by side)
as the replies stream in. Every line they write is in the page's language; the worker's errors stay as it wrote
them. No Gradio: the tab hands these to its events.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from engine.api import ChatClient, ChatError, ConfigError, NoSeat, Reply, SamplingParams, chat_tools
from studio.chat.images import forget_images, image_refusal, kept_image, shown_turn, user_turn
from studio.chat.models import (
    holder_for,
    loaded_pick,
    loaded_run_gone,
    model_choices,
    remember_loaded,
    shown_label,
    spec_for,
    worker_tag,
)
from studio.chat.pool import ChatClients
from studio.chat.status import LOAD, OTHERS_MODEL, RUN_DELETED, status_html
from studio.demo.caller import Caller
from studio.form.schema import leaf_specs
from studio.form.values import values_to_config
from studio.i18n.catalog import SOURCE, key, text
from studio.i18n.problems import translate_problem
from studio.markup import message_html

SAMPLING = sorted(leaf_specs(SamplingParams), key=lambda spec: spec.advanced)  # the widgets' order
SAMPLING_ROOT = "sampling"  # the key prefix of the sampling fields' words (studio.i18n.catalog.SCHEMA_ROOTS)
NOT_LISTED, PICK_FIRST, LOAD_FAILED = key("chat.error.not_listed"), key("chat.error.pick_first"), key("chat.error.load")
NOTHING_OF_YOURS, NOTHING_LOADED, UNLOADED = key("chat.unload.others"), key("chat.unload.none"), key("chat.unload.done")
LEFT = key("chat.unload.left")  # a demo visitor's Unload of a bundled model others may be chatting with
STOPPED, TOKEN_LIMIT, DROPPED = key("chat.finish.stopped"), key("chat.finish.length"), key("chat.finish.dropped")
FIX_SAMPLING, REPLY_FAILED, FIX_TOOLS = key("chat.error.sampling"), key("chat.error.reply"), key("chat.error.tools")
TYPE_FIRST, LOAD_FIRST_OTHERS, LOAD_FIRST = key("chat.refuse.empty"), key("chat.refuse.others"), key("chat.refuse.load")
SIDE_NEEDS_ADAPTER, NO_SEAT = key("chat.refuse.side"), key("chat.error.no_seat")
ONE_AHEAD, MANY_AHEAD = key("chat.one_ahead"), key("chat.many_ahead")  # others' replies a message waits for
STREAM_INTERVAL = 0.05  # seconds between page updates while a reply streams: smooth, without a message per token
FOLLOW_INTERVAL = 0.25  # seconds between looks at another visitor's load of the same bundled model
Conversation = list[dict[str, Any]]  # turns: role and content, and a user turn's image paths (studio.chat.images)


def load_pressed(chats: ChatClients, caller: Caller, key: str | None) -> Iterator[str]:
    """The Load button: ``load_clicked`` in the client the pick loads in (studio.chat.pool). A bundled model that
    its public client (demo mode) has loaded, or is loading for another visitor, is not loaded again (that would
    call the other load off): the caller joins those chatting with it, and their own model, if any, is unloaded."""
    client = chats.for_load(caller, key)
    if chats.is_public(client):
        chats.unload_own(caller)
        while client.loading is not None:  # a public client only ever loads its own model: follow that load
            yield status_html(client, caller)
            time.sleep(FOLLOW_INTERVAL)
        if key is not None and loaded_pick(client, caller, model_choices(caller)) == key:
            yield status_html(client, caller)
            return
    yield from load_clicked(client, caller, key)


def unload_pressed(chats: ChatClients, caller: Caller) -> str:
    """The Unload button: ``unload_clicked`` on the caller's client; a demo visitor chatting with a bundled model
    others share only leaves it (it goes once nobody has used it for ``chat_idle_minutes``)."""
    if chats.leave(caller):
        return message_html(caller.say(LEFT, minutes=f"{caller.policy.chat_idle_minutes:g}"), "ok")
    return unload_clicked(chats.for_caller(caller), caller)


def load_clicked(client: ChatClient, caller: Caller, key: str | None) -> Iterator[str]:
    """Load the picked model, yielding the status line as loading goes on. Only what the list offers loads:
    a key is never taken as a path to anything else on this machine. It replaces whatever model ``client`` has
    loaded (the studio's, or in demo mode the visitor's own, studio.chat.pool); in demo mode a run's model serves
    this visitor only, a load that finds every chat seat held by other visitors' models in use is refused, and a
    failure names the run's files as the visitor knows them (``workspace/runs/...``), not by the server's paths.
    Its lines are in the caller's language (the worker's own error stays English)."""
    try:
        if not key:
            raise ChatError(caller.say(PICK_FIRST))
        if key not in {value for _, value in model_choices(caller)}:
            raise ChatError(caller.say(NOT_LISTED))
        spec, tag = spec_for(caller.workspace, key), worker_tag(caller)
        for _ in client.load(spec, owner=holder_for(spec, tag), caller=tag):  # others' replies are written first
            yield status_html(client, caller)
        remember_loaded(client, key)  # a page opened later shows this pick (studio.chat.models.loaded_pick)
    except NoSeat as exc:
        yield message_html(caller.say(NO_SEAT, count=exc.seats, minutes=f"{exc.idle_s / 60:g}"), "warn")
        return
    except ChatError as exc:
        yield message_html(caller.say(LOAD_FAILED, error=caller.shown(str(exc))), "error")
        return
    yield status_html(client, caller)


def unload_clicked(client: ChatClient, caller: Caller) -> str:
    """Unload the model (its process exits, so its memory is freed) once other visitors' replies ahead of it are
    written; never another visitor's model. Said in the caller's language."""
    tag = worker_tag(caller)
    others = message_html(caller.say(NOTHING_OF_YOURS, others=caller.say(OTHERS_MODEL)), "warn")
    if not client.may_use(tag):
        return others
    if client.pid is None and client.loading is None:
        return message_html(caller.say(NOTHING_LOADED), "warn")
    try:
        if not client.unload_for(tag):  # someone else's model was loaded since the check above
            return others
    except ChatError as exc:  # others' replies ahead of it took too long
        return message_html(str(exc), "warn")
    return message_html(caller.say(UNLOADED), "ok")


def stop_clicked(client: ChatClient, caller: Caller) -> None:
    """End the reply being generated (never another visitor's); what was written so far stays."""
    client.stop(worker_tag(caller))


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


def _stream(reply: Reply, history: Conversation) -> Iterator[None]:
    """Append the assistant's ``reply`` to ``history`` as it streams; yields after each batch of deltas."""
    history.append({"role": "assistant", "content": ""})
    written, shown = "", time.monotonic()
    for delta in reply:
        written += delta
        history[-1]["content"] = written.lstrip()  # a tokenizer may start the reply with a space
        if time.monotonic() - shown >= STREAM_INTERVAL:
            shown = time.monotonic()
            yield
    yield


def _finish_note(finish: dict[str, Any], lang: str = SOURCE) -> str:
    """How the last reply ended, when it did not end its turn by itself (stopped, cut at the token limit), and the
    turns left out of a long conversation."""
    reason = {"cancelled": STOPPED, "length": TOKEN_LIMIT}.get(finish.get("reason"))
    parts = text(reason, lang) if reason else ""
    if finish.get("dropped"):
        parts += " " + text(DROPPED, lang, count=finish["dropped"])
    return message_html(parts.strip(), "warn")


def exchange(
    client: ChatClient,
    caller: Caller,
    message: str,
    system: str,
    mode: str,
    histories: dict[str, Conversation],
    *sampling_values: Any,
    tools: str = "",
    image: Any = None,
) -> Iterator[list[Any]]:
    """Send ``message``; yield [chat, base, tuned, histories, textbox, note] as the reply (or replies) stream in; a
    textbox or note of None leaves it as it is (the tab's ``respond`` sends those to the page). ``tools``: the Tools
    box, a JSON list of function schemas the model may call ("" for none), checked before anything is sent.
    ``image``: the path of the image uploaded with the message (None for none), for a vision-language model; both
    sides of Side by side get it (studio.chat.images).

    Side by side answers with the adapter switched off (the base model) on the left, then on the right. Only a
    model the caller may use answers (``worker_tag``: in demo mode, not another visitor's). A reply that fails
    before it writes anything takes the message back out of the conversation (sent again, it would fail the same
    way) and puts it back in the text box. The note is in the caller's language.
    """
    tag, lang = worker_tag(caller), caller.language
    histories = {name: list(turns) for name, turns in (histories or {}).items()}
    chat, base, tuned = (histories.setdefault(name, []) for name in ("chat", "base", "tuned"))

    def view(textbox: Any = None, note: Any = None) -> list[Any]:
        """The outputs; None leaves the text box or the note as it is."""
        # Copies: the reply's message is edited in place as it streams, each yield must be a snapshot.
        return [[shown_turn(turn) for turn in turns] for turns in (chat, base, tuned)] + [histories, textbox, note]

    problem = _refusal(client, message, mode, tag, lang) or _run_deleted(client, caller)
    sent_before = chat if mode != "Side by side" else base
    refused_image, image_path = image_refusal(client, image, sent_before, lang)
    problem = problem or refused_image
    try:
        sampling = parse_sampling_widgets(list(sampling_values))
    except ConfigError as exc:
        problem = problem or text(FIX_SAMPLING, lang, problems=sampling_problems(exc, lang))
    try:
        offered = chat_tools(tools)
    except ChatError as exc:
        problem = problem or text(FIX_TOOLS, lang, problems=str(exc))
    if problem:
        yield view(note=message_html(problem, "warn"))
        return
    targets = [(chat, True)] if mode != "Side by side" else [(base, False), (tuned, True)]
    kept = kept_image(image_path) if image_path is not None else None
    for history, _ in targets:
        history.append(user_turn(message.strip(), kept))
    ahead = client.ahead_of(tag)  # others' replies first (a bundled model visitors share, in demo mode)
    yield view("", message_html(_ahead_words(ahead, lang), "warn") if ahead else "")
    finish: dict[str, Any] = {}
    try:
        for history, adapter in targets:
            prompt = _conversation(system, history)
            reply = client.generate(prompt, sampling, use_adapter=adapter, caller=tag, tools=offered)
            for _ in _stream(reply, history):
                yield view(note="" if ahead else None)  # the reply has begun: the wait is over
                ahead = 0
            finish = reply.finish
            if finish.get("reason") == "cancelled":
                break  # Stop ends the whole exchange, not only the left reply
    except ChatError as exc:
        note = message_html(text(REPLY_FAILED, lang, error=exc), "error")
        yield view(_take_back(targets, message), note)
        return
    yield view(note=_finish_note(finish, lang))


def _ahead_words(count: int, lang: str) -> str:
    """ "1 reply ahead of yours ...", or N, in ``lang``."""
    return text(ONE_AHEAD, lang) if count == 1 else text(MANY_AHEAD, lang, count=count)


def _take_back(targets: list[tuple[Conversation, bool]], message: str) -> str | None:
    """After a failed reply: empty replies leave the conversation (one would be sent back to the model as if it had
    said nothing); when no reply wrote anything, the message leaves it too and goes back to the text box (returned;
    None when a reply stays)."""
    answered = any(history[-1]["role"] == "assistant" and history[-1]["content"] for history, _ in targets)
    for history, _ in targets:
        if history[-1]["role"] == "assistant" and not history[-1]["content"]:
            history.pop()
        if not answered and history and history[-1]["role"] == "user":
            forget_images({"taken back": [history.pop()]})  # its image goes back to the box as uploaded
    return None if answered else message


def _refusal(client: ChatClient, message: str, mode: str, tag: str | None = None, lang: str = SOURCE) -> str | None:
    """Why a message cannot be sent now (in ``lang``) by the caller of ``tag``, or None."""
    if not message or not message.strip():
        return text(TYPE_FIRST, lang)
    if not client.may_use(tag):
        return text(LOAD_FIRST_OTHERS, lang, others=text(OTHERS_MODEL, lang), load=text(LOAD, lang))
    if client.info is None:
        return text(LOAD_FIRST, lang, load=text(LOAD, lang))
    if mode == "Side by side" and not client.info.is_adapter:
        return text(SIDE_NEEDS_ADAPTER, lang)
    return None


def _run_deleted(client: ChatClient, caller: Caller) -> str | None:
    """Why the loaded model answers no more (in the caller's language): its run was deleted since it was loaded,
    and a reply from its weights, still in memory, would read as if the run were there; None otherwise."""
    info = client.info
    if info is None or not loaded_run_gone(client, caller):
        return None
    return caller.say(RUN_DELETED, label=shown_label(info.label, caller.language), load=caller.say(LOAD))


def clear_clicked(histories: dict[str, Conversation] | None = None) -> list[Any]:
    """Empty every conversation (their kept images go too)."""
    forget_images(histories)
    return [[], [], [], {}, ""]
