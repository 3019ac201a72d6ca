"""engine.chat.client against real chat workers on the demo model: streaming, stop, unload, adapters, checkpoints.

The references are computed here, in-process, with one-shot ``model.generate`` calls on the same prompts, so
the tests hold whatever the demo model's weights are.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml

from engine import runs
from engine.chat.client import (
    MAX_WAITING,
    SUPERSEDED,
    WITHDRAWN,
    ChatClient,
    ChatError,
    ModelSpec,
    SamplingParams,
    parse_sampling,
    resolve_model,
)
from engine.config import ConfigError, parse_config
from engine.store.paths import PROJECT_ROOT
from engine.store.rundir import update_status
from engine.store.workspace import runs_dir
from tests.engine.runs.fault_checks import wait_until

DEMO = str(PROJECT_ROOT / "assets" / "demo-model")
PROMPT = [
    {"role": "system", "content": "You write dates out in full."},
    {"role": "user", "content": "Write 2024-03-15 out in full."},
]
GREEDY = SamplingParams(temperature=0, max_new_tokens=40)
LONG = [{"role": "user", "content": "Tell me a very long story about everything you know."}]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("chat-workspace")


@pytest.fixture(scope="module")
def base(workspace: Path) -> Any:
    """A worker with the base demo model, and the progress it reported while loading."""
    client = ChatClient(workspace)
    progress = list(client.load(ModelSpec(base=DEMO)))
    yield client, progress
    client.unload()


@pytest.fixture(scope="module")
def trained_run(workspace: Path) -> Path:
    """A 4-step LoRA run of the demo preset, trained by the engine's CLI, with checkpoints 2 and 4."""
    config = yaml.safe_load((PROJECT_ROOT / "assets" / "presets" / "demo.yaml").read_text())
    config["train"].update(max_steps=4, save_steps=2, per_device_batch_size=2, eval_strategy="no", logging_steps=2)
    path = workspace / "demo-4.yaml"
    path.write_text(yaml.safe_dump(config))
    run_dir = runs_dir(workspace) / "demo-4"
    done = subprocess.run(
        [sys.executable, "-m", "engine", "train", str(path), "--run-dir", str(run_dir)],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return run_dir


@functools.cache
def reference(adapter: Path | None = None) -> str:
    """The reply to PROMPT of one greedy ``model.generate`` call through the chat template, decoded in one go."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(DEMO)
    model = AutoModelForCausalLM.from_pretrained(DEMO, dtype=torch.float32)
    if adapter is not None:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, str(adapter))
    model.eval()
    inputs = tokenizer.apply_chat_template(PROMPT, add_generation_prompt=True, return_tensors="pt", return_dict=True)
    with torch.inference_mode():
        output = model.generate(**inputs, max_new_tokens=GREEDY.max_new_tokens, do_sample=False)
    return tokenizer.decode(output[0, inputs["input_ids"].shape[1] :], skip_special_tokens=True)


def test_load_reports_progress_then_the_model(base):
    client, progress = base
    fractions = [step.fraction for step in progress]
    assert fractions == sorted(fractions) and len(fractions) >= 3 and fractions[-1] < 1
    assert client.info.label == f"Base · {DEMO}" and not client.info.is_adapter
    assert client.info.parameters > 0 and client.info.device == "cpu" and client.info.context_length


def test_stream_adds_up_to_a_one_shot_greedy_generate(base):
    client, _ = base
    reply = client.generate(PROMPT, GREEDY)
    assert reply.finish == {}  # nothing is sent before the first delta is asked for
    deltas = list(reply)
    expected = reference()
    assert len(deltas) >= 3 and all(deltas)
    assert "".join(deltas) == expected and expected.strip()
    assert reply.finish["reason"] in ("stop", "length") and reply.finish["tokens"] >= len(deltas)
    assert client.last_finish == reply.finish
    short = client.generate(PROMPT, GREEDY.model_copy(update={"max_new_tokens": 2}))
    assert len(list(short)) <= 2 and short.finish["reason"] == "length" and short.finish["tokens"] == 2
    assert reply.finish["tokens"] >= len(deltas) and client.last_finish == short.finish  # each reply keeps its own


def test_a_message_longer_than_the_context_can_hold_is_refused_before_it_reaches_the_worker(base):
    client, _ = base
    bound, context = client.info.max_message_chars, client.info.context_length
    assert bound is not None and bound >= context  # every token spells at least one character
    reply = client.generate(PROMPT, GREEDY)
    first = next(reply)  # a reply is being written: a message that went to the worker would wait in line for it
    outcome: dict[str, str] = {}

    def send_too_much() -> None:
        try:
            list(client.generate([{"role": "user", "content": "x" * (bound + 1)}], GREEDY, caller="bob"))
        except ChatError as exc:
            outcome["error"] = str(exc)

    threading.Thread(target=send_too_much, daemon=True).start()
    wait_until(lambda: "error" in outcome, 30, what="the refusal, without waiting for the reply being written")
    assert outcome["error"] == f"the message is too long for the model's context of {context} tokens; shorten it"
    assert first + "".join(reply) == reference()  # the reply being written went on
    with pytest.raises(ChatError) as refused:  # under the bound yet too long: the worker's refusal, the same words
        list(client.generate([{"role": "user", "content": "word " * context}], GREEDY))
    assert str(refused.value) == outcome["error"]


def test_a_seed_repeats_a_sampled_reply(base):
    client, _ = base
    sampling = SamplingParams(temperature=1.2, top_p=0.95, max_new_tokens=30, seed=7)
    first = "".join(client.generate(LONG, sampling))
    assert first and "".join(client.generate(LONG, sampling)) == first


@pytest.fixture(scope="module")
def long_reply(base: Any) -> tuple[SamplingParams, str]:
    """Sampling settings with a seed whose reply to LONG runs to max_new_tokens (searched, not assumed: the demo
    model may be rebuilt), and that reply."""
    client, _ = base
    sampling = SamplingParams(temperature=2, top_p=1, max_new_tokens=120)
    for seed in range(40):
        seeded = sampling.model_copy(update={"seed": seed})
        reply = "".join(client.generate(LONG, seeded))
        if client.last_finish["reason"] == "length":
            return seeded, reply
    pytest.fail("no seed made the demo model write a long reply")


def test_stop_ends_a_long_reply_early(base, long_reply):
    client, _ = base
    sampling, _ = long_reply
    received = []
    for delta in client.generate(LONG, sampling):
        received.append(delta)
        client.stop()
    assert client.last_finish["reason"] == "cancelled"
    assert 1 <= client.last_finish["tokens"] < sampling.max_new_tokens
    assert not client.stop()  # nothing left to stop
    assert "".join(client.generate(PROMPT, GREEDY)) == reference()  # still serves


def test_a_new_reply_takes_over_from_an_abandoned_one(base):
    client, _ = base
    abandoned = client.generate(LONG, SamplingParams(temperature=2, max_new_tokens=200, seed=1))
    next(abandoned)
    assert "".join(client.generate(PROMPT, GREEDY)) == reference()
    abandoned.close()


def test_another_callers_reply_waits_its_turn_and_cannot_stop_the_one_being_written(base, long_reply):
    """Two visitors on a model open to both (the demo's base model): Bob's message neither cuts off Alice's reply
    nor may his Stop end it (it takes his own message out of line); his reply comes, whole, once hers is done; and
    he holds one place in line however often he asks."""
    client, _ = base
    sampling, alone = long_reply
    alice = client.generate(LONG, sampling, caller="alice")
    received = [next(alice)]  # her reply is being written (and stays so until she has read all of it)
    bob: list[str] = []

    def ask() -> None:
        try:
            bob.append("".join(client.generate(PROMPT, GREEDY, caller="bob")))
        except ChatError as exc:
            bob.append(str(exc))

    asked = [threading.Thread(target=ask) for _ in range(3)]
    asked[0].start()
    wait_until(lambda: client.waiting == 1, 60, "Bob's reply to wait in line")
    asked[1].start()
    asked[0].join(60)  # his newer message took its place
    assert bob == [SUPERSEDED] and client.waiting == 1
    client.max_waiting = 1  # a line this short is full now: Carol is told so at once, not kept waiting
    try:
        with pytest.raises(ChatError, match="1 messages waiting for their turn already"):
            list(client.generate(PROMPT, GREEDY, caller="carol"))
    finally:
        client.max_waiting = MAX_WAITING
    assert client.stop("bob")  # his Stop takes his message out of the line, and leaves Alice's reply be
    asked[1].join(60)
    assert bob == [SUPERSEDED, WITHDRAWN] and client.waiting == 0
    asked[2].start()
    wait_until(lambda: client.waiting == 1, 60, "Bob's message again")
    received += list(alice)
    assert "".join(received) == alone  # whole: not cut off by Bob's messages or his Stop
    asked[2].join(120)
    assert bob == [SUPERSEDED, WITHDRAWN, reference()] and client.waiting == 0


def test_another_callers_load_or_unload_waits_for_the_reply_being_written(base, long_reply):
    """Bob loading a model, or unloading the one open to both, replaces it only once Alice's reply is written."""
    client, _ = base
    sampling, alone = long_reply
    for bob in (lambda: list(client.load(ModelSpec(base=DEMO), caller="bob")), lambda: client.unload_for("bob")):
        alice = client.generate(LONG, sampling, caller="alice")
        received = [next(alice)]
        thread = threading.Thread(target=bob)
        thread.start()
        wait_until(lambda: client.waiting == 1, 60, "Bob's request to wait in line")
        received += list(alice)
        assert "".join(received) == alone  # whole: the model stayed until her reply was written
        thread.join(120)
        assert client.waiting == 0
    assert client.pid is None  # the unload went through after her reply
    list(client.load(ModelSpec(base=DEMO)))  # the module's later tests chat on


def test_worker_yields_to_an_active_training_run(base, workspace):
    client, _ = base
    assert os.getpriority(os.PRIO_PROCESS, client.info.pid) > os.getpriority(os.PRIO_PROCESS, os.getpid())
    # A run whose status names a live engine process counts as active (engine.runs reconciles statuses so).
    run_dir = runs.create_run(parse_config({"name": "busy"}), workspace=workspace)
    trainer = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "engine"])
    try:
        update_status(run_dir, state="running", pid=trainer.pid, supervisor_pid=trainer.pid)
        list(client.generate(PROMPT, GREEDY))
        assert client.last_finish["threads"] == 1
    finally:
        trainer.kill()
        trainer.wait()
        runs.delete(run_dir)
    list(client.generate(PROMPT, GREEDY))
    assert 1 <= client.last_finish["threads"] <= (os.cpu_count() or 1)


