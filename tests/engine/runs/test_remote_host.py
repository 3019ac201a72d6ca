"""A run whose status names another host (a sweep's trial on a Ray node): readers here judge it by its heartbeat, not
by pids that are another machine's; Stop and Abort reach it through a request file that engine.runs.remote, on its
host, turns into signals to the run there."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from engine import runs
from engine.config import parse_config
from engine.runs import remote
from engine.store import hosts
from engine.store.rundir import read_status, update_status

ELSEWHERE = "another-node"


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    config = parse_config({"model": {"name_or_path": "assets/demo-model"}, "data": {"path": "x.jsonl"}})
    return runs.create_run(config, workspace=tmp_path)


def dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def age_heartbeat(run_dir: Path, seconds: float) -> None:
    path = run_dir / hosts.HEARTBEAT_FILE
    os.utime(path, (time.time() - seconds, time.time() - seconds))


def test_a_run_on_another_host_lives_while_its_heartbeat_is_fresh(run_dir: Path) -> None:
    pid = dead_pid()  # here: no such process; on its host, the run's supervisor
    update_status(run_dir, state="running", host=ELSEWHERE, supervisor_pid=pid, pid=pid, started_at=time.time())
    hosts.beat(run_dir)
    assert runs.status(run_dir).state == "running"
    assert runs.run_processes(run_dir) == []  # its pids are never looked up (or signalled) here

    age_heartbeat(run_dir, hosts.HEARTBEAT_LEASE_S + 1)
    current = runs.status(run_dir)
    assert current.state == "failed"
    assert f"no heartbeat from {ELSEWHERE}" in (current.error or "")


def test_a_run_on_another_host_without_a_heartbeat_is_gone(run_dir: Path) -> None:
    update_status(run_dir, state="running", host=ELSEWHERE, supervisor_pid=None, updated_at=time.time())
    assert runs.status(run_dir).state == "failed"


@pytest.mark.parametrize("host", [None, "this machine"])
def test_a_run_of_this_host_whose_processes_are_gone_crashed(run_dir: Path, host: str | None) -> None:
    pid = dead_pid()
    named = hosts.this_host() if host else None
    update_status(run_dir, state="running", host=named, supervisor_pid=pid, pid=pid, started_at=time.time())
    hosts.beat(run_dir)  # a heartbeat does not keep a local run alive: its pids are checked
    current = runs.status(run_dir)
    assert current.state == "failed" and "the training process is gone" in (current.error or "")


def test_stop_and_abort_of_a_run_on_another_host_are_requests(run_dir: Path) -> None:
    update_status(run_dir, state="running", host=ELSEWHERE, supervisor_pid=os.getpid(), pid=os.getpid())
    hosts.beat(run_dir)
    assert runs.stop(run_dir) is True  # not a SIGTERM to os.getpid(): this test is still here
    assert hosts.read_request(run_dir) == (hosts.STOP, None)
    assert runs.abort(run_dir, timeout=0.3, reason="too slow") is True
    assert hosts.read_request(run_dir) == (hosts.ABORT, "too slow")

    update_status(run_dir, state="completed")
    hosts.clear_request(run_dir)
    assert runs.stop(run_dir) is False and hosts.read_request(run_dir) is None


# A stand-in for ``python -m engine supervise RUN_DIR``: it records itself, then waits for SIGTERM and ends the run
# stopped, as a worker stopping after a step would; with "die" it exits at once without a final state.
FAKE_SUPERVISOR = textwrap.dedent(
    """
    import os, signal, sys, time
    from pathlib import Path
    from engine.store.rundir import update_status
    run_dir, mode = Path(sys.argv[-1]), sys.argv[-2]
    update_status(run_dir, supervisor_pid=os.getpid(), state="running")
    if mode == "die":
        os._exit(9)
    stopped = []
    signal.signal(signal.SIGTERM, lambda *_: stopped.append(1))
    while not stopped:
        time.sleep(0.05)
    update_status(run_dir, state="stopped", ended_at=time.time())
    """
)


def fake_supervisor(mode: str) -> Callable[..., list[str]]:
    def command(*args: str) -> list[str]:
        return [sys.executable, "-c", FAKE_SUPERVISOR, mode, args[1]]

    return command


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_run_here_records_its_host_and_turns_a_stop_request_into_sigterm(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(remote, "engine_command", fake_supervisor("wait"))
    result: dict[str, object] = {}
    thread = threading.Thread(target=lambda: result.update(remote.run_here(str(run_dir), poll_s=0.05)))
    thread.start()
    wait_for(lambda: read_status(run_dir).state == "running", "the fake supervisor to run")
    current = read_status(run_dir)
    assert current.host == hosts.this_host() and hosts.heartbeat_fresh(run_dir)
    assert current.devices == []  # Ray's GPUs: none of those a studio's scheduler hands out
    hosts.send_request(run_dir, hosts.STOP)  # what runs.stop writes on another machine
    thread.join(timeout=60)
    assert not thread.is_alive()
    assert result["state"] == "stopped" and read_status(run_dir).state == "stopped"
    assert hosts.read_request(run_dir) is None


def test_run_here_fails_a_run_whose_supervisor_died_without_a_word(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(remote, "engine_command", fake_supervisor("die"))
    result = remote.run_here(str(run_dir), poll_s=0.05)
    assert result["state"] == "failed" and result["exit_code"] == 9
    assert "supervisor exited with code 9" in result["error"]


def test_run_here_refuses_a_run_directory_it_cannot_see(tmp_path: Path) -> None:
    with pytest.raises(runs.RunError, match="mounts at the same absolute path"):
        remote.run_here(str(tmp_path / "not-here"))


def test_run_here_does_not_begin_a_run_stopped_while_it_waited_for_a_node(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(remote, "engine_command", fake_supervisor("wait"))  # would wait for ever: never started
    update_status(run_dir, state="starting", host=hosts.WAITING_FOR_NODE)  # as the Ray driver hands it over
    hosts.beat(run_dir)
    assert runs.stop(run_dir) is True  # the driver's own host is not this one: a request
    result = remote.run_here(str(run_dir), poll_s=0.05)
    assert result["state"] == "stopped" and result["supervisor_pid"] is None
    assert hosts.read_request(run_dir) is None
