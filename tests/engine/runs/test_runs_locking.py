"""engine.runs.start_lock serialises starters across processes; engine.runs.delete refuses active runs and waits
for a starter."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from engine import runs
from engine.config import parse_config
from engine.store.paths import PROJECT_ROOT
from engine.store.rundir import status_lock, update_status
from tests.engine.runs.fault_checks import wait_until
from tests.helpers.machine_load import load_factor

HOLDER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from engine.runs.control import start_lock
    workspace, journal, name = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    with start_lock(workspace):
        with journal.open("a") as out:
            out.write(f"enter {name}\\n")
        time.sleep(0.4)
        with journal.open("a") as out:
            out.write(f"leave {name}\\n")
    """
)


def test_start_lock_lets_one_process_in_at_a_time(tmp_path: Path) -> None:
    journal = tmp_path / "journal.txt"
    env = dict(os.environ, PYTHONPATH=str(PROJECT_ROOT))
    holders = [
        subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path), str(journal), str(n)], env=env) for n in range(3)
    ]
    assert [holder.wait(timeout=60) for holder in holders] == [0, 0, 0]
    lines = journal.read_text().splitlines()
    assert len(lines) == 6
    # Every enter is followed directly by the same holder's leave: no two holders were inside together.
    for enter, leave in zip(lines[::2], lines[1::2], strict=True):
        assert enter.startswith("enter ") and leave == enter.replace("enter", "leave")


def _demo_run(workspace: Path) -> Path:
    config = parse_config({"model": {"name_or_path": "assets/demo-model"}, "data": {"path": "x.jsonl"}})
    return runs.create_run(config, workspace=workspace)


def test_delete_removes_a_finished_run_and_refuses_an_active_one(tmp_path: Path) -> None:
    run_dir = _demo_run(tmp_path)
    # A live process whose command line names the engine, as a real run's does.
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "engine", "worker"])
    try:
        update_status(run_dir, state="running", pid=worker.pid, supervisor_pid=worker.pid, started_at=0)
        with pytest.raises(runs.RunError, match="stop it before deleting it"):
            runs.delete(run_dir)
        assert run_dir.is_dir()
    finally:
        worker.kill()
        worker.wait()
    update_status(run_dir, state="stopped", pid=None, supervisor_pid=None)
    runs.delete(run_dir)
    assert not run_dir.exists()
    with pytest.raises(runs.RunError, match="is not a run"):
        runs.delete(run_dir)


def test_a_queued_run_is_deleted_only_when_no_starter_holds_the_workspace(tmp_path: Path) -> None:
    """A scheduler starts queued runs under the start lock: delete waits for it, so it never removes the folder of
    a run being started."""
    run_dir = runs.create_run(parse_config({"name": "queued"}), workspace=tmp_path / "ws")
    assert runs.status(run_dir).state == "queued"
    held, release = threading.Event(), threading.Event()

    def starter() -> None:
        with runs.start_lock(tmp_path / "ws"):
            held.set()
            release.wait(60)

    holder = threading.Thread(target=starter)
    holder.start()
    deleter = threading.Thread(target=runs.delete, args=(run_dir,))
    try:
        assert held.wait(60)
        deleter.start()
        deleter.join(0.5)
        assert deleter.is_alive() and run_dir.is_dir()  # it waits for the lock
    finally:
        release.set()
        holder.join(60)
    deleter.join(60)
    assert not deleter.is_alive() and not run_dir.exists()


def test_wait_returns_the_exit_code_the_supervisor_records_while_it_looks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker writes the final state, then its supervisor the exit code: one that lands between wait's reading
    the state and its asking whether the run has ended is in what wait returns."""
    run_status = importlib.import_module("engine.runs.status")  # the module: engine.runs.status is its function too
    run_dir = _demo_run(tmp_path)
    supervisor = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "engine", "supervise"])
    try:
        update_status(run_dir, state="completed", supervisor_pid=supervisor.pid, exit_code=None)
        ended = run_status.ended

        def supervisor_records_then_ended(run: Path, current: object = None) -> bool:
            update_status(run, exit_code=0)
            return ended(run, current)

        monkeypatch.setattr(run_status, "ended", supervisor_records_then_ended)
        finished = runs.wait(run_dir, timeout=5)
    finally:
        supervisor.kill()
        supervisor.wait()
    assert (finished.state, finished.exit_code) == ("completed", 0)


COUNTER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from engine.store.rundir import read_status, status_lock, update_status
    run_dir, times = Path(sys.argv[1]), int(sys.argv[2])
    for _ in range(times):
        with status_lock(run_dir):  # re-entered by update_status in the same thread
            update_status(run_dir, step=(read_status(run_dir).step or 0) + 1)
    """
)


def test_status_writers_in_several_processes_lose_no_change(tmp_path: Path) -> None:
    run_dir = _demo_run(tmp_path)
    env = dict(os.environ, PYTHONPATH=str(PROJECT_ROOT))
    writers = [subprocess.Popen([sys.executable, "-c", COUNTER, str(run_dir), "150"], env=env) for _ in range(3)]
    assert [writer.wait(timeout=120) for writer in writers] == [0, 0, 0]
    assert runs.status(run_dir).step == 450


def test_update_status_when_leaves_a_status_that_changed_meanwhile(tmp_path: Path) -> None:
    run_dir = _demo_run(tmp_path)
    update_status(run_dir, state="running", pid=123)
    still_running = lambda stored: stored.state == "running"  # noqa: E731
    update_status(run_dir, state="aborted", error="aborted by the user")
    kept = update_status(run_dir, when=still_running, state="failed", error="the training process is gone")
    assert (kept.state, kept.error) == ("aborted", "aborted by the user")
    assert runs.status(run_dir).state == "aborted"
    update_status(run_dir, state="running")
    assert update_status(run_dir, when=still_running, state="failed").state == "failed"


