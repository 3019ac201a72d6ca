"""The Sweeps tab's handlers as plain functions, on a real small study: the poll and its skips, a trial opened in the
Monitor, the best trial into the Train form, the base from the form or a file, Start's refusals, and demo mode."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import gradio as gr
import optuna
import pandas as pd
import pytest
import yaml
from gradio.state_holder import SessionState
from starlette.requests import Request

from engine.config import load_config
from engine.sweeps import load_sweep, sweep_dir
from engine.sweeps.control import SweepLaunch
from engine.sweeps.study import SWEEP_FILE, TARGET_ATTR, open_study, storage_for
from studio.app import build_app
from studio.context import StudioContext
from studio.demo.caller import Caller
from studio.demo.policy import SWEEPS_REFUSAL, DemoPolicy
from studio.form.values import config_to_values
from studio.i18n.catalog import text
from studio.markup import message_html
from studio.sweeps import actions, tab
from studio.sweeps.space_editor import SWEEP_PRESETS_DIR, first_sweep
from studio.train.actions import PRESET_LABEL
from tests.engine.sweeps.sweep_files import DEMO_PRESET
from tests.studio.sweeps.small_study import make_study, small_sweep

DEMO = load_config(DEMO_PRESET)
SKIP = gr.skip()


def test_the_poll_shows_the_sweep_then_skips_what_did_not_change(workspace: Path) -> None:
    key, status, table, parallel, progress, best, timer = tab.watch_outputs(Caller(workspace), "small")
    assert isinstance(table, pd.DataFrame) and list(table.columns)[3] == "eval_loss"
    assert table["Trial"].tolist() == [0, 1, 2, 3, 4] and table["Rank"].tolist()[:2] == [1, 2]
    assert '"type": "parcoords"' in parallel.plot and '"best so far"' in progress.plot
    assert "Best: trial 0" in best and "4/6 trials" in status
    assert timer.active is False  # no driver: nothing to poll for
    again = tab.watch_outputs(Caller(workspace), "small", key)
    assert again[0] == key and again[1:6] == [SKIP] * 5 and again[6].active is False
    empty = tab.watch_outputs(Caller(workspace), None)
    assert empty[0] is None and empty[2].empty and empty[5].startswith('<div class="ts-empty">')


def test_after_an_action_the_picker_shows_the_sweep_it_concerns(workspace: Path) -> None:
    make_study(workspace, "zeta", with_runs=())
    message, picker, *shown = tab.relisted(Caller(workspace), "small", actions.Outcome("done", "ok", "zeta"))
    assert message == '<div class="ts-message ts-message-ok">done</div>'
    assert picker.value == "zeta" and [name for _, name in picker.choices] == ["small", "zeta"]  # gradio's pairs
    assert len(shown) == 7 and "zeta" in shown[1]
    assert shown[-1].active is True  # an action that started a driver: the page follows it
    assert tab.relisted(Caller(workspace), "small", actions.Outcome("no", "warn", "zeta"))[-1].active is False
    picker, *_ = tab.relisted(Caller(workspace), None)
    assert picker.value == "small"  # none picked: the first


def test_a_clicked_trial_opens_its_run_in_the_monitor(workspace: Path) -> None:
    run_id = tab.watch_outputs(Caller(workspace), "small")[2]["Run id"].tolist()[0]
    current, tabs = tab.open_trial(Caller(workspace), run_id)
    assert current == str((workspace / "runs" / run_id).resolve()) and tabs.selected == "monitor"
    assert tab.open_trial(Caller(workspace), "no-run-1") == [SKIP, SKIP]  # a trial whose run is gone


def test_the_best_trial_fills_the_train_form(workspace: Path) -> None:
    values, outcome = actions.best_values(Caller(workspace), "small")
    assert outcome.kind == "ok" and "trial 0 of small" in outcome.message
    assert values is not None and values["name"] == "small-best"
    assert values["train.max_steps"] == 10 and values["train.per_device_batch_size"] == 8  # the trial's own run
    make_study(workspace, "gone", with_runs=())  # its best trial's run was deleted
    values, outcome = actions.best_values(Caller(workspace), "gone")
    assert values is None and outcome.kind == "error" and "no run 'no-run-0'" in outcome.message
    open_study(small_sweep("fresh"), workspace)
    assert actions.best_values(Caller(workspace), "fresh")[1].message == "No trial of fresh has completed yet."


def test_the_base_comes_from_the_train_form_or_a_file(tmp_path: Path) -> None:
    text = first_sweep(DEMO, "mine")
    changed = DEMO.model_copy(update={"train": DEMO.train.model_copy(update={"max_steps": 7})})
    new, outcome = actions.yaml_from_form(Caller(tmp_path), text, config_to_values(changed))
    assert outcome.kind == "ok" and yaml.safe_load(new)["base"]["train"]["max_steps"] == 7
    assert yaml.safe_load(new)["name"] == "mine"  # the rest as it was
    broken = {**config_to_values(DEMO), "train.learning_rate": -1}
    new, outcome = actions.yaml_from_form(Caller(tmp_path), text, broken)
    assert new is None and outcome.kind == "error" and "train.learning_rate: must be > 0" in outcome.message
    new, outcome = actions.yaml_from_file(Caller(tmp_path), text, str(DEMO_PRESET.parent / "demo-dpo.yaml"))
    assert yaml.safe_load(new)["base"]["method"] == "dpo" and outcome.message == "The base is now demo-dpo.yaml."
    new, _ = actions.yaml_from_file(Caller(tmp_path), text, str(SWEEP_PRESETS_DIR / "demo-sweep.yaml"))
    assert yaml.safe_load(new)["name"] == "demo-sweep" and yaml.safe_load(new)["base"]["train"]["max_steps"] == 600
    new, outcome = actions.yaml_from_file(Caller(tmp_path), text, "/etc/passwd")
    assert new is None and outcome.kind == "error" and "passwd" in outcome.message
    labels = [label for label, _ in actions.base_choices(tmp_path)]
    assert labels[:2] == [actions.FORM_LABEL, f"{actions.SWEEP_LABEL} demo-sweep"]  # words the page translates
    assert f"{PRESET_LABEL} demo" in labels


def test_start_refuses_a_bad_sweep_naming_the_entry_and_starts_nothing(tmp_path: Path) -> None:
    text = first_sweep(DEMO, "bad").replace("{choices: [4, 8, 16, 32]}", "{choices: [4, 0]}")
    outcome = actions.start(Caller(tmp_path), text)
    assert outcome.kind == "error" and outcome.name is None
    assert outcome.message == 'Not started: space."adapter.r": 0 is refused: adapter.r: must be >= 1'
    assert not (tmp_path / "sweeps").exists()
    assert actions.stop(Caller(tmp_path), "bad").message == "The sweep bad is not running."
    assert actions.resume(Caller(tmp_path), "bad").message.startswith("Not continued: no sweep named bad")
    two = text.replace("space:\n", "space:\n  adapter.dropout: {low: 0, high: 2}\n")
    assert actions.check_html(Caller(tmp_path), two) == (
        '<div class="ts-message ts-message-error">space.&quot;adapter.dropout&quot;: high 2 is outside the '
        "field&#x27;s bounds: adapter.dropout must be &lt; 1<br>space.&quot;adapter.r&quot;: 0 is refused: "
        "adapter.r: must be &gt;= 1</div>"
    )


def test_start_keeps_a_sweep_file_its_driver_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sweep whose base is named by its path and whose objective has one key: Start writes the base into the
    sweep's folder (which stands alone then) and keeps a file the driver reads (engine.sweeps.load_sweep, the
    driver's reader), not one whose objective lost its braces."""
    spawned: list[str] = []

    def no_driver(workspace: Path, name: str, target: Path) -> SweepLaunch:  # the driver's process is not the point
        spawned.append(name)
        return SweepLaunch(name, target, 4242, target / "driver.log")

    monkeypatch.setattr("engine.sweeps.control._spawn", no_driver)
    text = (SWEEP_PRESETS_DIR / "demo-sweep.yaml").read_text(encoding="utf-8").replace("name: demo-sweep", "name: one")
    text = re.sub(r"objective:\n(  .*\n)+", "objective: {metric: train_loss}\n", text)
    assert "base: ../demo.yaml\n" in text and "objective: {metric: train_loss}\n" in text
    outcome = actions.start(Caller(tmp_path), text)
    assert (outcome.kind, outcome.name, spawned) == ("ok", "one", ["one"]) and "Started" in outcome.message
    config = load_sweep(sweep_dir(tmp_path, "one") / SWEEP_FILE)
    assert (config.objective.metric, config.base, config.trials) == ("train_loss", DEMO, 6)
    assert "objective: {metric: train_loss}\n" in (sweep_dir(tmp_path, "one") / SWEEP_FILE).read_text()


