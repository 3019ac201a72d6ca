"""The Chat tab's handlers, called as Gradio calls them, against a real chat worker on the demo model."""

from __future__ import annotations

import json
from html import unescape
from pathlib import Path
from typing import Any

import gradio as gr
import pytest
import yaml

from engine import runs
from engine.chat.client import ChatClient, ChatError, ModelSpec, SamplingParams
from engine.config import ConfigError, parse_config
from engine.store.paths import PROJECT_ROOT
from engine.store.rundir import update_status
from engine.store.workspace import runs_dir
from studio.chat.actions import (
    SAMPLING,
    clear_clicked,
    load_clicked,
    parse_sampling_widgets,
    stop_clicked,
    unload_clicked,
)
from studio.chat.models import model_choices, spec_for, worker_tag
from studio.chat.status import status_html
from studio.chat.tab import _relisted, respond
from studio.demo.caller import Caller
from studio.demo.ownership import owner_tag
from studio.demo.policy import DemoPolicy
from tests.helpers.chat_runs import save_demo_adapter
from tests.helpers.visitors import ALICE, BOB
from tests.helpers.visitors import DEMO as DEMO_MODE

DEMO = "assets/demo-model"
GREEDY_WIDGETS = [0, 0.9, 40, 1, ""]  # temperature, top_p, max_new_tokens, repetition_penalty, seed


def make_run(workspace: Path, name: str, created: float, **config: Any) -> Path:
    run_dir = runs.create_run(parse_config({"name": name, **config}), run_dir=runs_dir(workspace) / name)
    update_status(run_dir, created_at=created)
    return run_dir


def add_checkpoints(run_dir: Path, *steps: int) -> None:
    for step in steps:  # a checkpoint counts once Trainer wrote trainer_state.json (its last file) for its step
        checkpoint = run_dir / "checkpoints" / f"checkpoint-{step}"
        checkpoint.mkdir(parents=True)
        (checkpoint / "trainer_state.json").write_text(json.dumps({"global_step": step}))


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("chat-tab")


@pytest.fixture(scope="module")
def adapter_run(workspace: Path) -> Path:
    """A run of the demo preset whose adapter/ is a real LoRA adapter built by the engine's own builder."""
    preset = yaml.safe_load((PROJECT_ROOT / "assets" / "presets" / "demo.yaml").read_text())
    run_dir = runs.create_run(parse_config(preset), run_dir=runs_dir(workspace) / "tuned")
    save_demo_adapter(run_dir)
    update_status(run_dir, state="completed", created_at=1.0)
    return run_dir


@pytest.fixture(scope="module")
def client(workspace: Path) -> ChatClient:
    chat = ChatClient(workspace)
    yield chat
    chat.unload()


def ensure_base(client: ChatClient, workspace: Path) -> None:
    """Load the base demo model unless a model is loaded (each test can then run on its own)."""
    if client.info is None:
        list(load_clicked(client, Caller(workspace), f"base:{DEMO}"))


def final(events: Any) -> list[Any]:
    """The last outputs a streaming handler yields."""
    *_, last = events
    return last


def test_choices_list_bases_then_each_runs_result_and_checkpoints(tmp_path):
    older = make_run(tmp_path, "older", 1.0, model={"name_or_path": "org/other-base"})
    add_checkpoints(older, 3)
    newer = make_run(tmp_path, "newer", 2.0)
    (newer / "adapter").mkdir()
    (newer / "adapter" / "adapter_model.safetensors").write_bytes(b"weights")
    add_checkpoints(newer, 2, 4)
    full = make_run(tmp_path, "full", 0.5, adapter={"method": "full"})  # no model/ yet, no checkpoint
    bundled = [(f"Base · {model}", f"base:{model}") for model in ("assets/demo-model", "assets/demo-vlm")]
    assert model_choices(Caller(tmp_path)) == [
        *bundled,
        ("Base · org/other-base", "base:org/other-base"),
        ("newer · final adapter", "run:newer"),
        ("newer · checkpoint 4", "run:newer:4"),
        ("newer · checkpoint 2", "run:newer:2"),
        ("older · checkpoint 3", "run:older:3"),
    ]
    assert full.is_dir()
    assert model_choices(Caller(tmp_path / "empty")) == bundled


def test_a_relisting_never_undoes_a_pick_made_while_it_was_on_its_way(tmp_path):
    """The picker is relisted when the tab opens, with the pick of that moment; on a busy machine the answer may
    arrive after the visitor picked a run: it must carry no value then, or it would put the old pick back."""
    make_run(tmp_path, "mine", 1.0)
    (runs_dir(tmp_path) / "mine" / "adapter").mkdir()
    choices = model_choices(Caller(tmp_path))
    kept = _relisted(f"base:{DEMO}", choices)
    assert kept["choices"] == choices and "value" not in kept
    gone = _relisted("run:deleted-since", choices)
    assert gone["value"] == f"base:{DEMO}"


