"""The Chat tab with images: the image box beside the message is shown while a vision-language model is loaded, the
file a browser uploaded reaches the chat worker by its path (both sides of Side by side get it, and the history
shows it in the user's turn), a text model refuses an image before anything is sent, a path that is not an upload
is refused, and a message whose image the worker cannot use goes back to its boxes."""

from __future__ import annotations

import shutil
from html import unescape
from pathlib import Path

import gradio as gr
import pytest

from engine.chat.client import ChatClient, ModelInfo
from studio.chat import tab
from studio.chat.actions import clear_clicked, load_clicked, parse_sampling_widgets
from studio.chat.images import NOT_UPLOADED, TEXT_ONLY, shown_turn, takes_images, user_turn
from studio.context import StudioContext
from studio.demo.caller import Caller
from studio.demo.ownership import owner_tag
from studio.i18n.catalog import text
from studio.path_guard import chat_images_dir, confine_images
from tests.engine.chat.test_chat_images import image_tokens
from tests.helpers.demo_vlm_run import SHAPES, VLM_RUN_ID, VLM_RUN_NAME, trained_vlm_run
from tests.helpers.pages import call_event
from tests.helpers.visitors import ALICE, BOB, DEMO
from tests.studio.chat.test_chat_tab import GREEDY_WIDGETS, final

QUESTION = "Which colour is this shape?"
ZH = "zh-CN"


@pytest.fixture
def uploads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Gradio's upload folder for this test (GRADIO_TEMP_DIR, read by Gradio and by studio.path_guard alike)."""
    folder = tmp_path / "gradio-uploads"
    folder.mkdir()
    monkeypatch.setenv("GRADIO_TEMP_DIR", str(folder))
    return folder


def uploaded(uploads: Path, source: Path, folder: str = "3f9a0c") -> Path:
    """``source`` as Gradio stores an upload: in a folder of its own under the upload folder."""
    target = uploads / folder / "shape.png"
    target.parent.mkdir(exist_ok=True)
    shutil.copyfile(source, target)
    return target.resolve()


def stand_in(workspace: Path, vision: bool, owner: str | None = None) -> ChatClient:
    """A client reporting a loaded model (a VLM or a text model), with no worker behind it: a request that reached
    the worker would fail with 'no model is loaded'."""
    client = ChatClient(workspace)
    label = "Base · assets/demo-vlm" if vision else "Base · assets/demo-model"
    client.info, client.owner = ModelInfo(label, False, 1, "cpu", 256, 0.1, vision=vision), owner
    return client


def test_the_image_box_shows_while_a_vision_model_is_loaded_for_the_caller(tmp_path):
    caller = Caller(tmp_path)
    assert tab.image_box(stand_in(tmp_path, vision=True), caller) == gr.update(visible=True)
    hidden = gr.update(visible=False, value=None)  # emptied: an image left in it would go with the next message
    assert tab.image_box(stand_in(tmp_path, vision=False), caller) == hidden
    assert tab.image_box(ChatClient(tmp_path), caller) == hidden
    alices = stand_in(tmp_path, vision=True, owner=owner_tag(ALICE))
    assert takes_images(alices, Caller(tmp_path, DEMO, ALICE)) and not takes_images(alices, Caller(tmp_path, DEMO, BOB))


def test_a_text_model_refuses_an_image_before_anything_is_sent(tmp_path, uploads):
    image = str(uploaded(uploads, SHAPES / "eval_0001.png"))
    client = stand_in(tmp_path, vision=False)
    for caller in (Caller(tmp_path), Caller(tmp_path, language=ZH)):
        chat, base, tuned, histories, textbox, note = final(
            tab.respond(client, caller, QUESTION, "", "Chat", {}, *GREEDY_WIDGETS, image=image)
        )
        assert text(TEXT_ONLY, caller.language) in unescape(note)
        assert chat == base == tuned == [] and histories["chat"] == [] and textbox == gr.skip()  # all stays
    # A conversation that already holds an image (sent while a VLM was loaded) is refused too.
    history = {"chat": [user_turn(QUESTION, Path(image)), {"role": "assistant", "content": "purple"}]}
    note = final(tab.respond(client, Caller(tmp_path), "And now?", "", "Chat", history, *GREEDY_WIDGETS))[-1]
    assert text(TEXT_ONLY, "en") in unescape(note)


