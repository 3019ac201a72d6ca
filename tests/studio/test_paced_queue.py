"""The studio's Gradio queue polls at the studio's pace when idle (studio.app.paced_queue), on the attributes that
Gradio's queue itself reads: a Gradio that renamed them would silently poll every millisecond again."""

from __future__ import annotations

import inspect

import gradio as gr
from gradio import queueing

from studio.app import PROGRESS_IDLE_POLL_S, QUEUE_IDLE_POLL_S, paced_queue

PACES = {"sleep_when_free": QUEUE_IDLE_POLL_S, "progress_update_sleep_when_free": PROGRESS_IDLE_POLL_S}


def test_gradios_queue_still_sleeps_on_the_attributes_the_studio_paces() -> None:
    loops = inspect.getsource(queueing.Queue.start_processing)
    loops += inspect.getsource(queueing.Queue.start_progress_updates)
    for name in PACES:
        assert f"asyncio.sleep(self.{name})" in loops, name


def test_the_queue_that_launch_serves_is_paced() -> None:
    with gr.Blocks() as demo:
        gr.Textbox()
    gradio_paces = {name: getattr(demo.queue()._queue, name) for name in PACES}
    queue = paced_queue(demo)._queue
    assert demo._queue is queue  # launch() serves the queue of the last queue() call, this one
    for name, pace in PACES.items():
        assert getattr(queue, name) == max(pace, gradio_paces[name]) >= pace, name
