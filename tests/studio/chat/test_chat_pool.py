"""studio.chat.pool: on a public demo a visitor's run model loads in a chat worker of their own and a bundled model in
one that every visitor shares, so no visitor's Load or Unload replaces another's model; the workers share the demo's
chat seats. Real chat workers on the demo model, through the Chat tab's handlers."""

from __future__ import annotations

import threading
from dataclasses import replace
from html import unescape
from pathlib import Path

import pytest

from engine.store.rundir import update_status
from studio.chat import pool
from studio.chat.actions import LEFT, NO_SEAT, load_pressed, parse_sampling_widgets, unload_pressed
from studio.chat.models import worker_tag
from studio.chat.pool import ChatClients
from studio.chat.status import status_html
from studio.chat.tab import respond
from studio.demo.caller import Caller
from studio.demo.ownership import owner_tag
from studio.demo.policy import DemoPolicy
from tests.helpers.chat_runs import save_demo_adapter
from tests.helpers.visitors import ALICE, BOB, CAROL
from tests.helpers.visitors import DEMO as DEMO_MODE
from tests.studio.chat.test_chat_tab import make_run

BASE = "base:assets/demo-model"
POLICY = replace(DEMO_MODE, max_chat_models=2)
GREEDY_WIDGETS = [0, 0.9, 24, 1, ""]  # temperature, top_p, max_new_tokens, repetition_penalty, seed
MESSAGE = "Write 2024-03-15 out in full."


def reply_to(chats: ChatClients, caller: Caller) -> str:
    """The caller's reply to MESSAGE through the tab's Send handler ("" when none was written)."""
    *_, (chat, *_) = respond(chats.for_caller(caller), caller, MESSAGE, "", "Chat", {}, *GREEDY_WIDGETS)
    return chat[-1]["content"] if chat and chat[-1]["role"] == "assistant" else ""


def loaded(chats: ChatClients, caller: Caller, pick: str) -> str:
    """The status line the Load button ends with."""
    *_, status = load_pressed(chats, caller, pick)
    return unescape(status)


@pytest.fixture
def chats(tmp_path: Path):
    clients = ChatClients(tmp_path, POLICY)
    yield clients
    clients.seats.stop()
    for client in clients.clients:
        client.unload()


@pytest.fixture
def visitor_runs(tmp_path: Path) -> dict[str, str]:
    """A run with a real LoRA adapter for each of Alice, Bob and Carol: visitor -> its pick in the model list."""
    picks = {}
    for visitor, name in ((ALICE, "alice-run"), (BOB, "bob-run"), (CAROL, "carol-run")):
        run_dir = make_run(tmp_path, name, 1.0)
        save_demo_adapter(run_dir)
        update_status(run_dir, owner=owner_tag(visitor))
        picks[visitor] = f"run:{name}"
    return picks


def test_a_bundled_model_loads_once_for_every_visitor_and_an_unload_only_leaves_it(chats, tmp_path):
    alice, bob = Caller(tmp_path, POLICY, ALICE), Caller(tmp_path, POLICY, BOB)
    assert "Loaded:" in loaded(chats, alice, BASE)
    shared = chats.for_caller(alice)
    worker, info = shared.pid, shared.info
    assert "Loaded:" in loaded(chats, bob, BASE)  # Bob joins the model already loaded: not loaded again
    assert chats.for_caller(bob) is shared and (shared.pid, shared.info) == (worker, info) and chats.seats.held == 1
    answer = reply_to(chats, alice)
    assert answer and reply_to(chats, bob) == answer

    prompt = [{"role": "user", "content": MESSAGE}]
    alices = shared.generate(prompt, parse_sampling_widgets(GREEDY_WIDGETS), caller=worker_tag(alice))
    first = next(alices)  # Alice's reply is being written (until she has read it) when Bob sends his message:
    bobs = respond(shared, bob, MESSAGE, "", "Chat", {}, *GREEDY_WIDGETS)
    assert "1 reply ahead of yours" in unescape(next(bobs)[5])  # he is told his waits for hers
    assert (first + "".join(alices)).strip() == answer
    steps = list(bobs)
    assert steps[0][5] == "" and steps[-1][0][-1]["content"] == answer  # the note went as his reply began

    assert bob.say(LEFT, minutes="10") in unescape(unload_pressed(chats, bob))
    assert shared.pid == worker and reply_to(chats, alice) == answer  # Alice's model is still there ...
    assert chats.for_caller(bob) is not shared
    assert "No model loaded." in unescape(status_html(chats.for_caller(bob), bob))
    assert reply_to(chats, bob) == ""  # ... and Bob chats with it no more
    assert alice.say(LEFT, minutes="10") in unescape(unload_pressed(chats, alice)) and shared.pid == worker
    shared.last_used -= 11 * 60  # nobody has chatted with it for 11 minutes: it goes at the next sweep
    assert chats.seats.reclaim() == 1 and shared.pid is None and chats.seats.held == 0