def test_keys_map_to_specs(tmp_path):
    assert spec_for(tmp_path, f"base:{DEMO}") == ModelSpec(base=DEMO)
    assert spec_for(tmp_path, "run:abc") == ModelSpec(run_dir=tmp_path / "runs" / "abc")
    assert spec_for(tmp_path, "run:abc:12") == ModelSpec(run_dir=tmp_path / "runs" / "abc", checkpoint=12)
    for bad in (None, "", "run:../x", "run:abc:x", "other:thing"):
        with pytest.raises(ChatError):
            spec_for(tmp_path, bad)


def test_sampling_widgets_validate_with_field_names():
    assert [spec.path for spec in SAMPLING] == ["temperature", "top_p", "max_new_tokens", "repetition_penalty", "seed"]
    assert parse_sampling_widgets([0.5, 0.8, 64.0, 1.1, " 7 "]) == SamplingParams(
        temperature=0.5, top_p=0.8, max_new_tokens=64, repetition_penalty=1.1, seed=7
    )
    assert parse_sampling_widgets(GREEDY_WIDGETS).seed is None
    with pytest.raises(ConfigError) as caught:
        parse_sampling_widgets([5, 0.8, 64, 1, "x"])
    assert caught.value.by_field() == {"seed": "must be a number", "temperature": "must be <= 2.0"}


def test_sending_without_a_model_or_text_explains_and_changes_nothing(workspace):
    idle, caller = ChatClient(workspace), Caller(workspace)
    assert "No model loaded" in status_html(idle, caller)
    chat, base, tuned, histories, textbox, note = final(respond(idle, caller, "hello", "", "Chat", {}, *GREEDY_WIDGETS))
    assert "Load a model first" in note and chat == base == tuned == [] and histories["chat"] == []
    note = final(respond(idle, caller, "  ", "", "Chat", {}, *GREEDY_WIDGETS))[-1]
    assert "Type a message first" in note


def test_a_bad_key_fails_to_load_with_a_message(workspace, client):
    caller = Caller(workspace)
    assert "Could not load: pick a model to load first" in final(load_clicked(client, caller, None))
    assert "not in the list" in final(load_clicked(client, caller, "run:missing"))
    assert "not in the list" in final(load_clicked(client, caller, "base:/etc"))
    assert client.pid is None


def test_load_then_chat_streams_a_reply_into_the_history(workspace, client):
    caller = Caller(workspace)
    statuses = list(load_clicked(client, caller, f"base:{DEMO}"))
    assert any("Loading…" in status for status in statuses[:-1])
    assert f"Loaded:</b> Base · {DEMO}" in statuses[-1] and client.info is not None

    steps = list(respond(client, caller, "Write 2024-03-15 out in full.", "Be brief.", "Chat", {}, *GREEDY_WIDGETS))
    assert len(steps) >= 3 and steps[0][4] == ""  # the text box is emptied as soon as the message is sent
    chat, base, tuned, histories, _, note = steps[-1]
    assert [turn["role"] for turn in chat] == ["user", "assistant"] and base == tuned == []
    prompt = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Write 2024-03-15 out in full."}]
    expected = "".join(client.generate(prompt, parse_sampling_widgets(GREEDY_WIDGETS))).lstrip()
    assert chat[1]["content"] == expected and expected
    assert histories["chat"] == chat

    follow_up = final(respond(client, caller, "And 1999-01-02?", "", "Chat", histories, *GREEDY_WIDGETS))
    assert [turn["role"] for turn in follow_up[0]] == ["user", "assistant"] * 2 and follow_up[0][:2] == chat
    assert clear_clicked() == [[], [], [], {}, ""]


def test_side_by_side_needs_an_adapter(workspace, client):
    ensure_base(client, workspace)
    note = final(respond(client, Caller(workspace), "hi", "", "Side by side", {}, *GREEDY_WIDGETS))[-1]
    assert "load a LoRA run or checkpoint" in note


def test_stop_ends_the_reply_and_keeps_what_was_written(workspace, client):
    ensure_base(client, workspace)
    story = "Tell me a very long story about everything."
    hot = SamplingParams(temperature=2, top_p=1, max_new_tokens=120)
    seed = next(  # a seed whose reply runs to the limit (searched: the demo model may be rebuilt)
        seed
        for seed in range(40)
        if list(client.generate([{"role": "user", "content": story}], hot.model_copy(update={"seed": seed})))
        and client.last_finish["reason"] == "length"
    )
    steps = respond(client, Caller(workspace), story, "", "Chat", {}, 2, 1, 120, 1, str(seed))
    next(steps)  # the message is sent
    next(steps)  # the first words are in
    stop_clicked(client, Caller(workspace))
    chat, *_, note = final(steps)
    assert client.last_finish["reason"] == "cancelled" and client.last_finish["tokens"] < 120
    assert "Stopped." in note and chat[-1]["role"] == "assistant" and chat[-1]["content"]


