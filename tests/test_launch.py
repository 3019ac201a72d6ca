"""launch.py: binds 127.0.0.1 unless told otherwise, --auth / --auth-file logins, --allow-path; and a real studio
with a login refuses its page data and API without credentials and serves them with."""

from __future__ import annotations

import http.cookiejar
import os
import re
import subprocess
import sys
import time
import types
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import launch
from engine.store.paths import PROJECT_ROOT
from studio.demo.policy import DemoPolicy
from studio.path_guard import ALLOWED_PATHS_ENV
from tests.helpers.servers import free_port

FAKE_TOKENS = {"HF_TOKEN": "hf_FakeTokenForTests0123456789abcdef", "WANDB_API_KEY": "f" * 40}


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("STUDIO_HOST", "SPACE_ID", "STUDIO_AUTH", "STUDIO_AUTH_FILE", "STUDIO_DEMO_LIMITS", ALLOWED_PATHS_ENV):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_binds_this_machine_only_unless_told(clean_env: pytest.MonkeyPatch) -> None:
    assert launch.parser().parse_args([]).host == "127.0.0.1"
    assert launch.parser().parse_args(["--host", "0.0.0.0"]).host == "0.0.0.0"
    clean_env.setenv("STUDIO_HOST", "192.168.1.5")
    assert launch.parser().parse_args([]).host == "192.168.1.5"
    clean_env.delenv("STUDIO_HOST")
    clean_env.setenv("SPACE_ID", "user/space")  # a Hugging Face Space must listen on every interface
    assert launch.parser().parse_args([]).host == "0.0.0.0"


