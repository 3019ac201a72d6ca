"""Chat with images: a vision-language model (the demo VLM, a tiny LLaVA, and a 20-step LoRA run of it on the
coloured shapes) reads a user turn's image files, named by path (engine.chat.images). The worker's prompt is the
processor's chat template with the image, to the token; the base and the adapter answer as ``model.generate`` does
on the same inputs; streaming and Stop behave as for text; a text model, a file that is not an image, a
decompression bomb and a typed placeholder are refused with a clear message.

The references are computed here, in-process, from the processor and the model themselves, with the conversation
built by hand (not by engine.chat.images)."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.chat.client import ChatClient, ChatError, ModelInfo, ModelSpec, SamplingParams
from engine.chat.images import MAX_CHAT_IMAGES, ImageRefused, canonical_messages, chat_images
from engine.config.sections import DEMO_MODEL
from tests.helpers.demo_vlm_run import DEMO_VLM, SHAPES, VLM_RUN_NAME, trained_vlm_run

pytestmark = pytest.mark.integration

PURPLE_SQUARE = SHAPES / "eval_0001.png"  # demo_vlm_eval.jsonl: "Which colour is this shape?" -> purple
YELLOW_ONE = SHAPES / "eval_0002.png"
QUESTION = "Which colour is this shape?"
GREEDY = SamplingParams(temperature=0, max_new_tokens=12)


def asked(question: str = QUESTION, image: Path = PURPLE_SQUARE) -> list[dict[str, Any]]:
    return [{"role": "user", "content": question, "images": [str(image)]}]


# --- the shape of a turn's images (no worker) ---------------------------------------------------------------


def test_a_turns_images_are_absolute_paths_of_files_on_the_users_turns(tmp_path):
    assert chat_images(asked()) == [PURPLE_SQUARE.resolve()]
    assert chat_images([{"role": "user", "content": "hi"}]) == []
    refusals = {
        "only the user's messages may carry images, not message 1 (assistant)": [
            {"role": "assistant", "content": "x", "images": [str(PURPLE_SQUARE)]}
        ],
        "message 1: its images must be a list of image file paths": [
            {"role": "user", "content": "x", "images": str(PURPLE_SQUARE)}
        ],
        "message 1: an image is named by its absolute path, not 'shape.png'": [
            {"role": "user", "content": "x", "images": ["shape.png"]}
        ],
        "message 1: an image is named by its absolute path, not 'https://": [
            {"role": "user", "content": "x", "images": ["https://example.com/a.png"]}
        ],
        "message 1: the image .*: no such file": [
            {"role": "user", "content": "x", "images": [str(tmp_path / "gone.png")]}
        ],
        f"carries {MAX_CHAT_IMAGES + 1} images, more than the {MAX_CHAT_IMAGES} a chat may hold": [
            {"role": "user", "content": "x", "images": [str(PURPLE_SQUARE)] * (MAX_CHAT_IMAGES + 1)}
        ],
    }
    for message, turns in refusals.items():
        with pytest.raises(ImageRefused, match=message.replace("(", r"\(").replace(")", r"\)")):
            chat_images(turns)


def test_a_turns_images_go_before_its_text_and_a_typed_placeholder_is_refused():
    turns = [
        {"role": "user", "content": QUESTION, "images": ["/a.png", "/b.png"]},
        {"role": "assistant", "content": "purple"},
    ]
    assert canonical_messages(turns) == [
        {"role": "user", "content": f"<image><image>{QUESTION}"},
        {"role": "assistant", "content": "purple"},
    ]
    with pytest.raises(ImageRefused, match="message 1 holds <image>, which stands for an image"):
        canonical_messages([{"role": "user", "content": "look: <image>"}])
    with pytest.raises(ImageRefused, match=r"message 1 holds <\|image_pad\|>"):  # the model's own image token
        canonical_messages([{"role": "user", "content": "<|image_pad|>"}], image_tokens=["<|image_pad|>"])


def test_a_text_model_refuses_an_image_before_anything_is_sent(tmp_path):
    """The client knows from the worker's report that the model reads text only: no request leaves it (a client
    with no worker behind it would otherwise fail on sending)."""
    client = ChatClient(tmp_path)
    client.info = ModelInfo(f"Base · {DEMO_MODEL}", False, 1, "cpu", 256, 0.1)
    with pytest.raises(ChatError, match=f"Base · {DEMO_MODEL} reads text only, so it cannot take an image"):
        list(client.generate(asked(), GREEDY))
    with pytest.raises(ChatError, match="an image is named by its absolute path"):  # the shape, checked first
        list(client.generate([{"role": "user", "content": "x", "images": ["a.png"]}], GREEDY))


# --- a real worker ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def vlm_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return trained_vlm_run(tmp_path_factory, tmp_path_factory.mktemp("chat-images"))


@pytest.fixture(scope="module")
def tuned(vlm_run: Path) -> Iterator[ChatClient]:
    """A worker with the run's final adapter on the demo VLM."""
    client = ChatClient(vlm_run.parent.parent)
    list(client.load(ModelSpec(run_dir=vlm_run)))
    yield client
    client.unload()


@functools.cache
def processor() -> Any:
    from transformers import AutoProcessor

    return AutoProcessor.from_pretrained(DEMO_VLM)


def by_hand(question: str, image: Path | None) -> list[dict[str, Any]]:
    """The conversation as the processor's chat template takes it, built by hand: the image part, then the text."""
    from PIL import Image

    parts: list[dict[str, Any]] = []
    if image is not None:
        with Image.open(image) as opened:
            parts.append({"type": "image", "image": opened.convert("RGB")})
    return [{"role": "user", "content": [*parts, {"type": "text", "text": question}]}]