def test_side_by_side_answers_with_the_base_then_the_adapter(workspace, client, adapter_run):
    caller = Caller(workspace)
    statuses = list(load_clicked(client, caller, "run:tuned"))
    assert "Loaded:</b> demo-dates · final adapter" in statuses[-1] and "side by side available" in statuses[-1]
    steps = list(respond(client, caller, "Write 2024-03-15 out in full.", "", "Side by side", {}, *GREEDY_WIDGETS))
    chat, base, tuned, histories, _, _ = steps[-1]
    assert chat == [] and [turn["role"] for turn in base] == [turn["role"] for turn in tuned] == ["user", "assistant"]
    assert base[1]["content"] and tuned[1]["content"]
    # The base reply streams first: some step shows it complete while the fine-tuned one has not begun.
    assert any(step[1][-1]["content"] == base[1]["content"] and step[2][-1]["role"] == "user" for step in steps)
    prompt = [{"role": "user", "content": "Write 2024-03-15 out in full."}]
    greedy = parse_sampling_widgets(GREEDY_WIDGETS)
    assert base[1]["content"] == "".join(client.generate(prompt, greedy, use_adapter=False)).lstrip()
    assert tuned[1]["content"] == "".join(client.generate(prompt, greedy)).lstrip()
    assert histories == {"chat": [], "base": base, "tuned": tuned}


def test_demo_visitors_chat_only_with_their_own_model(workspace, client, adapter_run):
    """In demo mode Alice's run model serves Alice only: Bob neither reads its name nor chats with, stops or
    unloads it, not even while it loads; the bundled base model is open to both."""
    update_status(adapter_run, owner=owner_tag(ALICE))
    alice, bob = Caller(workspace, DEMO_MODE, ALICE), Caller(workspace, DEMO_MODE, BOB)
    # a visitor as the chat worker knows them: their owner tag, in demo mode only
    unsigned = Caller(workspace, DEMO_MODE, "alice-aaaaaaaaaaaaaaaa")
    invented = worker_tag(unsigned)  # an id the server never signed is nobody
    outside = worker_tag(Caller(workspace, DemoPolicy(), ALICE))
    assert (worker_tag(alice), invented, outside) == (owner_tag(ALICE), None, None)
    loading = load_clicked(client, alice, "run:tuned")
    assert "Loading…" in next(loading)  # the model's name is on this line: no one else may read it
    for someone in (bob, Caller(workspace, DEMO_MODE)):
        assert "another visitor's model is in use" in unescape(status_html(client, someone))
        assert "demo-dates" not in status_html(client, someone) and "tuned" not in status_html(client, someone)
    assert "Loaded:</b> demo-dates · final adapter" in final(loading)
    assert "run:tuned" not in [key for _, key in model_choices(bob)]

    for mode in ("Chat", "Side by side"):
        chat, base, tuned, histories, _, note = final(respond(client, bob, "hi", "", mode, {}, *GREEDY_WIDGETS))
        assert "another visitor's model is in use" in unescape(note) and chat == base == tuned == []
    with pytest.raises(ChatError, match="someone else's"):  # the worker's own check, should a load race the page's
        list(client.generate([{"role": "user", "content": "hi"}], SamplingParams(), caller=worker_tag(bob)))
    assert not client.stop(worker_tag(bob))
    assert "Nothing of yours to unload" in unload_clicked(client, bob) and client.pid is not None
    assert "demo-dates" in status_html(client, alice)
    chat = final(respond(client, alice, "Write 2024-03-15 out in full.", "", "Chat", {}, *GREEDY_WIDGETS))[0]
    assert chat[-1]["role"] == "assistant" and chat[-1]["content"]

    list(load_clicked(client, alice, f"base:{DEMO}"))  # public: Bob may use it too
    assert f"Loaded:</b> Base · {DEMO}" in status_html(client, bob)
    chat = final(respond(client, bob, "Write 2024-03-15 out in full.", "", "Chat", {}, *GREEDY_WIDGETS))[0]
    assert chat[-1]["role"] == "assistant" and chat[-1]["content"]


def test_unload_frees_the_model(client):
    ensure_base(client, client.workspace)
    caller = Caller(client.workspace)
    assert "Unloaded" in unload_clicked(client, caller)
    assert client.pid is None and "No model loaded" in status_html(client, caller)
    assert "No model is loaded" in unload_clicked(client, caller)


def test_tools_are_checked_before_anything_is_sent_and_then_reach_the_model(workspace, client):
    ensure_base(client, workspace)
    caller = Caller(workspace)
    chat, _, _, histories, textbox, note = final(
        respond(client, caller, "Weather in Paris?", "", "Chat", {}, *GREEDY_WIDGETS, tools="[{broken")
    )
    assert "Fix the tools: tools is not JSON" in note and chat == [] and histories["chat"] == []
    assert textbox == gr.skip()  # the message stays in the box, to send again

    weather = '[{"name": "get_weather", "parameters": {"type": "object", "properties": {}}}]'
    chat = final(respond(client, caller, "Weather in Paris?", "", "Chat", {}, *GREEDY_WIDGETS, tools=weather))[0]
    with_tools = client.last_finish["prompt_tokens"]
    final(respond(client, caller, "Weather in Paris?", "", "Chat", {}, *GREEDY_WIDGETS))
    assert [turn["role"] for turn in chat] == ["user", "assistant"]
    assert with_tools > client.last_finish["prompt_tokens"]  # the tools were rendered into what the model read
