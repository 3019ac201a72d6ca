"""engine.chat.worker.Model.prompt: a conversation too long for the context loses its oldest turns, a pair at a time,
the fewest that make prompt and reply fit. The worker's model in this process (the demo model, a context of 256
tokens); the expected cut is found here with the tokenizer alone, trying every cut in order."""

from __future__ import annotations

import random
from typing import Any

import pytest
from transformers import AutoTokenizer

from engine.chat.spec import ChatError, ModelSpec, resolve_model
from engine.chat.worker import Model, pair_cuts
from engine.config.sections import DEMO_MODEL

REPLY = 16  # max_new_tokens


@pytest.fixture(scope="module")
def model() -> Model:
    return Model(resolve_model(ModelSpec(base=DEMO_MODEL)), lambda *_: None)


def conversation(pairs: int, seed: int, system: bool) -> list[dict[str, Any]]:
    """``pairs`` user / assistant pairs of 1-40 words each, then a user message; a system prompt first or not."""
    draw = random.Random(seed)

    def words() -> str:
        vocabulary = ["date", "March", "year", "the", "2024", "full"]
        return " ".join(draw.choice(vocabulary) for _ in range(draw.randint(1, 40)))

    turns = [{"role": role, "content": words()} for _ in range(pairs) for role in ("user", "assistant")]
    head = [{"role": "system", "content": "You write dates out in full."}] if system else []
    return head + turns + [{"role": "user", "content": words()}]


def expected_cut(tokenizer: Any, messages: list[dict[str, Any]], context: int) -> tuple[int, list[int]]:
    """The first cut, trying each in order, whose prompt and reply fit; the last (the last message alone) otherwise."""
    system = messages[:1] if messages[0]["role"] == "system" else []
    turns = messages[len(system) :]
    cuts = [0, *range(2, len(turns), 2)]
    cuts += [len(turns) - 1] if cuts[-1] != len(turns) - 1 else []
    for cut in cuts:
        ids = tokenizer.apply_chat_template(system + turns[cut:], add_generation_prompt=True, return_dict=True)
        ids = ids["input_ids"]
        if len(ids) + REPLY <= context or cut == cuts[-1]:
            return cut, ids
    raise AssertionError("unreachable")


def test_the_cuts_are_whole_pairs_then_all_but_the_last_message():
    assert [pair_cuts(n) for n in (1, 2, 3, 4, 5)] == [[0], [0, 1], [0, 2], [0, 2, 3], [0, 2, 4]]


@pytest.mark.parametrize("system", [False, True])
def test_a_long_conversation_loses_the_fewest_oldest_pairs_that_make_it_fit(model: Model, system: bool):
    tokenizer = AutoTokenizer.from_pretrained(DEMO_MODEL)
    cuts = set()
    for pairs in (0, 1, 2, 3, 5, 8, 13, 30, 120):
        for seed in range(3):
            messages = conversation(pairs, seed, system)
            cut, ids = expected_cut(tokenizer, messages, model.context_length)
            inputs, budget, dropped = model.prompt(messages, REPLY)
            assert dropped == cut and inputs["input_ids"][0].tolist() == ids, (pairs, seed)
            assert budget == min(REPLY, model.context_length - len(ids))
            cuts.add(cut)
    assert 0 in cuts and len(cuts) >= 5  # some fit whole, the others lost as many pairs as they had to


def test_a_last_message_too_long_on_its_own_is_refused(model: Model):
    messages = conversation(3, 0, True)[:-1] + [{"role": "user", "content": "date " * 300}]
    with pytest.raises(ChatError, match=f"too long for the model's context of {model.context_length} tokens"):
        model.prompt(messages, REPLY)