def encoded(question: str, image: Path | None) -> Any:
    return processor().apply_chat_template(
        by_hand(question, image), add_generation_prompt=True, tokenize=True, return_dict=True, return_tensors="pt"
    )


@functools.cache
def reference(question: str, image: Path, adapter: Path | None) -> str:
    """The greedy reply of one ``model.generate`` call on the processor's inputs, decoded in one go."""
    import torch
    from transformers import AutoModelForImageTextToText

    model = AutoModelForImageTextToText.from_pretrained(DEMO_VLM, dtype=torch.float32)
    if adapter is not None:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, str(adapter))
    model.eval()
    inputs = encoded(question, image)
    with torch.inference_mode():
        output = model.generate(**inputs, max_new_tokens=GREEDY.max_new_tokens, do_sample=False)
    tokenizer = processor().tokenizer
    return tokenizer.decode(output[0, inputs["input_ids"].shape[1] :], skip_special_tokens=True)


def test_the_vision_model_loads_with_its_processor_and_says_it_reads_images(tuned):
    info = tuned.info
    assert info.vision and info.is_adapter and info.label == f"{VLM_RUN_NAME} · final adapter"
    assert info.context_length == 256  # its language model's context (the LLaVA config nests it)


def test_the_prompt_is_the_processors_template_with_the_image_to_the_token(tuned):
    with_image = encoded(QUESTION, PURPLE_SQUARE)["input_ids"].shape[1]
    without = encoded(QUESTION, None)["input_ids"].shape[1]
    assert with_image - without == image_tokens()  # the image's tokens (assets/demo-vlm/config.json)
    list(tuned.generate(asked(), GREEDY))
    assert tuned.last_finish["prompt_tokens"] == with_image
    list(tuned.generate([{"role": "user", "content": QUESTION}], GREEDY))  # a VLM reads text alone too
    assert tuned.last_finish["prompt_tokens"] == without


def test_base_and_adapter_answer_as_generate_does_on_the_same_inputs(tuned, vlm_run):
    for image in (PURPLE_SQUARE, YELLOW_ONE):
        with_adapter = "".join(tuned.generate(asked(image=image), GREEDY))
        assert with_adapter == reference(QUESTION, image, vlm_run / "adapter")
        base = "".join(tuned.generate(asked(image=image), GREEDY, use_adapter=False))
        assert base == reference(QUESTION, image, None)
        assert with_adapter != base  # 20 steps on the shapes: the adapter answers otherwise


def test_a_reply_streams_and_stops_as_for_text(tuned):
    sampling = SamplingParams(temperature=2, top_p=1, max_new_tokens=12)
    for seed in range(40):  # a seed whose reply runs to the limit (searched, not assumed)
        list(tuned.generate(asked(), sampling.model_copy(update={"seed": seed}), use_adapter=False))
        if tuned.last_finish["reason"] == "length":
            break
    else:
        pytest.fail("no seed made the base write a long reply")
    received = []
    for delta in tuned.generate(asked(), sampling.model_copy(update={"seed": seed}), use_adapter=False):
        received.append(delta)
        tuned.stop()
    assert tuned.last_finish["reason"] == "cancelled" and 1 <= tuned.last_finish["tokens"] < 12 and received


def test_images_that_cannot_be_used_are_refused_and_the_worker_answers_on(tuned, vlm_run, tmp_path):
    from PIL import Image

    not_image = tmp_path / "notes.png"
    not_image.write_text("these are notes, not pixels")
    truncated = tmp_path / "cut.png"
    truncated.write_bytes(PURPLE_SQUARE.read_bytes()[:200])
    bomb = tmp_path / "bomb.png"  # 10000 x 10000 one-bit pixels: a small file that would decode to 300 MB as RGB
    Image.new("1", (10000, 10000)).save(bomb)
    refusals = {
        not_image: "the image cannot be used: notes.png is not an image file Pillow can read",
        truncated: "the image cannot be used: cut.png is corrupt or truncated",
        bomb: r"the image cannot be used: bomb.png is 10000 x 10000 pixels \(100,000,000\), more than the "
        r"67,108,864 an image may have; refused without decoding it",
    }
    for path, message in refusals.items():
        with pytest.raises(ChatError, match=message):
            list(tuned.generate(asked(image=path), GREEDY))
    with pytest.raises(ChatError, match="message 1 holds <image>"):
        list(tuned.generate([{"role": "user", "content": "<image>" + QUESTION}], GREEDY))
    assert "".join(tuned.generate(asked(), GREEDY)) == reference(QUESTION, PURPLE_SQUARE, vlm_run / "adapter")


def test_a_text_worker_refuses_an_image_itself(tmp_path):
    """Should a client claim otherwise, the text model's worker refuses images on its own."""
    client = ChatClient(tmp_path)
    try:
        list(client.load(ModelSpec(base=DEMO_MODEL)))
        assert not client.info.vision
        client.info = dataclasses.replace(client.info, vision=True)  # a client that lets the image through
        with pytest.raises(ChatError, match="the loaded model reads text only, so it cannot take an image"):
            list(client.generate(asked(), GREEDY))
        assert "".join(client.generate([{"role": "user", "content": QUESTION}], GREEDY)).strip()
    finally:
        client.unload()


def image_tokens() -> int:
    """How many tokens one image takes in the demo VLM's prompt, as its config says (image_seq_length)."""
    import json

    return json.loads((Path(DEMO_VLM) / "config.json").read_text())["image_seq_length"]
