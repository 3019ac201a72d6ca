"""A run deleted on the Runs tab while Chat serves its model: opening the tab drops it from the picker (as the other
tabs' pickers drop a deleted run), the status line says the run is gone instead of naming it as loaded, and a message
gets that answer instead of a reply from the weights still in the chat worker's memory; in the page's language."""

from __future__ import annotations

import html
from pathlib import Path

from studio.chat import tab
from studio.chat.models import shown_label
from studio.chat.status import LOAD, RUN_DELETED
from studio.demo.caller import Caller
from studio.i18n.catalog import text
from studio.runs.data import delete_run
from tests.studio.chat.test_chat_page_reload import BASE_PICK, StandInClient, loaded, with_adapter
from tests.studio.chat.test_chat_tab import GREEDY_WIDGETS, final, make_run

ZH = "zh-CN"
PICK, LABEL = "run:demo-dates", "demo-dates · final adapter"  # the run's pick, and the worker's name of its model


def test_a_deleted_runs_model_says_its_run_is_gone_instead_of_answering(tmp_path: Path) -> None:
    with_adapter(make_run(tmp_path, "demo-dates", 1.0))
    client, english, chinese = StandInClient(tmp_path), Caller(tmp_path), Caller(tmp_path, language=ZH)
    assert "Loaded:" in loaded(client, english, PICK)
    assert "Loaded:" in tab.opened_view(client, english, PICK, PICK)[0]  # while the run is there
    delete_run(tmp_path, "demo-dates")  # as the Runs tab deletes it
    status, picker, shown = tab.opened_view(client, english, PICK, PICK)  # the Chat tab opened again
    assert picker["value"] == BASE_PICK and shown is None
    gone = text(RUN_DELETED, "en", label=LABEL, load="{load}").partition("{load}")[0]
    assert html.escape(gone) in status and "Loaded:" not in status
    chat, _, _, histories, _, note = final(tab.respond(client, english, "hi", "", "Chat", {}, *GREEDY_WIDGETS))
    assert html.escape(text(RUN_DELETED, "en", label=LABEL, load="Load")) in note
    assert chat == [] and histories["chat"] == []  # nothing was sent
    said = final(tab.respond(client, chinese, "hi", "", "Chat", {}, *GREEDY_WIDGETS))[-1]
    label = shown_label(LABEL, ZH)
    assert label != LABEL and html.escape(text(RUN_DELETED, ZH, label=label, load=text(LOAD, ZH))) in said
