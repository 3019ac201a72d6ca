"""Warm forks (engine.store.forks): runs started as forks of a server that imported the training libraries once.

Through the real processes: a real server, real runs of the demo model. A forked run must be the same run as a
cold one (its losses bit for bit, Stop with a checkpoint, Resume, Abort leaving nothing behind), with the worker
a child of its supervisor as before; a forked job makes what a cold one makes; a CLI command handed to the server
keeps its output, Ctrl-C and exit code; a studio holds its server.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine import runs
from engine.chat.client import ChatClient, ModelSpec, SamplingParams
from engine.config import save_config
from engine.config.sections import DEMO_MODEL
from engine.runs import jobs
from engine.store import forks
from engine.store.processes import command_line, engine_command, engine_env, pid_alive, proc_pids, process_tree
from engine.store.rundir import read_status
from tests.engine.runs.test_runs_integration import small_config, train_losses
from tests.helpers.run_progress import wait_for_step

pytestmark = pytest.mark.integration

SERVER_UP_S = 180  # its imports, on a loaded machine


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _servers(socket: Path) -> list[int]:
    return [pid for pid in proc_pids() if "fork-server" in command_line(pid) and str(socket) in command_line(pid)]


@pytest.fixture(scope="module")
def module_server_key(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The key of one server for this module's tests that use one (an environment variable no other module sets
    makes it), set for the rest of the module: its imports are paid once, not once a test. Killed at the end.
    The keys here come from whole temp paths: a test's name alone recurs in the next session, whose starts then
    found this one's marks (a recent start, a dead server's socket) in the shared sockets folder."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("FORKS_TEST", str(tmp_path_factory.mktemp("forks")))
        patch.delenv(forks.SWITCH_ENV, raising=False)
        key = forks.server_key(engine_env())
        try:
            yield key
        finally:
            for pid in _servers(forks.socket_path(key)):
                os.kill(pid, signal.SIGKILL)


@pytest.fixture
def server(module_server_key: str) -> str:
    """The key of the module's server, listening (started on first use, and again should it have gone idle since)."""
    return listening(module_server_key)


def listening(key: str) -> str:
    """``key``, its server listening: started unless it answers (a server idle for forks.IDLE_S exits)."""
    if not forks._answers(forks.socket_path(key)):
        forks.start_server(key)
    assert forks.wait_for_server(key, SERVER_UP_S), (forks.socket_path(key).parent / f"{key}.log").read_text()
    return key


def cold_losses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, config) -> dict[int, float]:
    with monkeypatch.context() as cold:
        cold.setenv(forks.SWITCH_ENV, "0")
        run_dir = runs.create_run(config, run_dir=tmp_path / "cold")
        runs.start(run_dir)
        assert runs.wait(run_dir, timeout=300).state == "completed"
    assert "fork-server" not in (tmp_path / "cold" / "train.log").read_text()
    return train_losses(run_dir)


