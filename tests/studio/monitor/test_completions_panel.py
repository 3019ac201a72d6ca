"""The Monitor's "Sample completions" panel on real run directories: which samples and rows it shows, escaping,
when it is shown, its cache, and demo-mode visitors."""

from __future__ import annotations

import html
from pathlib import Path

import gradio as gr
import pytest

from engine.config import parse_config
from engine.runs import create_run
from engine.store.completions import append_completions
from engine.store.rundir import update_status
from studio.demo.caller import Caller
from studio.demo.ownership import owner_tag
from studio.monitor import completions as panel_module
from studio.monitor import tab as monitor_tab
from studio.monitor.completions import SAMPLES, CompletionsPanel, pick, reward_choices, table_rows
from tests.helpers.visitors import ALICE, BOB, DEMO

GRPO = {"method": "grpo", "grpo": {"rewards": [{"kind": "exact_match"}, {"kind": "length", "target_tokens": 4}]}}
SCRIPT = "<script>alert(1)</script>"
NAMES = ["exact_match", "length"]


def sample(step: int, completion: str, exact: float | None, length: float | None, total: float | None) -> dict:
    return {
        "step": step,
        "time": 1000.0 + step,
        "prompt": f"prompt {step}",
        "completion": completion,
        "rewards": {"exact_match": exact, "length": length},
        "reward": total,
        "advantage": 0.0,
    }


SAMPLES_WRITTEN = [  # oldest first, as the trainer appends them
    sample(1, "a", 1.0, 0.5, 1.5),
    sample(1, "b", 0.0, 0.25, 0.25),
    sample(2, "c", 0.0, None, 0.0),
    sample(2, SCRIPT, 1.0, 1.0, 2.0),
    sample(3, "e", None, 0.0, None),
]


def grpo_run(workspace: Path, owner: str | None = None) -> Path:
    run_dir = create_run(parse_config({"name": "grpo", **GRPO}), workspace=workspace)
    append_completions(run_dir, SAMPLES_WRITTEN)
    if owner is not None:
        update_status(run_dir, owner=owner_tag(owner))
    return run_dir


def completions_of(rows: list[list]) -> list[str]:
    return [row[2] for row in rows]


@pytest.fixture
def run_dir(tmp_path):
    return grpo_run(tmp_path)


@pytest.mark.parametrize(
    ("reward", "show", "expected"),
    [
        ("total", "newest", ["e", SCRIPT, "c", "b", "a"]),
        ("total", "best", [SCRIPT, "a", "b", "c", "e"]),  # unscored last
        ("total", "worst", ["c", "b", "a", SCRIPT, "e"]),
        ("total", "zero reward", ["e", "c"]),  # 0 or none, newest first
        ("exact_match", "best", [SCRIPT, "a", "c", "b", "e"]),  # ties newest first
        ("exact_match", "worst", ["c", "b", SCRIPT, "a", "e"]),
        ("exact_match", "zero reward", ["e", "c", "b"]),
        ("length", "best", [SCRIPT, "a", "b", "e", "c"]),
        ("length", "worst", ["e", "b", "a", SCRIPT, "c"]),
        ("length", "zero reward", ["e", "c"]),
    ],
)
def test_samples_picked_by_reward_and_order(run_dir, reward, show, expected):
    samples = SAMPLES.samples(run_dir)
    assert completions_of(table_rows(pick(samples, reward, show, 24), NAMES)) == expected


def test_rows_hold_step_texts_each_reward_and_total_and_count_limits_them(run_dir):
    rows = table_rows(pick(SAMPLES.samples(run_dir), "total", "newest", 2), NAMES)
    assert rows == [
        [3, "prompt 3", "e", None, 0.0, None],
        [2, "prompt 2", SCRIPT, 1.0, 1.0, 2.0],
    ]


def test_reward_choices_are_total_then_the_rewards_found(run_dir):
    assert reward_choices(SAMPLES.samples(run_dir)) == ["total", "exact_match", "length"]
    assert reward_choices([]) == ["total"]


def test_the_table_escapes_what_the_model_wrote(tmp_path, run_dir):
    panel, accordion, reward, table, timer = monitor_tab.completions_refresh(
        Caller(tmp_path), str(run_dir), None, "total", "newest", 24, opened=True
    )
    assert accordion.visible is True and timer.active is True
    assert reward.choices == [("total", "total"), ("exact_match", "exact_match"), ("length", "length")]
    assert SCRIPT not in table and html.escape(SCRIPT) in table
    assert [html.unescape(cell) for cell in _headers(table)] == ["step", "prompt", "completion", *NAMES, "total"]
    assert table.index(">e<") < table.index(html.escape(SCRIPT)) < table.index(">a<")  # newest first


def _headers(table: str) -> list[str]:
    head = table.split("<thead>")[1].split("</thead>")[0]
    return [part.split("</th>")[0] for part in head.split('">')[1:]]


def test_panel_hidden_for_an_sft_run_and_shown_for_a_grpo_run(tmp_path, run_dir):
    caller = Caller(tmp_path)
    sft_dir = create_run(parse_config({"name": "sft", "method": "sft"}), workspace=tmp_path)
    panel, accordion, reward, table, timer = monitor_tab.completions_refresh(
        caller, str(sft_dir), None, "total", "newest", 24
    )
    assert accordion.visible is False and reward == gr.skip() and table == gr.skip()
    # the section is open, then the current run becomes the GRPO one: it shows and fills
    panel, *_ = monitor_tab.completions_refresh(caller, str(sft_dir), panel, "total", "newest", 24, opened=True)
    _, accordion, reward, table, timer = monitor_tab.completions_refresh(
        caller, str(run_dir), panel, "total", "newest", 24
    )
    assert accordion.visible is True and timer.active is True and html.escape(SCRIPT) in table
    # and back to the SFT run: hidden, and its timer stops
    _, accordion, _, _, timer = monitor_tab.completions_refresh(caller, str(sft_dir), panel, "total", "newest", 24)
    assert accordion.visible is False and timer.active is False
    none = monitor_tab.completions_refresh(caller, None, CompletionsPanel(), "total", "newest", 24)
    assert none[1].visible is False