def test_continue_is_refused_for_a_sweep_that_ran_all_its_trials(workspace: Path) -> None:
    make_study(workspace, "done", with_runs=())
    study = optuna.load_study(study_name="done", storage=storage_for(sweep_dir(workspace, "done")))
    study.tell(study.trials[4].number, 3.0)  # the running trial ends: 5 trials counted ...
    study.set_user_attr(TARGET_ATTR, 5)  # ... of 5
    outcome = actions.resume(Caller(workspace), "done")
    assert (outcome.message, outcome.kind) == ("The sweep done has run all its 5 trials.", "warn")
    assert not (sweep_dir(workspace, "done") / "driver.log").exists()  # no driver started


def test_demo_mode_refuses_every_sweep_action(workspace: Path) -> None:
    demo = DemoPolicy(enabled=True)
    for outcome in (
        actions.start(Caller(workspace, demo), first_sweep(DEMO, "x")),
        actions.stop(Caller(workspace, demo), "small"),
        actions.resume(Caller(workspace, demo), "small"),
        actions.best_values(Caller(workspace, demo), "small")[1],
    ):
        assert (outcome.message, outcome.kind) == (SWEEPS_REFUSAL, "warn")
    assert not (workspace / "sweeps" / "x").exists()


def _elem_ids(app: gr.Blocks) -> set[Any]:
    return {getattr(block, "elem_id", None) for block in app.blocks.values()}


