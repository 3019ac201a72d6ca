"""engine.chat.seats: chat clients that share seats run at most that many workers at once; a model nobody uses
gives its seat up, one in use never does. Real chat workers on the demo model."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from engine.chat.client import ChatClient, ModelSpec, SamplingParams
from engine.chat.seats import ChatSeats, NoSeat
from engine.store.paths import PROJECT_ROOT
from tests.engine.runs.fault_checks import wait_until

DEMO = str(PROJECT_ROOT / "assets" / "demo-model")
BASE = ModelSpec(base=DEMO)
PROMPT = [{"role": "user", "content": "Write 2024-03-15 out in full."}]
GREEDY = SamplingParams(temperature=0, max_new_tokens=24)
HOUR = 3600.0


@pytest.fixture
def clients(tmp_path: Path):
    """Two clients (Alice's and Bob's) sharing one seat, unused models giving it up after an hour (the tests move
    a client's clock back instead of waiting); no sweeps of their own."""
    seats = ChatSeats(1, idle_s=HOUR, sweep_s=HOUR)
    alice, bob = ChatClient(tmp_path, seats=seats), ChatClient(tmp_path, seats=seats)
    yield seats, alice, bob
    seats.stop()
    for client in (alice, bob):
        client.unload()


def test_a_load_past_the_seats_frees_a_model_nobody_uses_and_never_one_in_use(clients):
    seats, alice, bob = clients
    list(alice.load(BASE))
    assert seats.held == 1
    with pytest.raises(NoSeat) as refused:
        list(bob.load(BASE))
    assert (refused.value.seats, refused.value.idle_s) == (1, HOUR) and "60 minutes" in str(refused.value)
    assert bob.pid is None and alice.info is not None and seats.held == 1

    reply = alice.generate(PROMPT, GREEDY)
    first = next(reply)  # Alice's reply is being written: her model is in use, however old her clock reads
    alice.last_used -= 2 * HOUR
    with pytest.raises(NoSeat):
        list(bob.load(BASE))
    written = first + "".join(reply)
    assert reply.finish["reason"] in ("stop", "length") and alice.unused_label is None

    list(alice.load(BASE))  # a client that holds the seat keeps it to replace its own model
    alice.last_used -= 2 * HOUR  # now nobody has used it for two hours
    list(bob.load(BASE))
    assert alice.pid is None and alice.info is None and alice.unused_label == f"Base · {DEMO}"
    assert bob.info is not None and seats.held == 1
    assert "".join(bob.generate(PROMPT, GREEDY)) == written  # the same model: Alice's reply was written whole
    with pytest.raises(NoSeat):  # Bob's model is fresh: Alice waits her turn
        list(alice.load(BASE))
    assert alice.unused_label == f"Base · {DEMO}"  # a refused load leaves her note as it was


def test_a_worker_that_dies_frees_its_seat(clients):
    seats, alice, bob = clients
    list(alice.load(BASE))
    os.kill(alice.pid, signal.SIGKILL)
    wait_until(lambda: seats.held == 0, 30, what="the dead worker's seat")
    list(bob.load(BASE))
    assert bob.info is not None and seats.held == 1


def test_the_sweeper_unloads_a_model_left_unused_without_any_load_asking(tmp_path):
    seats = ChatSeats(2, idle_s=0.5, sweep_s=0.2)
    alice = ChatClient(tmp_path, seats=seats)
    try:
        list(alice.load(BASE))
        wait_until(lambda: alice.pid is None, 60, what="the sweeper to unload the unused model")
        assert alice.info is None and alice.unused_label == f"Base · {DEMO}" and seats.held == 0
    finally:
        seats.stop()
        alice.unload()


def test_seats_refuse_a_count_below_one_or_no_idle_time():
    for count, idle_s in ((0, 60.0), (1, 0.0)):
        with pytest.raises(ValueError, match="at least 1"):
            ChatSeats(count, idle_s)