def test_only_an_upload_is_sent_never_a_path_typed_or_linked(tmp_path, uploads):
    client, caller = stand_in(tmp_path, vision=True), Caller(tmp_path)
    link = uploads / "link.png"
    link.symlink_to(SHAPES / "eval_0001.png")  # inside the upload folder, pointing out of it
    for image in (str(SHAPES / "eval_0001.png"), "/etc/hostname", str(link), str(uploads / ".." / "x.png")):
        chat, _, _, histories, textbox, note = final(
            tab.respond(client, caller, QUESTION, "", "Chat", {}, *GREEDY_WIDGETS, image=image)
        )
        assert text(NOT_UPLOADED, "en") in unescape(note) and chat == [] and textbox == gr.skip()


def test_the_image_box_hands_over_an_upload_unopened(tmp_path, uploads):
    """Gradio's Image would open the upload with Pillow first (and fail with a bare error on a file that is not an
    image); the tab's box hands the path over, and the handler answers: here a text model's refusal, so nothing
    reaches a worker."""
    with gr.Blocks() as blocks:
        chat_tab = tab.ChatTab(StudioContext(tmp_path, gr.State(None), gr.Tabs(), visitor=gr.State(None)))
    chat_tab.client.info = ModelInfo("Base · assets/demo-model", False, 1, "cpu", 256, 0.1)
    notes = uploads / "abc" / "notes.png"
    notes.parent.mkdir()
    notes.write_text("not pixels")
    payload = {"path": str(notes), "orig_name": "notes.png", "meta": {"_type": "gradio.FileData"}}
    outputs = call_event(blocks, "send", [None, QUESTION, "", "Chat", {}, *GREEDY_WIDGETS, "", payload])
    assert text(TEXT_ONLY, "en") in unescape(outputs[5])


# --- a real worker on a trained run -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    workspace = tmp_path_factory.mktemp("chat-images-tab")
    trained_vlm_run(tmp_path_factory, workspace)
    return workspace


@pytest.fixture(scope="module")
def client(workspace: Path) -> ChatClient:
    chat = ChatClient(workspace)
    *_, status = load_clicked(chat, Caller(workspace), f"run:{VLM_RUN_ID}")
    assert f"Loaded:</b> {VLM_RUN_NAME} · final adapter" in status
    yield chat
    chat.unload()