def test_main_launches_with_the_resolved_options(clean_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    launched: dict[str, Any] = {}

    class FakeBlocks:
        def queue(self) -> FakeBlocks:
            return self

        def launch(self, **options: Any) -> None:
            launched.update(options)

    # A stand-in for studio.app: what main hands to Gradio is the point, not the page (nor Gradio's import time).
    fake_app = types.ModuleType("studio.app")
    fake_app.build_app = lambda workspace, policy=None: FakeBlocks()  # type: ignore[attr-defined]
    fake_app.launch_options = lambda workspace, policy: {  # type: ignore[attr-defined]
        "head": str(workspace),
        "max_file_size": policy.upload_limit_mb,
    }
    paced: list[FakeBlocks] = []
    fake_app.paced_queue = lambda demo: paced.append(demo) or demo.queue()  # type: ignore[attr-defined]
    clean_env.setitem(sys.modules, "studio.app", fake_app)
    clean_env.setenv("STUDIO_NO_STANDBY", "1")
    launch.main(["--workspace", str(tmp_path / "ws"), "--port", "7999"])
    assert (launched["server_name"], launched["server_port"], launched["auth"]) == ("127.0.0.1", 7999, None)
    assert launched["share"] is False and launched["head"] == str(tmp_path / "ws")  # the options for this workspace
    assert launched["max_file_size"] == 2048  # one's own studio: a large cap
    assert len(paced) == 1  # its queue at the studio's idle pace (studio.app.paced_queue)
    launch.main(["--workspace", str(tmp_path / "ws"), "--auth", "u:p", "--demo"])
    assert launched["auth"] == [("u", "p")] and launched["max_file_size"] == 20  # a small one in demo mode
    clean_env.setenv("STUDIO_MAX_UPLOAD_MB", "5")
    launch.main(["--workspace", str(tmp_path / "ws")])
    assert launched["max_file_size"] == 5


def test_a_space_trusts_one_proxy_for_visitor_addresses(clean_env: pytest.MonkeyPatch) -> None:
    args = launch.parser().parse_args(["--demo"])
    assert launch.studio_policy(args, {}).proxy_hops == 0  # no proxy: X-Forwarded-For is the client's to invent
    assert launch.studio_policy(args, {"SPACE_ID": "user/space"}).proxy_hops == 1


def policy_of(*flags: str, env: dict[str, str] | None = None) -> DemoPolicy:
    """The policy launch.py serves under for these flags and environment."""
    return launch.studio_policy(launch.parser().parse_args(list(flags)), env or {})


def test_demo_limits_come_from_the_environment_then_the_flags(clean_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    env = {"STUDIO_DEMO_LIMITS": "visitor_quota_mb=500, max_jobs=3"}
    policy = policy_of("--demo", "--demo-limit", "keep_days=14", "--demo-limit", "max_jobs=1", env=env)
    assert (policy.keep_days, policy.max_jobs, policy.visitor_quota_mb) == (14, 1, 500)  # the flag wins: max_jobs 1
    assert policy_of("--demo") == DemoPolicy(enabled=True)  # none given: the policy's own
    assert policy_of("--demo-limit", "min_free_disk_mb=0").min_free_disk_mb == 0  # no floor: the host's choice
    refusals = {
        "nope=1": "expected NAME=VALUE, NAME one of max_steps,",
        "max_jobs=1.5": "max_jobs: '1.5' is not a whole number",
        "keep_days=-1": "keep_days: '-1' must be above 0",
        "max_jobs=0": "max_jobs: '0' must be above 0",
        "keep_days=nan": "keep_days: 'nan' is not a finite number",
        "proxy_hops=2": "'proxy_hops=2': expected NAME=VALUE",  # follows from where the studio runs
    }
    for item, message in refusals.items():
        with pytest.raises(ValueError, match=re.escape(message)):
            policy_of("--demo-limit", item)
    clean_env.setenv("STUDIO_DEMO_LIMITS", "max_jobs=lots")
    with pytest.raises(SystemExit) as exit_info:  # the studio does not start: argparse's error, exit 2
        launch.main(["--workspace", str(tmp_path / "ws"), "--demo"])
    assert exit_info.value.code == 2


def test_logins_come_from_flags_a_file_and_the_environment(clean_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    logins = tmp_path / "logins.txt"
    logins.write_text("# who may log in\nann:secret\n\nbob:pa:ss:word\n")
    args = launch.parser().parse_args(["--auth", "u:p", "--auth-file", str(logins)])
    assert launch.logins(args) == [("u", "p"), ("ann", "secret"), ("bob", "pa:ss:word")]
    assert launch.logins(launch.parser().parse_args([])) is None
    clean_env.setenv("STUDIO_AUTH", "a:1,b:2")
    assert launch.logins(launch.parser().parse_args([])) == [("a", "1"), ("b", "2")]
    for bad in ("nopassword", ":p", "u:"):
        with pytest.raises(SystemExit):
            launch.parser().parse_args(["--auth", bad])


def test_allow_path_adds_folders_for_the_path_checks(clean_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    clean_env.setenv(ALLOWED_PATHS_ENV, "/data/shared")
    args = launch.parser().parse_args(["--allow-path", str(tmp_path), "--allow-path", "~"])
    launch.allow_paths(args.allow_path)
    assert os.environ[ALLOWED_PATHS_ENV].split(os.pathsep) == ["/data/shared", str(tmp_path), str(Path.home())]


# --- a real studio with a login -----------------------------------------------------------------------------------


def status_of(client: urllib.request.OpenerDirector, url: str, data: dict[str, str] | None = None) -> tuple[int, str]:
    """HTTP status and body of a GET (or a form POST when ``data`` is given)."""
    body = urllib.parse.urlencode(data).encode() if data is not None else None
    try:
        with client.open(url, data=body, timeout=10) as response:
            return response.status, response.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode("utf-8", "replace")
    except urllib.error.URLError:  # not listening yet
        return 0, ""


def opener(*handlers: Any) -> urllib.request.OpenerDirector:
    """A plain HTTP client that never goes through a proxy (the studio is on this machine)."""
    return urllib.request.build_opener(urllib.request.ProxyHandler({}), *handlers)


@pytest.fixture(scope="module")
def studio_with_login(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``python launch.py --auth u:p`` with fake tokens in its environment; yields its URL."""
    workspace, port = tmp_path_factory.mktemp("auth-ws"), free_port()
    log = (workspace.parent / "studio.log").open("wb")
    env = dict(os.environ, HF_HUB_OFFLINE="1", STUDIO_NO_STANDBY="1", **FAKE_TOKENS)
    command = [sys.executable, "launch.py", "--port", str(port), "--workspace", str(workspace), "--auth", "u:p"]
    process = subprocess.Popen(command, cwd=PROJECT_ROOT, stdout=log, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 120
        while status_of(opener(), url + "/")[0] != 200:
            assert process.poll() is None, f"the studio exited with {process.returncode}"
            assert time.time() < deadline, "the studio did not serve its page within 120 s"
            time.sleep(0.5)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()


@pytest.mark.integration
def test_the_page_and_api_need_the_login(studio_with_login: str) -> None:
    url, anonymous = studio_with_login, opener()
    for path in (
        "/config",
        "/gradio_api/info",
        "/gradio_api/file=/etc/passwd",
        "/studio/live/charts",
        "/studio/live/plotly.js",
    ):
        assert status_of(anonymous, url + path)[0] == 401, path
    cookies = http.cookiejar.CookieJar()
    browser = opener(urllib.request.HTTPCookieProcessor(cookies))
    assert status_of(browser, url + "/login", {"username": "u", "password": "wrong"})[0] == 400
    assert status_of(browser, url + "/config")[0] == 401
    assert status_of(browser, url + "/login", {"username": "u", "password": "p"}) == (200, '{"success":true}')
    code, page_config = status_of(browser, url + "/config")
    assert code == 200 and '"components"' in page_config
    # The tokens in the studio's environment never reach the page.
    assert all(token not in page_config for token in FAKE_TOKENS.values())
    assert status_of(browser, url + "/gradio_api/file=/etc/passwd")[0] == 403
    code, charts = status_of(browser, url + "/studio/live/charts")  # the live charts' route, with the login
    assert code == 200 and '"figures"' in charts


@pytest.mark.integration
def test_gradio_client_needs_the_login(studio_with_login: str) -> None:
    from gradio_client import Client

    with pytest.raises(Exception, match="credentials"):
        Client(studio_with_login, verbose=False)
    client = Client(studio_with_login, auth=("u", "p"), verbose=False)
    assert client.predict(api_name="/list_runs") == []