def test_a_forked_run_is_the_cold_run_without_the_imports(server: str, tmp_path: Path, monkeypatch):
    config = small_config(train={"max_steps": 24, "save_steps": 2})
    expected = cold_losses(tmp_path, monkeypatch, config)

    run_dir = runs.create_run(config, run_dir=tmp_path / "forked")
    supervisor = runs.start(run_dir)
    wait_for_step(run_dir, 2)
    worker = read_status(run_dir).pid
    # Both are forks of the server (its command line), the worker the supervisor's child in its process group, as
    # a cold worker is; the supervisor is in a session of its own.
    assert "fork-server" in command_line(supervisor) and "fork-server" in command_line(worker)
    assert _parent(worker) == supervisor and os.getpgid(worker) == os.getpgid(supervisor) == os.getsid(supervisor)
    assert runs.stop(run_dir)
    stopped = runs.wait(run_dir, timeout=120)
    assert stopped.state == "stopped" and stopped.checkpoints, stopped
    # The worker writes "stopped" before it exits, and its supervisor ends after it: both go, on a busy machine too.
    deadline = time.monotonic() + 60
    while (pid_alive(worker) or pid_alive(supervisor)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not pid_alive(worker) and not pid_alive(supervisor)

    runs.resume(run_dir)
    final = runs.wait(run_dir, timeout=300)
    assert final.state == "completed" and final.exit_code == 0, final
    assert train_losses(run_dir) == expected  # bit for bit, across the stop
    assert "Traceback" not in (run_dir / "train.log").read_text()


def test_abort_ends_a_forked_run_and_nothing_else(server: str, tmp_path: Path):
    run_dir = runs.create_run(small_config(train={"max_steps": 400}), run_dir=tmp_path / "run")
    supervisor = runs.start(run_dir)
    wait_for_step(run_dir, 2)
    worker = read_status(run_dir).pid
    assert runs.abort(run_dir)
    assert runs.status(run_dir).state == "aborted"
    assert not pid_alive(worker) and not pid_alive(supervisor)
    assert _servers(forks.socket_path(server))  # the server lives on for the next run


def test_a_killed_forked_worker_fails_the_run_with_its_signal(server: str, tmp_path: Path):
    run_dir = runs.create_run(small_config(train={"max_steps": 400}), run_dir=tmp_path / "run")
    runs.start(run_dir)
    wait_for_step(run_dir, 2)
    os.kill(read_status(run_dir).pid, signal.SIGKILL)
    failed = runs.wait(run_dir, timeout=60)
    assert failed.state == "failed" and "SIGKILL" in failed.error, failed  # told by its supervisor, its parent


def test_the_key_follows_what_imports_read_and_not_the_rest():
    env = {"HF_HUB_OFFLINE": "1", "PATH": "/bin"}
    key = forks.server_key(env)
    assert forks.server_key({**env, "PYTEST_CURRENT_TEST": "x", "OMP_NUM_THREADS": "2"}) == key
    assert forks.server_key({**env, "HF_HUB_OFFLINE": "0"}) != key
    assert forks.server_key({**env, "ANY_OTHER": "1"}) != key


def test_a_server_forks_nothing_but_supervisors_and_exits_when_idle(tmp_path: Path):
    socket = tmp_path / "forks.sock"
    server = subprocess.Popen([*engine_command("fork-server", str(socket), "--idle", "3")], env=engine_env())
    try:
        deadline = time.monotonic() + SERVER_UP_S
        while not socket.exists() and server.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert socket.exists()
        with pytest.raises(ValueError, match="refused"):
            forks._ask(socket, {"args": ["train", "x.yaml"], "cwd": str(tmp_path), "env": engine_env()}, None)
        assert server.wait(timeout=60) == 0  # idle for 3 s after that
        assert not socket.exists()
    finally:
        server.kill()
        server.wait()


def test_without_a_server_a_start_is_cold_and_a_second_one_brings_one_up(monkeypatch, tmp_path: Path):
    monkeypatch.setenv("FORKS_TEST", f"{tmp_path}-lazy")
    key = forks.server_key(engine_env())
    args = ["supervise", str(tmp_path / "no-run")]
    try:
        assert forks.start_forked(args, cwd=str(tmp_path)) is None  # the first: cold, and no server for one start
        assert not (forks.socket_path(key).parent / f"{key}.starting").exists()
        assert forks.start_forked(args, cwd=str(tmp_path)) is None  # the second: cold, and a server comes up
        assert forks.wait_for_server(key, SERVER_UP_S)
    finally:
        for pid in _servers(forks.socket_path(key)):
            os.kill(pid, signal.SIGKILL)


def test_a_sockets_folder_others_can_write_to_forks_nothing(monkeypatch, tmp_path: Path):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    shared = tmp_path / f"engine-forks-{os.getuid()}"
    shared.mkdir()
    shared.chmod(0o777)  # as another user could have made it, to listen at a server's address
    args = ["supervise", str(tmp_path / "no-run")]
    for _ in range(2):  # a second start would bring a server up
        assert forks.start_forked(args, cwd=str(tmp_path)) is None
    assert list(shared.iterdir()) == []
    shared.chmod(0o700)
    forks.start_forked(args, cwd=str(tmp_path))
    assert [path.suffix for path in shared.iterdir()] == [".wanted"]


def test_a_held_server_outlives_its_idle_time_until_its_holder_is_gone(tmp_path: Path):
    socket = tmp_path / "forks.sock"
    holder = subprocess.Popen(["sleep", "600"])  # a studio, as far as the server can tell
    mark = tmp_path / f"forks.held-by-{holder.pid}"
    mark.touch()
    server = subprocess.Popen([*engine_command("fork-server", str(socket), "--idle", "1")], env=engine_env())
    try:
        deadline = time.monotonic() + SERVER_UP_S
        while not socket.exists() and server.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert forks._answers(socket)  # a probe is answered, and the server goes on serving
        with pytest.raises(subprocess.TimeoutExpired):
            server.wait(timeout=4)  # four idle times: held, it stays
        holder.kill()
        holder.wait()
        assert server.wait(timeout=60) == 0  # its holder gone: it exits at its next idle time
        assert not socket.exists() and not mark.exists()
    finally:
        for process in (server, holder):
            process.kill()
            process.wait()


def test_a_studio_brings_its_server_up_at_once_and_holds_it(monkeypatch, tmp_path: Path):
    monkeypatch.setenv("FORKS_TEST", f"{tmp_path}-held")
    monkeypatch.delenv(forks.SWITCH_ENV, raising=False)
    key = forks.server_key(engine_env())
    socket = forks.socket_path(key)
    try:
        assert forks.prepare(holder=os.getpid())  # no earlier start: a studio wants it for the first one
        assert forks.wait_for_server(key, SERVER_UP_S)
        assert forks.prepare(holder=os.getpid())
        assert len(_servers(socket)) == 1  # it answers: no second one
        assert (socket.parent / f"{key}.held-by-{os.getpid()}").exists()
    finally:
        for pid in _servers(socket):
            os.kill(pid, signal.SIGKILL)
        (socket.parent / f"{key}.held-by-{os.getpid()}").unlink(missing_ok=True)


def test_a_job_is_forked_too_and_makes_what_a_cold_job_makes(server: str, tmp_path: Path, monkeypatch):
    run_dir = runs.create_run(small_config(train={"max_steps": 2, "save_steps": 2}), run_dir=tmp_path / "ws" / "run")
    runs.start(run_dir)
    assert runs.wait(run_dir, timeout=300).state == "completed"

    def export(name: str) -> Path:
        job_dir = jobs.start(
            tmp_path / "ws",
            "export",
            ["export", str(run_dir), "--kind", "merged", "--out", name, "--workspace", str(tmp_path / "ws")],
        )
        pid = jobs.status(job_dir).pid
        forked = "fork-server" in command_line(pid)  # read at once: exporting takes longer than this look
        done = jobs.wait(job_dir, timeout=300)
        assert done.state == "completed", done
        assert forked == (os.environ.get(forks.SWITCH_ENV) != "0"), command_line(pid)
        return Path(done.result["path"])

    warm = export("warm")
    with monkeypatch.context() as cold:
        cold.setenv(forks.SWITCH_ENV, "0")
        expected = export("cold")
    files = sorted(path.name for path in expected.iterdir())
    assert files == sorted(path.name for path in warm.iterdir()) and "model.safetensors" in files
    assert (warm / "model.safetensors").read_bytes() == (expected / "model.safetensors").read_bytes()


def _loaded_torch(pid: int) -> bool:
    """Whether the process has torch's library mapped (a cold CLI that checked a config has)."""
    return "libtorch" in Path(f"/proc/{pid}/maps").read_text()


def test_a_cli_command_is_handed_to_the_server_with_its_signals_and_exit_code(server: str, tmp_path: Path):
    config = tmp_path / "config.yaml"
    save_config(small_config(train={"max_steps": 400, "save_steps": 1000}), config)
    run_dir = tmp_path / "run"

    def cli(*args: str) -> subprocess.Popen[str]:
        command = engine_command(*args)
        return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=engine_env())

    train = cli("train", str(config), "--run-dir", str(run_dir))
    wait_for_step(run_dir, 2)
    assert not _loaded_torch(train.pid)  # it checked the config and trains through its fork: it only waits
    train.send_signal(signal.SIGINT)  # Ctrl-C: passed on, a stop with a checkpoint
    output = train.communicate(timeout=120)[0]
    stopped = runs.status(run_dir)
    assert train.returncode == 3 and stopped.state == "stopped" and stopped.checkpoints == [stopped.step], output
    assert f"stopped at step {stopped.step}; resume with" in output and "train step 2/400" in output

    resume = cli("resume", str(run_dir))
    wait_for_step(run_dir, stopped.step + 2)
    resume.kill()  # SIGKILL, as a closed terminal's shell may: the fork is hung up, which stops the run
    assert resume.wait(timeout=60) == -signal.SIGKILL
    again = runs.wait(run_dir, timeout=120)
    assert again.state == "stopped" and again.checkpoints[-1] > stopped.step, again

    bad = cli("check", str(tmp_path / "missing.yaml"))
    assert bad.wait(timeout=120) == 2 and "missing.yaml" in bad.stdout.read()  # the same code and words as cold


