"""studio.chat.pool: on a public demo each visitor chats with a worker of their own, so no visitor's Load replaces
another's model; the workers share the demo's chat seats. Real chat workers on the demo model, through the Chat
tab's handlers."""

from __future__ import annotations

from dataclasses import replace
from html import unescape
from pathlib import Path

import pytest

from studio.chat import pool
from studio.chat.actions import NO_SEAT, load_clicked
from studio.chat.pool import ChatClients
from studio.chat.status import status_html
from studio.chat.tab import respond
from studio.demo.caller import Caller
from studio.demo.policy import DemoPolicy
from tests.helpers.visitors import ALICE, BOB, CAROL
from tests.helpers.visitors import DEMO as DEMO_MODE

BASE = "base:assets/demo-model"
POLICY = replace(DEMO_MODE, max_chat_models=2)
GREEDY_WIDGETS = [0, 0.9, 24, 1, ""]  # temperature, top_p, max_new_tokens, repetition_penalty, seed
MESSAGE = "Write 2024-03-15 out in full."


def reply_to(chats: ChatClients, caller: Caller) -> str:
    """The caller's reply to MESSAGE, through the tab's Send handler."""
    *_, (chat, *_) = respond(chats.for_caller(caller), caller, MESSAGE, "", "Chat", {}, *GREEDY_WIDGETS)
    assert chat[-1]["role"] == "assistant"
    return chat[-1]["content"]


@pytest.fixture
def chats(tmp_path: Path):
    clients = ChatClients(tmp_path, POLICY)
    yield clients
    clients.seats.stop()
    for client in [clients.shared, *clients._visitors.values()]:
        client.unload()


def test_each_visitor_has_a_worker_of_their_own_and_a_load_past_the_seats_waits_for_an_unused_one(chats, tmp_path):
    alice, bob = Caller(tmp_path, POLICY, ALICE), Caller(tmp_path, POLICY, BOB)
    carol = Caller(tmp_path, POLICY, CAROL, language="ja")
    assert chats.for_caller(alice) is chats.for_caller(alice) is not chats.for_caller(bob)
    list(load_clicked(chats.for_caller(alice), alice, BASE))
    alices = chats.for_caller(alice)
    worker = alices.pid

    steps = respond(alices, alice, MESSAGE, "", "Chat", {}, *GREEDY_WIDGETS)
    next(steps), next(steps)  # Alice's message is sent and her reply is being written ...
    *_, loaded = load_clicked(chats.for_caller(bob), bob, BASE)  # ... when Bob loads a model
    assert "Loaded:" in loaded and alices.pid == worker and alices.info is not None  # hers stays
    *_, (chat, *_) = steps
    assert chat[-1]["content"] and chat[-1]["content"] == reply_to(chats, bob)  # her reply was written whole

    *_, refused = load_clicked(chats.for_caller(carol), carol, BASE)  # two seats, both in use
    assert unescape(refused).count(carol.say(NO_SEAT, count=2, minutes="10")) == 1  # in Carol's language
    assert chats.for_caller(carol).pid is None and chats.seats.held == 2

    alices.last_used -= 11 * 60  # nobody has used Alice's model for 11 minutes
    *_, loaded = load_clicked(chats.for_caller(carol), carol, BASE)
    assert "読み込み済み" in loaded and alices.pid is None and chats.seats.held == 2
    assert "was unloaded after 10 minutes unused" in unescape(status_html(alices, alice))
    assert reply_to(chats, carol) == chat[-1]["content"] and chats.for_caller(bob).pid is not None


def test_ones_own_studio_has_one_client_for_every_page(tmp_path):
    chats = ChatClients(tmp_path, DemoPolicy())
    assert chats.seats is None
    assert chats.for_caller(Caller(tmp_path)) is chats.for_caller(Caller(tmp_path, language="ko")) is chats.shared


def test_a_visitor_gone_long_is_forgotten_unless_their_model_is_loaded(chats, tmp_path, monkeypatch):
    alice, bob = Caller(tmp_path, POLICY, ALICE), Caller(tmp_path, POLICY, BOB)
    list(load_clicked(chats.for_caller(alice), alice, BASE))
    alices, bobs = chats.for_caller(alice), chats.for_caller(bob)
    monkeypatch.setattr(pool, "FORGET_S", -1.0)  # every visitor counts as gone long
    chats.for_caller(Caller(tmp_path, POLICY, CAROL))  # a new visitor: the others' clients are looked over
    assert chats.for_caller(alice) is alices and chats.for_caller(bob) is not bobs