def test_the_upload_reaches_the_worker_on_both_sides(client, workspace, uploads):
    caller = Caller(workspace)
    assert tab.image_box(client, caller) == gr.update(visible=True)
    image = uploaded(uploads, SHAPES / "eval_0001.png")
    steps = list(tab.respond(client, caller, QUESTION, "", "Side by side", {}, *GREEDY_WIDGETS, image=str(image)))
    assert steps[0][4] == "" and tab.image_follows_text(steps[0], str(image)) is None  # both boxes emptied
    chat, base, tuned, histories, _, note = steps[-1]
    kept = Path(histories["tuned"][0]["images"][0])  # the conversation's own copy of the upload, kept_image
    assert kept.read_bytes() == image.read_bytes() and kept.name == image.name
    assert not kept.is_relative_to(uploads) and kept.parent.parent == chat_images_dir()
    sent = {"role": "user", "content": QUESTION, "images": [str(kept)]}
    assert histories["base"][0] == histories["tuned"][0] == sent and chat == []
    shown = {"role": "user", "content": [{"path": str(kept)}, QUESTION]}  # the image in the user's turn
    assert base[0] == tuned[0] == shown == shown_turn(sent)
    tuned_tokens = client.last_finish["prompt_tokens"]
    greedy = parse_sampling_widgets(GREEDY_WIDGETS)
    assert base[1]["content"] == "".join(client.generate([sent], greedy, use_adapter=False)).lstrip()
    assert tuned[1]["content"] == "".join(client.generate([sent], greedy)).lstrip()
    assert tuned_tokens == client.last_finish["prompt_tokens"]
    list(client.generate([{"role": "user", "content": QUESTION}], greedy))
    assert tuned_tokens == client.last_finish["prompt_tokens"] + image_tokens()  # the image's tokens were read
    assert base[1]["content"] != tuned[1]["content"]

    # A follow-up without an image, once Gradio has swept the upload (it does 50-55 minutes after it came): the first
    # turn keeps its image in what the model reads.
    shutil.rmtree(image.parent)
    follow = final(tab.respond(client, caller, "And its shape?", "", "Side by side", histories, *GREEDY_WIDGETS))
    assert follow[2][:2] == tuned and follow[2][2] == {"role": "user", "content": "And its shape?"}
    assert follow[2][3]["role"] == "assistant" and follow[2][3]["content"]
    assert "failed" not in unescape(follow[-1])
    assert client.last_finish["prompt_tokens"] > tuned_tokens

    # Clear forgets the conversation's images (as the end of the page's session does: the State's delete_callback).
    cleared = clear_clicked(follow[3])
    assert cleared[3] == {} and not kept.exists() and not kept.parent.exists()


def test_an_image_the_worker_cannot_use_sends_the_message_back(client, workspace, uploads):
    caller = Caller(workspace)
    broken = uploads / "cut" / "shape.png"
    broken.parent.mkdir()
    broken.write_bytes((SHAPES / "eval_0001.png").read_bytes()[:200])
    steps = list(tab.respond(client, caller, QUESTION, "", "Chat", {}, *GREEDY_WIDGETS, image=str(broken)))
    chat, _, _, histories, textbox, note = steps[-1]
    assert "The reply failed: the image cannot be used: shape.png is corrupt or truncated" in unescape(note)
    assert chat == [] and histories["chat"] == []  # sent again, it would fail the same way
    assert not any(chat_images_dir().glob("*/shape.png")) or all(  # its kept copy went with it
        path.read_bytes() != broken.read_bytes() for path in chat_images_dir().glob("*/shape.png")
    )
    assert textbox == QUESTION and tab.image_follows_text(steps[-1], str(broken)) == str(broken)  # back in the boxes
    chat = final(tab.respond(client, caller, QUESTION, "", "Chat", {}, *GREEDY_WIDGETS))[0]
    assert [turn["role"] for turn in chat] == ["user", "assistant"]  # the worker answers on


def test_a_demo_visitor_chats_with_an_image(workspace, uploads, monkeypatch):
    """In demo mode image paths are held to the bundled sets' and visitors' folders (confine_images); a visitor's
    chat image, kept by the conversation, is read all the same, and the bundled VLM answers it."""
    monkeypatch.delenv("STUDIO_IMAGE_ROOTS", raising=False)
    confine_images(workspace, demo=True)
    alice = Caller(workspace, DEMO, ALICE)
    chat = ChatClient(workspace)
    try:
        *_, status = load_clicked(chat, alice, "base:assets/demo-vlm")
        assert "Loaded:</b> Base · assets/demo-vlm" in status
        image = uploaded(uploads, SHAPES / "eval_0002.png", "demo-upload")
        history, _, _, histories, _, note = final(
            tab.respond(chat, alice, QUESTION, "", "Chat", {}, *GREEDY_WIDGETS, image=str(image))
        )
        assert "failed" not in unescape(note) and [turn["role"] for turn in history] == ["user", "assistant"]
        assert chat.last_finish["prompt_tokens"] > image_tokens()  # the image was read
        clear_clicked(histories)
    finally:
        chat.unload()
