"""The live charts' server side: run tokens, the shared feeds, and which figures a page is sent."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from engine import runs
from engine.config import RunConfig, save_config
from engine.store.rundir import METRICS_FILE, update_status
from studio.monitor.live import CHARTS, FEEDS, METHOD_CHARTS, SharedFeeds, changed_charts, live_token, run_of_token

# The charts of an sft run, or of none: the preference methods' own charts are hidden there.
COMMON = set(CHARTS) - set(METHOD_CHARTS)


def write_run(workspace: Path, name: str = "run") -> Path:
    run_dir = workspace / "runs" / name
    run_dir.mkdir(parents=True)
    save_config(RunConfig(name=name), run_dir / "config.yaml")
    update_status(run_dir, name=name, state="running", created_at=time.time())
    return run_dir


def append(run_dir: Path, *events: dict) -> None:
    with (run_dir / METRICS_FILE).open("a") as handle:
        handle.write("".join(json.dumps(event) + "\n" for event in events))


def train_event(step: int, loss: float, **more: float) -> dict:
    return {"event": "train", "step": step, "time": 100.0 + step, "loss": loss, "learning_rate": 1e-3, **more}


def test_a_token_names_one_run_of_one_workspace(tmp_path):
    run_dir = write_run(tmp_path / "a")
    other = write_run(tmp_path / "b")  # the same run id in another workspace
    token = live_token(run_dir)
    assert token.startswith(run_dir.name + ".")
    assert run_of_token(tmp_path / "a" / "runs", token) == run_dir.resolve()
    assert run_of_token(tmp_path / "b" / "runs", token) is None  # signed for the other workspace's run
    assert run_of_token(tmp_path / "b" / "runs", live_token(other)) == other.resolve()
    name, signature = token.rsplit(".", 1)
    forged = f"{name}.{'0' * len(signature)}"
    for bad in (forged, name, "", f"../a/runs/{name}.{signature}", f"..{'.' + signature}", "/etc/passwd.x"):
        assert run_of_token(tmp_path / "a" / "runs", bad) is None, bad
    shutil.rmtree(run_dir)
    assert run_of_token(tmp_path / "a" / "runs", token) is None  # a deleted run


def test_a_page_gets_only_the_charts_that_changed(tmp_path):
    run_dir = write_run(tmp_path)
    append(run_dir, *(train_event(s, 3.0 - s / 10, grad_norm=1.0) for s in range(1, 6)))
    token = live_token(run_dir)
    with FEEDS.polled(run_dir) as feed:
        first = changed_charts(feed, token, {}, smoothing=0.0)
    assert set(first["figures"]) == COMMON
    loss = first["figures"]["loss"]["data"]
    assert [trace["name"] for trace in loss] == ["train loss"]
    assert loss[0]["x"] == [1, 2, 3, 4, 5] and loss[0]["y"][-1] == pytest.approx(2.5)
    assert first["figures"]["grad_norm"]["data"][0]["y"] == [1.0] * 5
    keys = first["keys"]
    with FEEDS.polled(run_dir) as feed:
        assert changed_charts(feed, token, keys)["figures"] == {}  # nothing new: nothing sent
    append(run_dir, train_event(6, 1.0))  # loss and learning rate, no gradient norm or throughput
    with FEEDS.polled(run_dir) as feed:
        second = changed_charts(feed, token, keys)
        assert set(second["figures"]) == {"loss", "learning_rate"}
        assert second["figures"]["loss"]["data"][0]["y"][-1] == 1.0
        # Smoothing and log scale redraw the loss chart only, raw line faint behind the smoothed one.
        smoothed = changed_charts(feed, token, second["keys"], smoothing=0.5, log_y=True)
        assert set(smoothed["figures"]) == {"loss"}
        figure = smoothed["figures"]["loss"]
        assert [trace["name"] for trace in figure["data"]] == ["train (raw)", "train loss"]
        assert figure["layout"]["yaxis"]["type"] == "log"
        # Another run's keys (or none) get every chart again; unwanted charts are left out.
        assert set(changed_charts(feed, "other", second["keys"])["figures"]) == COMMON
        assert set(changed_charts(feed, token, {}, wanted=("loss",))["keys"]) == {"loss"}


def test_no_run_gets_empty_charts():
    empty = changed_charts(None, "none", {})
    assert set(empty["figures"]) == COMMON
    assert all(trace["x"] == [] for figure in empty["figures"].values() for trace in figure["data"])
    assert changed_charts(None, "none", empty["keys"])["figures"] == {}


def test_a_long_run_costs_one_line_per_poll(tmp_path, monkeypatch):
    """A 50k-step run: each chart carries at most 2000 points, and a poll reads only the newly written bytes."""
    run_dir = write_run(tmp_path)
    append(run_dir, *(train_event(s, 1.0 + (s % 97) / 97) for s in range(1, 50_001)))
    feeds = SharedFeeds()
    with feeds.polled(run_dir) as feed:
        first = changed_charts(feed, "t", {})
    assert all(len(trace["x"]) <= 2000 for figure in first["figures"].values() for trace in figure["data"])
    reads = []
    real = runs.read_metrics
    monkeypatch.setattr(runs, "read_metrics", lambda d, o: reads.append(o) or real(d, o))
    line = json.dumps(train_event(50_001, 0.5)) + "\n"
    append(run_dir, train_event(50_001, 0.5))
    with feeds.polled(run_dir) as feed:
        update = changed_charts(feed, "t", first["keys"])
        assert feed.offset - reads[-1] == len(line)  # one line read, not 50k
    assert update["figures"]["loss"]["data"][0]["y"][-1] == 0.5


def test_feeds_are_shared_per_run_and_a_remade_run_starts_over(tmp_path):
    feeds = SharedFeeds(capacity=2)
    run_dir = write_run(tmp_path)
    append(run_dir, train_event(1, 2.0))
    with feeds.polled(run_dir) as first:
        pass
    with feeds.polled(run_dir) as again:
        assert again is first and again.events_read == 1
    shutil.rmtree(run_dir)
    time.sleep(0.01)  # a new config gets a new modification time even where the inode comes back
    remade = write_run(tmp_path)
    append(remade, train_event(1, 5.0))
    with feeds.polled(remade) as fresh:
        assert fresh is not first and fresh.points("loss") == [(1, 5.0)]
    for name in ("b", "c"):  # two more runs push the least recently read out
        with feeds.polled(write_run(tmp_path, name)):
            pass
    with feeds.polled(remade) as reloaded:
        assert reloaded is not fresh and reloaded.points("loss") == [(1, 5.0)]