def test_a_visitor_who_loads_a_bundled_model_another_is_loading_follows_that_load(chats, tmp_path):
    alice, bob = Caller(tmp_path, POLICY, ALICE), Caller(tmp_path, POLICY, BOB)
    alices = load_pressed(chats, alice, BASE)
    assert "Loading" in next(alices)  # her load has begun (its worker runs) and waits for her page to read on
    bobs = load_pressed(chats, bob, BASE)
    assert "Loading" in next(bobs)  # Bob follows her load instead of starting his own (which would call hers off)
    worker = chats.for_caller(alice).pid
    outcome: list[str] = []
    reader = threading.Thread(target=lambda: outcome.append(list(alices)[-1]), daemon=True)
    reader.start()
    assert "Loaded:" in unescape(list(bobs)[-1])
    reader.join(60)
    assert "Loaded:" in unescape(outcome[0]) and chats.for_caller(bob).pid == worker == chats.for_caller(alice).pid


def test_run_models_load_in_each_visitors_own_worker_and_a_load_past_the_seats_waits_for_an_unused_one(
    chats, tmp_path, visitor_runs
):
    alice, bob = Caller(tmp_path, POLICY, ALICE), Caller(tmp_path, POLICY, BOB)
    carol = Caller(tmp_path, POLICY, CAROL, language="ja")
    assert "alice-run" in loaded(chats, alice, visitor_runs[ALICE])
    alices = chats.for_caller(alice)
    worker = alices.pid

    steps = respond(alices, alice, MESSAGE, "", "Chat", {}, *GREEDY_WIDGETS)
    next(steps), next(steps)  # Alice's message is sent and her reply is being written ...
    assert "bob-run" in loaded(chats, bob, visitor_runs[BOB])  # ... when Bob loads his run
    assert chats.for_caller(bob) is not alices and alices.pid == worker and "alice-run" in alices.info.label
    *_, (chat, *_) = steps
    assert chat[-1]["content"] and chat[-1]["content"] == reply_to(chats, bob)  # same weights: written whole

    refused = loaded(chats, carol, visitor_runs[CAROL])  # two seats, both in use
    assert carol.say(NO_SEAT, count=2, minutes="10") in refused  # in Carol's language
    assert chats.for_caller(carol).pid is None and chats.seats.held == 2
    assert carol.say(NO_SEAT, count=2, minutes="10") in loaded(chats, carol, BASE)  # a bundled model needs one too

    alices.last_used -= 11 * 60  # nobody has used Alice's model for 11 minutes
    assert "carol-run" in loaded(chats, carol, visitor_runs[CAROL])
    assert alices.pid is None and chats.seats.held == 2
    assert "was unloaded after 10 minutes unused" in unescape(status_html(alices, alice))
    assert reply_to(chats, carol) == chat[-1]["content"] and reply_to(chats, bob) == chat[-1]["content"]

    bobs = chats.for_caller(bob)
    assert "Loaded:" in loaded(chats, bob, BASE)  # the bundled model replaces Bob's own, as any Load does
    assert bobs.pid is None and chats.for_caller(bob) is not bobs and chats.seats.held == 2  # Carol's and the shared


def test_ones_own_studio_has_one_client_for_every_page_and_every_model(tmp_path):
    chats = ChatClients(tmp_path, DemoPolicy())
    someone, another = Caller(tmp_path), Caller(tmp_path, language="ko")
    assert chats.seats is None and chats.for_caller(someone) is chats.for_caller(another) is chats.shared
    assert chats.for_load(someone, BASE) is chats.for_load(another, "run:x") is chats.shared


def test_a_visitor_gone_long_is_forgotten_unless_their_own_model_is_loaded(chats, tmp_path, monkeypatch, visitor_runs):
    alice, bob = Caller(tmp_path, POLICY, ALICE), Caller(tmp_path, POLICY, BOB)
    loaded(chats, alice, visitor_runs[ALICE])
    bobs_own = chats.for_load(bob, visitor_runs[BOB])  # (not loaded)
    chats.for_load(bob, BASE)  # Bob chats with the bundled model now (not loaded either: no seat taken)
    alices = chats.for_caller(alice)
    monkeypatch.setattr(pool, "FORGET_S", -1.0)  # every visitor counts as gone long
    chats.for_caller(Caller(tmp_path, POLICY, CAROL))  # a visitor not met before: the others are looked over
    assert chats.for_caller(alice) is alices  # her model is loaded: kept
    assert chats.for_caller(bob) is not bobs_own and not chats.is_public(chats.for_caller(bob))  # Bob starts afresh
