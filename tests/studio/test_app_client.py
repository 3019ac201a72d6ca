"""The launched studio through gradio_client: the page serves, and the run API answers by run id."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from gradio_client import Client

from engine.config import RunConfig, save_config
from engine.store.rundir import METRICS_FILE, update_status
from studio.app import build_app, launch_options
from studio.monitor.live import live_token
from tests.helpers.servers import free_port


@pytest.fixture(scope="module")
def studio(tmp_path_factory):
    workspace = tmp_path_factory.mktemp("workspace")
    run_dir = workspace / "runs" / "20260101-000000-abcd-hand"
    run_dir.mkdir(parents=True)
    save_config(RunConfig(name="hand"), run_dir / "config.yaml")
    update_status(run_dir, name="hand", state="stopped", step=2, max_steps=10, created_at=time.time())
    events = [{"event": "train", "step": s, "time": 1.0 * s, "loss": 3.0 / s} for s in (1, 2)]
    (run_dir / METRICS_FILE).write_text("".join(json.dumps(e) + "\n" for e in events))
    demo = build_app(workspace)
    port = free_port()
    demo.queue().launch(server_port=port, prevent_thread_lock=True, quiet=True, **launch_options(workspace))
    yield f"http://127.0.0.1:{port}/", run_dir
    demo.close()


def test_page_serves_with_the_studio_css(studio):
    url, _ = studio
    with urllib.request.urlopen(url, timeout=30) as response:
        assert response.status == 200
        page = response.read().decode()
    assert "Tuning Studio" in page


def test_api_lists_runs_and_reads_status_and_metrics(studio):
    url, run_dir = studio
    client = Client(url, verbose=False)
    listed = client.predict(api_name="/list_runs")
    assert [row["Run id"] for row in listed] == [run_dir.name]
    assert listed[0]["State"] == "stopped" and listed[0]["Last loss"] == 1.5
    status = client.predict(run_dir.name, api_name="/run_status")
    assert status["state"] == "stopped" and status["max_steps"] == 10
    first = client.predict(run_dir.name, 0, api_name="/run_metrics")
    assert [event["step"] for event in first["events"]] == [1, 2]
    again = client.predict(run_dir.name, first["offset"], api_name="/run_metrics")
    assert again["events"] == []


def test_api_actions_refuse_what_does_not_fit(studio):
    url, run_dir = studio
    client = Client(url, verbose=False)
    assert client.predict(run_dir.name, api_name="/stop_run") is False  # not running
    for action in ("/save_run", "/pause_run", "/continue_run"):  # no worker to ask (tests/engine/runs/test_requests.py)
        assert client.predict(run_dir.name, api_name=action) is False
    with pytest.raises(Exception, match="no checkpoint to resume from"):
        client.predict(run_dir.name, api_name="/resume_run")
    with pytest.raises(Exception, match="'../../etc' is not a run id"):  # nothing outside the workspace
        client.predict("../../etc", api_name="/run_status")


def get_json(url: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_live_charts_route_answers_for_the_runs_of_its_workspace(studio):
    url, run_dir = studio
    charts = url + "studio/live/charts?"
    token = live_token(run_dir)
    status, body = get_json(charts + urllib.parse.urlencode({"run": token}))
    assert status == 200 and body["size"] == (run_dir / METRICS_FILE).stat().st_size
    assert body["figures"]["loss"]["data"][0]["y"] == [3.0, 1.5]
    # The panels that change with every step come along: progress (step 2 of 10, stopped) and the latest loss;
    # the log only when asked (the page's log section is open).
    assert "step 2</b> / 10" in body["panels"]["progress"] and "1.5000" in body["panels"]["stats"]
    assert "log" not in body
    (run_dir / "train.log").write_text("loading the model\n<b>step 2</b>\n")
    _, with_log = get_json(charts + urllib.parse.urlencode({"run": token, "log": 1}))
    assert with_log["log"] == "loading the model\n<b>step 2</b>\n"  # as text: the page shows it with textContent
    status, again = get_json(charts + urllib.parse.urlencode({"run": token, "have": json.dumps(body["keys"])}))
    assert status == 200 and again["figures"] == {}  # the page is up to date
    _, empty = get_json(charts)  # no run: the empty charts
    assert empty["figures"]["loss"]["data"][0]["x"] == []
    forged = run_dir.name + ".0123456789abcdef0123456789abcdef"
    for bad in (forged, "../../etc.x", run_dir.name):
        assert get_json(charts + urllib.parse.urlencode({"run": bad}))[0] == 404, bad
    with urllib.request.urlopen(url + "studio/live/plotly.js", timeout=30) as response:
        assert b"window.Plotly" in response.read()


def test_live_charts_route_refuses_a_deeply_nested_have_quietly(studio, capfd, caplog):
    url, run_dir = studio
    query = {
        "run": live_token(run_dir),
        "have": "[" * 2000 + "]" * 2000,
    }  # past the parser's depth, within the URL size
    status, body = get_json(url + "studio/live/charts?" + urllib.parse.urlencode(query))
    assert (status, body) == (400, {"error": "have: the value is nested too deeply"})
    nested = {"run": live_token(run_dir), "have": json.dumps({"loss": [[["x"]]], "lr": {"a": 1}})}
    status, answer = get_json(url + "studio/live/charts?" + urllib.parse.urlencode(nested))
    assert status == 200 and answer["figures"]["loss"]["data"][0]["y"] == [3.0, 1.5]  # holds nothing: all sent
    logged = capfd.readouterr().err + caplog.text
    assert "Traceback" not in logged and "RecursionError" not in logged


def test_live_charts_route_holds_the_answer_until_the_trainer_writes(studio):
    url, hand_run = studio
    run_dir = hand_run.parent / "20260101-000001-wait-live"
    run_dir.mkdir()
    try:
        save_config(RunConfig(name="live"), run_dir / "config.yaml")
        (run_dir / METRICS_FILE).write_text(json.dumps({"event": "train", "step": 1, "time": 1.0, "loss": 2.0}) + "\n")
        query = {"run": live_token(run_dir), "charts": "loss"}
        _, first = get_json(url + "studio/live/charts?" + urllib.parse.urlencode(query))
        held = {**query, "have": json.dumps(first["keys"]), "since": first["version"], "wait": 20}
        line = json.dumps({"event": "train", "step": 2, "time": 2.0, "loss": 1.0}) + "\n"
        writer = threading.Timer(0.5, lambda: (run_dir / METRICS_FILE).open("a").write(line))
        asked = time.monotonic()
        writer.start()
        _, answer = get_json(url + "studio/live/charts?" + urllib.parse.urlencode(held))
        waited = time.monotonic() - asked
        # It came back because the file grew (long before the 10 s cap), with the new point and nothing else.
        assert answer["figures"]["loss"]["data"][0]["x"] == [1, 2] and set(answer["figures"]) == {"loss"}
        assert 0.4 < waited < 9, waited
    finally:
        shutil.rmtree(run_dir)


def test_studio_imports_no_training_library():
    heavy = ("torch", "transformers", "trl", "peft", "bitsandbytes")
    code = f"import sys, studio.app; print([m for m in {heavy!r} if m in sys.modules])"

    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=Path(__file__).parents[2]
    )
    assert out.stdout.strip() == "[]"


def test_page_load_picks_the_active_run_and_brings_the_monitor_forward(tmp_path):
    import gradio as gr

    from studio.app import initial_view

    assert initial_view(tmp_path, None) == [None, gr.skip(), gr.skip()]  # (run, tab, visitor id: none here)
    done = tmp_path / "runs" / "b-done"
    done.mkdir(parents=True)
    save_config(RunConfig(name="done"), done / "config.yaml")
    update_status(done, state="completed", created_at=2.0)
    assert initial_view(tmp_path, None) == [str(done.resolve()), gr.skip(), gr.skip()]
    live = tmp_path / "runs" / "a-live"
    live.mkdir()
    save_config(RunConfig(name="live"), live / "config.yaml")
    stand_in = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", "engine-standin"])
    try:
        update_status(live, state="running", created_at=1.0, supervisor_pid=stand_in.pid)
        chosen, tabs, _ = initial_view(tmp_path, None)
        assert chosen == str(live.resolve()) and tabs.selected == "monitor"
        assert initial_view(tmp_path, str(done)) == [gr.skip()] * 3  # a session keeps its run
    finally:
        stand_in.kill()
        stand_in.wait()


def test_launch_flags_environment_and_space(tmp_path, monkeypatch):
    sys.path.insert(0, str(Path(__file__).parents[2]))
    import launch

    for name in ("SPACE_ID", "STUDIO_HOST", "STUDIO_PORT", "STUDIO_AUTH", "STUDIO_AUTH_FILE", "STUDIO_WORKSPACE"):
        monkeypatch.delenv(name, raising=False)
    args = launch.parser().parse_args([])
    assert (args.host, args.port, args.workspace, launch.logins(args)) == ("127.0.0.1", 7860, Path("workspace"), None)
    monkeypatch.setenv("SPACE_ID", "someone/studio")
    assert launch.parser().parse_args([]).host == "0.0.0.0"
    monkeypatch.setenv("STUDIO_PORT", "9000")
    monkeypatch.setenv("STUDIO_AUTH", "ann:pw1,bob:p:w")
    args = launch.parser().parse_args(["--host", "127.0.0.1"])
    assert (args.host, args.port) == ("127.0.0.1", 9000)
    assert launch.logins(args) == [("ann", "pw1"), ("bob", "p:w")]
    logins = tmp_path / "logins"
    logins.write_text("# team\ncid:secret\n\n")
    args = launch.parser().parse_args(["--auth", "dan:x", "--auth-file", str(logins)])
    assert launch.logins(args) == [("dan", "x"), ("cid", "secret")]
    with pytest.raises(SystemExit):
        launch.parser().parse_args(["--auth", "no-colon"])
