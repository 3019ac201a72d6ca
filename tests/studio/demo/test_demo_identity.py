"""Demo visitors are tokens the server signs: an id a client invents is nobody, a page gets a new token only a
bounded number of times per address, the whole line of queued runs is capped, uploads and runs have a
per-visitor disk quota, and the disk keeps a floor of free space for the runs going on."""

from __future__ import annotations

import json
import math
import shutil
import stat
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import gradio as gr
import pytest

from engine.runs import queue as run_queue
from engine.store.rundir import update_status
from engine.store.workspace import visitor_key_file
from studio.app import build_app, initial_view, launch_options
from studio.demo.budget import AddressBudget
from studio.demo.caller import Caller
from studio.demo.identity import client_address, mint_token
from studio.demo.ownership import owner_tag
from studio.demo.policy import MB, DemoPolicy, visitor_uploads
from studio.demo.queue import NO_VISITOR, enqueue_run
from studio.demo.quota import start_refusal, upload_refusal, visitor_usage
from studio.train import actions
from tests.helpers.live_processes import live_engine_process, processes_fixture  # noqa: F401 - the fixture
from tests.helpers.servers import free_port
from tests.helpers.visitors import ALICE, BOB, DEMO, new_visitor


def demo_config(name: str) -> Any:
    values = actions.starting_values()
    values.update({"name": name, "train.max_steps": 5})
    return actions.checked_config(Caller(Path("."), DEMO), values)


def never_start(run_dir: Path, checkpoint: int | None) -> int:
    raise AssertionError("the machine is busy in these tests: nothing may start")


@pytest.fixture
def busy_workspace(tmp_path: Path, processes: list[Any]) -> Path:
    """A workspace whose machine is taken (a run of its own is active), so queued runs stay queued."""
    run_dir = tmp_path / "runs" / "0-busy"
    run_dir.mkdir(parents=True)
    (run_dir / "config.yaml").write_text("name: busy\n")
    pid = live_engine_process(processes)
    update_status(run_dir, state="running", pid=pid, supervisor_pid=pid)
    return tmp_path


def test_an_id_the_client_invents_is_nobody(busy_workspace: Path) -> None:
    invented = ["alice-aaaaaaaaaaaaaaaa", "bob-bbbbbbbbbbbbbbbbbb", "carol-cccccccccccccccc"]
    forged = ALICE[:-2] + ("AA" if not ALICE.endswith("AA") else "BB")  # a real id with another signature
    other_key = mint_token(b"k" * 32)  # signed, but not by this studio
    for visitor in [*invented, forged, other_key, ALICE.split(".")[0]]:
        assert DEMO.visitor(visitor) is None, visitor
        run_dir, message = enqueue_run(demo_config("flood"), busy_workspace, DEMO, visitor, never_start)
        assert run_dir is None and message == NO_VISITOR
    assert run_queue.queued_runs(busy_workspace) == []
    assert visitor_uploads(busy_workspace, DEMO, invented[0]) is None  # no upload folder either


def test_the_key_stays_on_the_server_and_survives_a_restart(tmp_path: Path) -> None:
    first = DemoPolicy(enabled=True).bound_to(tmp_path)
    token = first.new_visitor("10.0.0.1")
    assert token is not None and first.visitor(token) == token
    again = DemoPolicy(enabled=True).bound_to(tmp_path)  # a restarted studio on the same workspace
    assert again.visitor(token) == token
    assert stat.S_IMODE(visitor_key_file(tmp_path).stat().st_mode) == 0o600
    assert DemoPolicy(enabled=True).bound_to(tmp_path / "elsewhere").visitor(token) is None
    assert first.key.hex() not in first.storage_secret and first.storage_secret == again.storage_secret


def test_a_client_gets_a_bounded_number_of_new_visitors(tmp_path: Path) -> None:
    policy = DemoPolicy(enabled=True, new_visitors_per_window=3).bound_to(tmp_path)
    tokens = [initial_view(tmp_path, None, policy, None, "203.0.113.7")[2] for _ in range(5)]
    assert [token is not None and policy.visitor(token) == token for token in tokens] == [True] * 3 + [False] * 2
    assert tokens[3] is None and 0 < policy.new_visitor_wait("203.0.113.7") <= 600
    assert policy.visitor(initial_view(tmp_path, None, policy, None, "198.51.100.2")[2])  # another address
    # A page that already holds a valid token keeps it (nothing sent back), even past its address's limit.
    assert initial_view(tmp_path, None, policy, tokens[0], "203.0.113.7")[2] == gr.skip()


