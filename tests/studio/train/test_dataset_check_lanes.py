"""Two visitors of one real studio server check their datasets at once: one with a chat template that would
render for hours, one with a normal template. The normal check answers while the slow one is still being probed,
and the slow one is refused within its budget (studio.lanes, engine.data.template_guard).

The checks are the page's own private events, so the test talks to Gradio's queue as the browser does:
POST /gradio_api/queue/join with the event's id, then read the event stream of that session.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from engine.data.template_guard import CHECK_BUDGET_S, START_ALLOWANCE_S, WALL_BUDGETS
from engine.training.methods import METHODS
from studio import lanes
from studio.app import build_app, launch_options
from studio.train.rewards import rewards_field
from tests.e2e.e2e_harness import wait_until
from tests.helpers.servers import free_port

CHATML = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
# 10^10 loop iterations per row: hours of rendering, unless something stops it.
SLOW = "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}" + CHATML
# Enough for a loaded machine: a check's wall clock is at most the template child's limit plus the check itself.
DEADLINE_S = 120


@dataclass
class Check:
    """One dataset check sent to the server, with the times its events arrived (monotonic seconds)."""

    sent: float = 0.0
    started: float | None = None
    completed: float | None = None
    output: list[Any] = field(default_factory=list)
    success: bool | None = None


@pytest.fixture(scope="module")
def studio(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A studio server on a free port (its own workspace) and its page config."""
    workspace = tmp_path_factory.mktemp("workspace")
    demo = build_app(workspace)
    port = free_port()
    demo.queue().launch(server_port=port, prevent_thread_lock=True, quiet=True, **launch_options(workspace))
    url = f"http://127.0.0.1:{port}"
    config = httpx.get(f"{url}/config", timeout=60).json()
    yield url, config, demo
    demo.close()


def check_event(config: dict[str, Any]) -> tuple[int, int]:
    """(event id, trigger id) of the tokens check that the "Check dataset" button runs: button → rows → tokens."""
    button = next(c["id"] for c in config["components"] if c.get("props", {}).get("elem_id") == "train-check-dataset")
    events = config["dependencies"]
    trigger = next(e for e in events if [button, "click"] in [list(t) for t in e["targets"]])
    rows = next(e for e in events if e.get("trigger_after") == trigger["id"])
    tokens = next(e for e in events if e.get("trigger_after") == rows["id"])
    return tokens["id"], button


def form_data(config: dict[str, Any], event_id: int, template: str) -> list[Any]:
    """The event's inputs as a fresh page sends them, with data.chat_template set to ``template``."""
    event = next(e for e in config["dependencies"] if e["id"] == event_id)
    by_id = {c["id"]: c for c in config["components"]}
    data = []
    for input_id in event["inputs"]:
        props = by_id[input_id].get("props", {})
        data.append(template if props.get("elem_id") == "cfg-data-chat_template" else props.get("value"))
    return data


def send_check(url: str, config: dict[str, Any], template: str) -> Check:
    """Join the queue with a dataset check and follow its events in a thread; returns the Check it fills in."""
    event_id, trigger = check_event(config)
    session = uuid.uuid4().hex
    check = Check(sent=time.monotonic())
    body = {
        "data": form_data(config, event_id, template),
        "fn_index": event_id,
        "trigger_id": trigger,
        "session_hash": session,
        "event_data": None,
    }
    joined = httpx.post(f"{url}/gradio_api/queue/join", json=body, timeout=60)
    joined.raise_for_status()

    def follow() -> None:
        with httpx.stream("GET", f"{url}/gradio_api/queue/data", params={"session_hash": session}, timeout=None) as r:
            for line in r.iter_lines():
                if not line.startswith("data:"):
                    continue
                message = json.loads(line[5:])
                if message.get("msg") == "process_starts":
                    check.started = time.monotonic()
                elif message.get("msg") == "process_completed":
                    check.output = (message.get("output") or {}).get("data") or []
                    check.success = message.get("success")
                    check.completed = time.monotonic()
                    return

    threading.Thread(target=follow, daemon=True).start()
    return check


def run_to_end(url: str, config: dict[str, Any], template: str) -> Check:
    check = send_check(url, config, template)
    wait_until(lambda: check.completed, DEADLINE_S, what="the dataset check to answer")
    return check


def test_a_slow_template_does_not_hold_up_another_visitors_check(studio: Any) -> None:
    url, config, _ = studio
    warm = run_to_end(url, config, CHATML)  # loads the tokenizer once, as the first check of a studio does
    assert warm.success and warm.output[0].startswith("✓ **Format**"), warm.output

    slow = send_check(url, config, SLOW)
    wait_until(lambda: slow.started, DEADLINE_S, what="the slow check to start")
    normal = send_check(url, config, CHATML)
    wait_until(lambda: normal.completed and slow.completed, DEADLINE_S, what="both checks to answer")

    summary, _, error, *_ = normal.output
    assert normal.success and summary.startswith("✓ **Format**") and error == "", normal.output
    # Which of the two answers first depends on the machine's speed (a slow one takes as long for the normal check as
    # the slow template is given): that it did not wait is when it started, below.
    # It did not queue behind the slow one: it started while the slow template was still being probed.
    assert normal.started is not None and normal.started < slow.completed

    # The guard ended the slow template at its budget (its message says which limit), not the template itself;
    # how long that took on this machine is not asserted (a busy machine is slower, and that is no fault).
    slow_error = slow.output[2]
    limits = (
        f"took longer than {CHECK_BUDGET_S:g} s",
        f"within {WALL_BUDGETS * CHECK_BUDGET_S + START_ALLOWANCE_S:g} s",
    )
    assert "data.chat_template: the chat template" in slow_error and any(limit in slow_error for limit in limits)


def test_every_dataset_check_and_start_run_on_a_wide_lane(studio: Any) -> None:
    """Every event that writes the dataset panel's results (from any trigger) is on the shared check lane; Start, the
    estimate and the reward check have wide lanes of their own; nothing else shares them."""
    _, config, demo = studio
    summary_id = next(e for e in config["dependencies"] if e["id"] == check_event(config)[0])["outputs"][0]
    checks = [fn for fn in demo.fns.values() if fn.fn is not None and summary_id in [o._id for o in fn.outputs]]
    assert len(checks) >= 10  # rows and tokens, after each of the five triggers (fields, upload, pick, two loads)
    assert {(fn.concurrency_id, fn.concurrency_limit) for fn in checks} == {("dataset-check", lanes.SLOW_LANE_WIDTH)}
    lanes_used: dict[str, set[Any]] = {}
    for fn in demo.fns.values():
        lanes_used.setdefault(fn.concurrency_id, set()).add(fn.concurrency_limit)
    for lane in ("dataset-check", "start", "estimate", "reward-check"):
        assert lanes_used[lane] == {lanes.SLOW_LANE_WIDTH}
    on_shared = [fn for fn in demo.fns.values() if fn.concurrency_id in ("start", "estimate", "reward-check")]
    reward_pickers = sum(rewards_field(method) is not None for method in METHODS.values())  # one per method
    # Each picker's check and its reward file upload (which checks the rewards too) share the reward-check lane.
    assert reward_pickers >= 2 and len(on_shared) == 2 + 2 * reward_pickers