def test_starting_a_server_tidies_what_says_nothing_any_more(tmp_path: Path):
    old = time.time() - forks.IDLE_S - 60
    files = {
        "a.wanted": b"",  # an old start's mark: gone
        "b.wanted": b"",  # a recent one: kept (a second start within IDLE_S brings a server)
        "c.log": b"",  # an empty log of a server that is gone: gone
        "d.log": b"",  # an empty log of a server that listens: kept
        "d.sock": b"",
        "e.log": b"Traceback ...",  # why a server never came up: kept
    }
    for name, content in files.items():
        (tmp_path / name).write_bytes(content)
        if name != "b.wanted":
            os.utime(tmp_path / name, (old, old))
    forks._tidy(tmp_path)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["b.wanted", "d.log", "d.sock", "e.log"]


def _chat(client: ChatClient) -> tuple[list[str], str]:
    """Load the demo model and answer one question greedily: the load steps and the reply."""
    steps = [progress.message for progress in client.load(ModelSpec(base=DEMO_MODEL))]
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    reply = "".join(client.generate(messages, SamplingParams(temperature=0, max_new_tokens=12)))
    return steps, reply


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (the engine's own walk of /proc, which skips a process that ends meanwhile: on a
    busy machine some always do)."""
    return process_tree(pid)[1:]


def test_a_chat_worker_is_forked_warm_and_answers_as_a_cold_one(server: str, monkeypatch):
    with monkeypatch.context() as cold:
        cold.setenv(forks.SWITCH_ENV, "0")
        cold_client = ChatClient()
        cold_steps, cold_reply = _chat(cold_client)
        assert _loaded_torch(cold_client.pid)  # the worker itself
        cold_client.unload()

    listening(server)  # a cold load can outlast the server's idle time on a busy machine
    before = set(_descendants(_servers(forks.socket_path(server))[0]))
    client = ChatClient()
    steps, reply = _chat(client)
    assert reply == cold_reply and steps == cold_steps  # the same steps shown, the same greedy answer
    assert not _loaded_torch(client.pid)  # the process the client started only waits: its fork has the model
    forked = [pid for pid in _descendants(_servers(forks.socket_path(server))[0]) if pid not in before]
    assert client.info.pid in forked and _loaded_torch(client.info.pid)
    os.kill(client.pid, signal.SIGKILL)  # the client's process killed: its fork is hung up and ends too
    assert wait_until_gone(forked, 180), [command_line(pid) for pid in forked if pid_alive(pid)]


def wait_until_gone(pids: list[int], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while any(pid_alive(pid) for pid in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True