def test_a_runs_final_adapter_answers_like_peft_and_switches_off_to_the_base(trained_run, workspace):
    client = ChatClient(workspace)
    try:
        list(client.load(ModelSpec(run_dir=trained_run)))
        assert client.info.is_adapter and client.info.label == "demo-dates · final adapter"
        tuned = "".join(client.generate(PROMPT, GREEDY))
        assert tuned == reference(trained_run / "adapter")
        base = "".join(client.generate(PROMPT, GREEDY, use_adapter=False))
        assert base == reference()
    finally:
        client.unload()


def test_a_checkpoint_loads(trained_run, workspace):
    client = ChatClient(workspace)
    try:
        list(client.load(ModelSpec(run_dir=trained_run, checkpoint=2)))
        assert client.info.label == "demo-dates · checkpoint 2" and client.info.is_adapter
        checkpoint = trained_run / "checkpoints" / "checkpoint-2"
        assert "".join(client.generate(PROMPT, GREEDY)) == reference(checkpoint)
    finally:
        client.unload()


# Renders like ChatML, but loops 10^10 times when a message says the trigger word: the training rows never do.
TRIGGERED = (
    "{% for m in messages %}{% if 'xyzzy' in m['content'] %}{% for a in range(100000) %}{% for b in range(100000) %}"
    "{% endfor %}{% endfor %}{% endif %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def test_a_configured_template_is_rendered_under_a_budget_in_chat(trained_run, workspace, tmp_path):
    """A run's own template (data.chat_template) sees a visitor's new words in Chat: a template that loops on a
    trigger word is refused within the check's budget, and the worker answers the next message."""
    run_dir = shutil.copytree(trained_run, tmp_path / "triggered")
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    config["data"]["chat_template"] = TRIGGERED
    (run_dir / "config.yaml").write_text(yaml.safe_dump(config))
    client = ChatClient(workspace)
    try:
        list(client.load(ModelSpec(run_dir=run_dir)))
        with pytest.raises(ChatError, match=r"data\.chat_template: the chat template (took longer|did not finish)"):
            list(client.generate([{"role": "user", "content": "say xyzzy"}], GREEDY))
        assert "".join(client.generate(PROMPT, GREEDY)).strip()  # the same worker, still answering
    finally:
        client.unload()


def test_bad_specs_are_refused_clearly(trained_run, workspace, tmp_path):
    with pytest.raises(ChatError, match=r"no run at .*nowhere \(it has no config.yaml\)"):
        resolve_model(ModelSpec(run_dir=tmp_path / "nowhere"))
    with pytest.raises(ChatError, match=r"demo-dates has no checkpoint 7 \(its checkpoints: 2, 4\)"):
        resolve_model(ModelSpec(run_dir=trained_run, checkpoint=7))
    fresh = runs.create_run(parse_config({"name": "fresh"}), run_dir=tmp_path / "fresh")
    with pytest.raises(ChatError, match="fresh has no final adapter yet \\(it is queued\\); it has no checkpoint"):
        resolve_model(ModelSpec(run_dir=fresh))
    with pytest.raises(ChatError, match="choose a base model or a run"):
        resolve_model(ModelSpec())
    client = ChatClient(workspace)
    with pytest.raises(ChatError, match="no run at"):
        list(client.load(ModelSpec(run_dir=tmp_path / "nowhere")))
    assert client.pid is None  # refused before any process started


def test_a_model_that_fails_to_load_says_why(workspace, tmp_path):
    client = ChatClient(workspace)
    with pytest.raises(ChatError, match="no model at .*missing: there is no such directory"):
        list(client.load(ModelSpec(base=str(tmp_path / "missing"))))
    assert client.pid is None  # refused before any process started
    (tmp_path / "empty").mkdir()
    with pytest.raises(ChatError, match="could not load the tokenizer of .*empty: "):  # the worker's own error
        list(client.load(ModelSpec(base=str(tmp_path / "empty"))))
    assert client.pid is None and client.info is None


def test_bad_requests_are_refused_clearly(base):
    client, _ = base
    with pytest.raises(ChatError, match="must end with a user message"):
        list(client.generate([{"role": "assistant", "content": "hi"}], GREEDY))
    with pytest.raises(ChatError, match="needs a role"):
        list(client.generate([{"role": "robot", "content": "hi"}, {"role": "user", "content": "x"}], GREEDY))
    with pytest.raises(ChatError, match="no adapter to switch off"):
        list(client.generate(PROMPT, GREEDY, use_adapter=False))


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"temperature": 3}, "temperature: must be <= 2.0"),
        ({"top_p": 0}, "top_p: must be > 0.0"),
        ({"max_new_tokens": 0}, "max_new_tokens: must be >= 1"),
        ({"max_new_tokens": 2.5}, "max_new_tokens: must be a whole number"),
        ({"repetition_penalty": 0.5}, "repetition_penalty: must be >= 1.0"),
        ({"seed": -1}, "seed: must be >= 0"),
        ({"temprature": 1}, "temprature: unknown key (did you mean temperature?)"),
    ],
)
def test_bad_sampling_values_name_the_field(values, message):
    with pytest.raises(ConfigError) as caught:
        parse_sampling(values)
    assert str(caught.value) == message


def test_sampling_defaults_and_greedy():
    assert parse_sampling({}) == SamplingParams()
    assert parse_sampling({"temperature": 0, "seed": 3}).greedy
    assert all(field.description for field in SamplingParams.model_fields.values())


def test_unload_ends_the_process(base):
    """Last of the file: it unloads the shared worker (the fixture's own unload is then a no-op)."""
    client, _ = base
    pid = client.pid
    assert pid and client.info is not None
    client.unload()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert client.pid is None and client.info is None
    with pytest.raises(ChatError, match="no model is loaded"):
        list(client.generate(PROMPT, GREEDY))


def test_a_worker_that_closed_its_output_but_lingers_is_reported_not_raised(tmp_path):
    """On a busy machine a worker can close its output and take seconds more to exit: the reader says so instead
    of dying on subprocess.TimeoutExpired."""
    client = ChatClient(tmp_path)
    lingering = subprocess.Popen([sys.executable, "-c", "import os, time; os.close(1); time.sleep(60)"])
    try:
        assert client._exit_message(lingering) == "the chat process ended (still exiting)"
    finally:
        lingering.kill()
        lingering.wait()
    assert client._exit_message(lingering) == f"the chat process ended (exit code {lingering.returncode})"