def test_the_limit_is_a_sliding_window() -> None:
    now = [1000.0]
    limiter = AddressBudget(2, 60.0, clock=lambda: now[0])
    assert limiter.take("a") is True
    now[0] = 1020.0
    assert [limiter.take("a"), limiter.take("a")] == [True, False]
    assert limiter.retry_in("a") == 40.0 and limiter.retry_in("b") == 0.0
    now[0] = 1060.5  # the first one has left the window, the second has not
    assert [limiter.take("a"), limiter.take("a")] == [True, False]
    assert limiter.take("b") is True  # every address has its own count


def test_a_budget_of_bytes_counts_amounts_and_says_when_enough_has_left() -> None:
    now = [0.0]
    budget = AddressBudget(100, 60.0, clock=lambda: now[0])
    assert budget.take("a", 60) is True
    now[0] = 10.0
    assert budget.take("a", 30) is True
    assert budget.take("a", 20) is False and budget.retry_in("a", 20) == 50.0  # the 60 leaves at 60 s
    assert budget.retry_in("a", 10) == 0.0 and budget.take("a", 10) is True  # exactly the limit
    assert budget.retry_in("a", 101) == math.inf and budget.take("a", 101) is False  # never fits
    now[0] = 60.5
    assert budget.take("a", 60) is True  # the first 60 has left the window


def test_the_client_address_trusts_forwarded_headers_only_behind_a_proxy() -> None:
    headers = {"x-forwarded-for": "1.1.1.1, 2.2.2.2, 9.9.9.9"}  # the client wrote the first two itself
    assert client_address("127.0.0.1", headers, proxy_hops=0) == "127.0.0.1"
    assert client_address("10.0.0.5", headers, proxy_hops=1) == "9.9.9.9"
    assert client_address("10.0.0.5", headers, proxy_hops=2) == "2.2.2.2"
    assert client_address("10.0.0.5", {}, proxy_hops=1) == "10.0.0.5"
    assert client_address(None, {}, proxy_hops=0) == "unknown"


def test_the_demo_line_is_capped_for_everyone(busy_workspace: Path) -> None:
    policy = DemoPolicy(enabled=True, max_queued_runs=2, key=DEMO.key)
    visitors = [new_visitor() for _ in range(3)]
    outcomes = [
        enqueue_run(demo_config(f"v{n}"), busy_workspace, policy, v, never_start) for n, v in enumerate(visitors)
    ]
    assert [run_dir is not None for run_dir, _ in outcomes] == [True, True, False]
    assert "the demo's line is full (2 runs waiting)" in outcomes[2][1]
    assert len(run_queue.queued_runs(busy_workspace)) == 2


def test_uploads_and_runs_count_against_a_visitors_quota(busy_workspace: Path) -> None:
    policy = DemoPolicy(enabled=True, visitor_quota_mb=1.0, max_upload_mb=0.5, key=DEMO.key)
    assert upload_refusal(busy_workspace, policy, ALICE, int(0.4 * MB)) is None
    too_big = upload_refusal(busy_workspace, policy, ALICE, int(0.6 * MB))
    assert too_big == "the file is 0.6 MB; this demo takes files of at most 0.5 MB"
    uploads = visitor_uploads(busy_workspace, policy, ALICE)
    uploads.mkdir(parents=True)
    (uploads / "mine.jsonl").write_bytes(b"x" * int(0.4 * MB))
    run_dir, _ = enqueue_run(demo_config("alice"), busy_workspace, policy, ALICE, never_start)
    assert run_dir is not None
    (run_dir / "checkpoints").mkdir()
    (run_dir / "checkpoints" / "weights.bin").write_bytes(b"x" * int(0.5 * MB))
    used = visitor_usage(busy_workspace, policy, ALICE)
    assert 0.9 * MB < used < 1.0 * MB and visitor_usage(busy_workspace, policy, BOB) == 0
    message = upload_refusal(busy_workspace, policy, ALICE, int(0.2 * MB))
    assert message is not None and "past the 1.0 MB a visitor may keep here" in message and "Runs tab" in message
    assert upload_refusal(busy_workspace, policy, BOB, int(0.2 * MB)) is None  # Bob's quota is his own
    (run_dir / "checkpoints" / "more.bin").write_bytes(b"x" * int(0.1 * MB))
    update_status(run_dir, state="stopped", pid=None, supervisor_pid=None)
    refusal = start_refusal(busy_workspace, policy, ALICE)
    assert refusal is not None and refusal.startswith("your uploads, runs and export use 1.0 MB")
    second, message = enqueue_run(demo_config("alice2"), busy_workspace, policy, ALICE, never_start)
    assert second is None and "the most a visitor may keep here is 1.0 MB" in message