READER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from engine import runs
    runs_root, stop = Path(sys.argv[1]), Path(sys.argv[2])
    while not stop.exists():
        for run_dir in runs_root.iterdir():
            try:
                runs.status(run_dir)
            except (FileNotFoundError, NotADirectoryError):
                pass
    """
)


ROUNDS = 12


def test_abort_beside_busy_readers_ends_aborted_never_as_a_crash(tmp_path: Path) -> None:
    """Readers (the Monitor, a second studio, a waiting standby) reconcile the status all the time; one that finds
    the processes gone between Abort's kill and its "aborted" must not record the run as crashed."""
    workspace, stop = tmp_path / "workspace", tmp_path / "stop"
    first = _demo_run(workspace)
    env = dict(os.environ, PYTHONPATH=str(PROJECT_ROOT))
    readers = [
        subprocess.Popen([sys.executable, "-c", READER, str(first.parent), str(stop)], env=env) for _ in range(3)
    ]
    states = []
    try:
        for round_ in range(ROUNDS):
            run_dir = first if round_ == 0 else _demo_run(workspace)
            worker = subprocess.Popen(
                [sys.executable, "-c", "import time; time.sleep(60)", "-m", "engine", "worker", str(run_dir)],
                start_new_session=True,
            )
            update_status(run_dir, state="running", pid=worker.pid, supervisor_pid=None, started_at=0)
            assert runs.abort(run_dir)
            worker.wait(timeout=10)
            states.append(runs.status(run_dir).state)
    finally:
        stop.touch()
        for reader in readers:
            reader.wait(timeout=30)
    assert states == ["aborted"] * ROUNDS


FROZEN_HOLDER = textwrap.dedent(
    """
    import os, signal, sys
    from pathlib import Path
    from engine.store.rundir import status_lock, update_status
    run_dir = Path(sys.argv[1])
    with status_lock(run_dir):
        update_status(run_dir, state="running", pid=os.getpid(), started_at=0)  # a worker, mid-run
        print("holding", flush=True)
        os.kill(os.getpid(), signal.SIGSTOP)  # frozen mid-write, as a debugger or SIGSTOP leaves a process
    """
)


def test_a_frozen_holder_of_the_status_lock_blocks_no_one_for_good(tmp_path: Path) -> None:
    run_dir = _demo_run(tmp_path)
    env = dict(os.environ, PYTHONPATH=str(PROJECT_ROOT))
    holder = subprocess.Popen(
        [sys.executable, "-c", FROZEN_HOLDER, str(run_dir), "-m", "engine", "worker"],
        env=env,
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        assert holder.stdout.readline() == b"holding\n"
        began = time.monotonic()
        with status_lock(run_dir, wait_s=0.3):  # gives up on the lock after its wait, and goes on
            update_status(run_dir, step=1)
        # "Goes on": within a deadline far past its wait (stretched by the machine's load, as every wait of the
        # tests), not held for as long as the holder is frozen.
        assert 0.3 <= time.monotonic() - began < 5 * load_factor()
        # Abort kills the frozen holder first, which frees the lock: no wait for it.
        began = time.monotonic()
        assert runs.abort(run_dir)
        assert time.monotonic() - began < 3 * load_factor() and runs.status(run_dir).state == "aborted"
    finally:
        holder.kill()
        holder.wait()


SCHEDULER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from engine.runs.control import start_lock
    from engine.store.rundir import read_status
    workspace, journal, done = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    with journal.open("a", buffering=1) as out:
        out.write("watching\\n")
        while not done.exists():
            with start_lock(workspace):  # what a studio's queue sees: queued runs, under the lock
                for run_dir in sorted((workspace / "runs").glob("*/")):
                    out.write(f"{run_dir.name} {read_status(run_dir).state}\\n")
            time.sleep(0.002)
    """
)


def test_create_and_start_never_shows_a_scheduler_the_run_queued(tmp_path: Path) -> None:
    """A process that looks at the workspace's runs under the start lock, as a studio's queue does before it starts
    the queued ones, sees the new run only once it is starting, never queued: the queue cannot start it a second
    time between create_run and start (the race scripts met: RunAlreadyRunning)."""
    workspace, journal, done = tmp_path / "ws", tmp_path / "journal.txt", tmp_path / "done"
    workspace.mkdir()
    env = dict(os.environ, PYTHONPATH=str(PROJECT_ROOT))
    scheduler = subprocess.Popen([sys.executable, "-c", SCHEDULER, str(workspace), str(journal), str(done)], env=env)
    seen: list[str] = []
    try:
        wait_until(lambda: journal.is_file() and "watching" in journal.read_text(), 60, "the scheduler to watch")
        # A dataset that does not exist: the run is refused by its worker at once, so nothing trains.
        config = parse_config({"model": {"name_or_path": "assets/demo-model"}, "data": {"path": "absent.jsonl"}})
        run_dir = runs.create_and_start(config, workspace=workspace)
        seen = wait_until(
            lambda: [line for line in journal.read_text().splitlines() if run_dir.name in line],
            60,
            "the scheduler to see the run",
        )
        ended = runs.wait(run_dir)  # no limit by default: until the run has ended
    finally:
        done.touch()
        scheduler.wait(timeout=60)
    assert ended.state == "failed" and "absent.jsonl" in (ended.error or ""), ended
    assert seen and not any(line.endswith(" queued") for line in seen), seen