def test_the_tab_is_read_only_in_demo_mode(tmp_path: Path) -> None:
    public = _elem_ids(build_app(tmp_path / "public", DemoPolicy(enabled=True)))
    assert "ts-tab-sweeps" in public and "ts-sweeps-off" in public
    assert not {"ts-sweep-start", "ts-sweep-stop", "ts-sweep-continue", "ts-sweep-yaml"} & public
    own = _elem_ids(build_app(tmp_path / "own"))
    assert {"ts-sweep-start", "ts-sweep-stop", "ts-sweep-table", "ts-sweep-parallel"} <= own
    assert "ts-sweeps-off" not in own


def test_the_tab_speaks_the_language_of_the_page(workspace: Path) -> None:
    """Stop on a sweep that is not running, from a page in Chinese: the message, the table's header and the status
    line come back in Chinese (from the catalog); from a page without a language, in English."""
    with gr.Blocks() as blocks:
        tab.build_sweeps_tab(StudioContext(workspace, gr.State(None), gr.Tabs(), visitor=gr.State(None)))
    stop = next(fn for fn in blocks.fns.values() if fn.name == "stop")

    def press(request: Request | None) -> list[Any]:
        return asyncio.run(blocks.process_api(stop, [None, "small"], state=SessionState(blocks), request=request))[
            "data"
        ]

    cookie = [(b"cookie", b"ts_lang=zh-CN")]
    chinese = press(Request({"type": "http", "method": "POST", "path": "/", "headers": cookie, "query_string": b""}))
    said = text(actions.NOT_RUNNING, "zh-CN", name="small")
    assert said != text(actions.NOT_RUNNING, "en", name="small")
    message, _picker, _key, status, table, *_ = chinese
    assert message == message_html(said, "warn")
    assert table["headers"][:3] == [text(f"sweeps.col.{name}", "zh-CN") for name in ("rank", "trial", "state")]
    assert text("sweeps.progress.trials", "zh-CN", done=4, target=6) in status
    english = press(None)
    assert english[0] == message_html("The sweep small is not running.", "warn") and "4/6 trials" in english[3]