def test_nothing_more_is_written_once_the_disk_nears_its_floor(busy_workspace: Path) -> None:
    """Every visitor's quota together can pass what the disk holds: an upload, Start or Resume that would leave the
    disk less free space than the policy keeps for the runs going on is refused, whoever's quota it fits in."""
    free = shutil.disk_usage(busy_workspace).free
    roomy = {"visitor_quota_mb": 10**9, "max_upload_mb": 10**9, "key": DEMO.key}
    # The floor 10 GB below what is free now: other tests writing meanwhile take far less than that.
    policy = DemoPolicy(enabled=True, min_free_disk_mb=(free - 10 * 1024**3) / MB, **roomy)
    assert upload_refusal(busy_workspace, policy, ALICE, MB) is None
    assert start_refusal(busy_workspace, policy, ALICE) is None
    past = upload_refusal(busy_workspace, policy, ALICE, 20 * 1024**3)
    assert past is not None and past.startswith("this demo's disk is nearly full (")
    full = DemoPolicy(enabled=True, min_free_disk_mb=(free + 10 * 1024**3) / MB, **roomy)
    refusal = start_refusal(busy_workspace, full, ALICE)
    assert refusal is not None and "try again later" in refusal
    upload = upload_refusal(busy_workspace, full, ALICE, 1)  # the free space it names moves as others write
    assert upload is not None and upload.startswith("this demo's disk is nearly full (") and "Runs tab" in upload
    run_dir, message = enqueue_run(demo_config("alice"), busy_workspace, full, ALICE, never_start)
    assert run_dir is None and "this demo's disk is nearly full" in message
    assert start_refusal(busy_workspace, DemoPolicy(min_free_disk_mb=(free + 10 * 1024**3) / MB), ALICE) is None


def test_the_owner_is_a_digest_of_the_signed_token() -> None:
    assert owner_tag(ALICE) != owner_tag(BOB) and ALICE.split(".")[1] not in owner_tag(ALICE)


def test_the_page_config_publishes_no_key_and_uploads_are_capped(tmp_path: Path) -> None:
    """A real demo studio: /config holds no signing key, and Gradio refuses an upload over the cap."""
    policy = DemoPolicy(enabled=True, max_upload_mb=1.0)
    demo = build_app(tmp_path, policy)
    port = free_port()
    demo.queue().launch(server_port=port, prevent_thread_lock=True, quiet=True, **launch_options(tmp_path, policy))
    try:
        base = f"http://127.0.0.1:{port}"
        config = urllib.request.urlopen(f"{base}/config", timeout=30).read().decode()
        key = policy.bound_to(tmp_path).key
        assert json.loads(config) and key.hex() not in config and visitor_key_file(tmp_path).read_text() not in config
        assert upload_status(base, 2 * MB) == 413 and upload_status(base, MB // 2) == 200
    finally:
        demo.close()


def upload_status(base: str, size: int) -> int:
    """POST a file of ``size`` bytes to Gradio's upload route; the HTTP status."""
    boundary = "studio-test-boundary"
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="files"; filename="rows.jsonl"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n"
        ).encode()
        + b"x" * size
        + f"\r\n--{boundary}--\r\n".encode()
    )
    request = urllib.request.Request(
        f"{base}/gradio_api/upload", data=body, headers={"Content-Type": f"multipart/form-data; boundary={boundary}"}
    )
    try:
        return urllib.request.urlopen(request, timeout=60).status
    except urllib.error.HTTPError as exc:
        return exc.code