def test_samples_without_rewards_show_no_reward_picker_and_no_total(tmp_path):
    """A distill run's samples carry no rewards: the table lists step, prompt and answer only."""
    run_dir = create_run(
        parse_config({"name": "distill", "method": "distill", "distill": {"teacher": "org/teacher"}}),
        workspace=tmp_path,
    )
    append_completions(
        run_dir, [{"step": 1, "time": 1.0, "prompt": "date?", "completion": "May 6", "rewards": {}, "reward": None}]
    )
    caller = Caller(tmp_path)
    panel, *_ = monitor_tab.completions_refresh(caller, str(run_dir), None, "total", "newest", 24, opened=True)
    _, accordion, reward, table, _ = monitor_tab.completions_refresh(
        caller, str(run_dir), panel, "total", "newest", 24, force=True
    )
    assert accordion.visible is True and reward.visible is False
    assert "May 6" in table and "total" not in table and table.count("<th ") == 3
    _, _, reward, table, _ = monitor_tab.completions_refresh(
        caller, str(grpo_run(tmp_path)), panel, "total", "newest", 24
    )
    assert reward.visible is True and "total" in table  # a run with rewards keeps both


def test_a_closed_panel_reads_nothing(tmp_path, run_dir, monkeypatch):
    caller = Caller(tmp_path)
    reads = []
    monkeypatch.setattr(panel_module, "latest_completions", lambda *args: reads.append(args) or [])
    panel, accordion, reward, table, timer = monitor_tab.completions_refresh(
        caller, str(run_dir), None, "total", "newest", 24
    )
    assert accordion.visible is True and timer.active is False and table == gr.skip() and reads == []


def test_unchanged_files_are_not_read_again_and_nothing_is_sent(tmp_path, run_dir):
    caller = Caller(tmp_path)
    panel, *first = monitor_tab.completions_refresh(caller, str(run_dir), None, "total", "newest", 24, opened=True)
    reads = SAMPLES.reads
    second = monitor_tab.completions_refresh(caller, str(run_dir), panel, "total", "newest", 24)
    assert SAMPLES.reads == reads and all(value == gr.skip() for value in second[1:])
    # another page watching the same run shares the read
    other = monitor_tab.completions_refresh(caller, str(run_dir), None, "total", "newest", 24, opened=True)
    assert SAMPLES.reads == reads and html.escape(SCRIPT) in other[3]
    # a filter change rebuilds the table from the held samples
    best = monitor_tab.completions_refresh(caller, str(run_dir), panel, "length", "worst", 24)
    assert SAMPLES.reads == reads and best[3].index(">e<") < best[3].index(">b<")
    # the trainer appends: read once more, and the new sample leads
    append_completions(run_dir, [sample(4, "newer", 1.0, 1.0, 2.0)])
    newest = monitor_tab.completions_refresh(caller, str(run_dir), panel, "total", "newest", 24)
    assert SAMPLES.reads == reads + 1 and "newer" in newest[3]
    assert newest[3].index("newer") < newest[3].index(">e<")


def test_a_reward_the_run_lacks_falls_back_to_total_and_count_is_bounded(tmp_path, run_dir):
    panel = CompletionsPanel()
    update = panel.update(Caller(tmp_path), str(run_dir), "no_such_reward", "best", "not a number", opened=True)
    assert update.reward == "total" and update.choices == ["total", *NAMES]
    assert update.table.index(html.escape(SCRIPT)) < update.table.index(">a<")
    one = CompletionsPanel().update(Caller(tmp_path), str(run_dir), "total", "newest", 0, opened=True)
    assert one.table.count("<tr>") == 2  # the header and one sample


def test_demo_visitor_sees_only_their_own_runs_samples(tmp_path):
    alice_run = grpo_run(tmp_path, owner=ALICE)
    bob_run = grpo_run(tmp_path, owner=BOB)
    append_completions(bob_run, [sample(9, "bob's secret", 1.0, 1.0, 2.0)])
    workspace = tmp_path.resolve()

    def refresh(run_dir: Path, visitor: str | None) -> list:
        return monitor_tab.completions_refresh(
            Caller(workspace, DEMO, visitor), str(run_dir), None, "total", "newest", 24, opened=True
        )

    _, accordion, _, table, _ = refresh(alice_run, ALICE)
    assert accordion.visible is True and html.escape(SCRIPT) in table
    for visitor in (ALICE, None, "alice-aaaaaaaaaaaaaaaa"):  # another's run, no visitor, an unsigned id
        _, accordion, reward, table, timer = refresh(bob_run, visitor)
        assert accordion.visible is False and table == gr.skip() and timer.active is False
    _, accordion, _, table, _ = refresh(bob_run, BOB)
    assert accordion.visible is True and "bob&#x27;s secret" in table


def test_the_whole_app_builds_with_the_panel(tmp_path):
    from studio.app import build_app

    demo = build_app(tmp_path)
    ids = {block.elem_id for block in demo.blocks.values()}
    assert {"ts-completions", "ts-completions-reward", "ts-completions-show", "ts-completions-table"} <= ids
