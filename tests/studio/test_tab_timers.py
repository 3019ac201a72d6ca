"""The timers of the Runs and Sweeps tabs stop while another tab is on screen.

Gradio starts a tab's timer as the tab first shows and never stops it: a page that had opened the Runs tab sent its
list every 2 s while its visitor watched the Monitor (tests/e2e/test_run_switch_browser.py counts the page's events
in a real browser). Here: the wiring of every such timer, in the whole studio.
"""

from __future__ import annotations

from typing import Any

import gradio as gr
import pytest

from studio.app import build_app


@pytest.fixture(scope="module")
def studio(tmp_path_factory: pytest.TempPathFactory) -> gr.Blocks:
    return build_app(tmp_path_factory.mktemp("workspace"))


def tab_of(block: Any) -> Any:
    while block is not None and not isinstance(block, gr.Tab):
        block = block.parent
    return block


@pytest.mark.parametrize(("tab_id", "resumes"), [("ts-tab-runs", True), ("ts-tab-sweeps", False)])
def test_a_tabs_timer_stops_when_another_tab_shows(studio: gr.Blocks, tab_id: str, resumes: bool) -> None:
    tabs = next(block for block in studio.blocks.values() if isinstance(block, gr.Tabs) and block.elem_id == "ts-tabs")
    ticking = {target for fn in studio.fns.values() for target, event in fn.targets if event == "tick"}
    timers = [
        block
        for block in studio.blocks.values()
        if isinstance(block, gr.Timer) and block._id in ticking and getattr(tab_of(block), "elem_id", None) == tab_id
    ]
    assert len(timers) == 1
    (timer,) = timers
    switches = [fn for fn in studio.fns.values() if (tabs._id, "change") in fn.targets and timer in fn.outputs]
    assert len(switches) == 1
    (switch,) = switches
    assert switch.fn is None  # the page's own script: no server event per switch
    assert f"#{tab_id}-button" in switch.js and "active: false" in switch.js
    assert ("active: true" in switch.js) is resumes  # the Sweeps tab's opening sets its timer by the sweep's state
