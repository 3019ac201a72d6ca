"""The Evaluate and Export tabs' handlers as plain functions, against a real trained demo run and real jobs."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.error
import urllib.request
from html import unescape
from pathlib import Path
from typing import Any

import gradio as gr
import pytest

from engine.config import parse_config, save_config
from engine.evaluate import evaluations
from engine.runs.jobs import JobStatus
from engine.store.rundir import update_status
from studio.context import StudioContext
from studio.demo.caller import Caller
from studio.demo.ownership import owner_tag
from studio.demo.policy import NORMAL, DemoPolicy, visitor_exports
from studio.evaluate import benchmark_widgets as benchmark_section
from studio.evaluate import cards, tables
from studio.evaluate import tab as evaluate_tab
from studio.export import tab as export_tab
from studio.jobs.view import checkpoint_of, finished_runs, pick_run, progress_html, weight_choices
from studio.jobs.widgets import cancel_job, tab_opened
from tests.helpers.demo_run import RUN_ID, trained_demo_run
from tests.helpers.servers import free_port
from tests.helpers.visitors import ALICE, DEMO

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("studio-workspace")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory, workspace: Path) -> Path:
    return trained_demo_run(tmp_path_factory, workspace)


def poll_until_done(poll, *args: Any, timeout: float = 240) -> list[Any]:
    """Call a tab's timer handler until it lets go of its job (the job is over); returns the last outputs."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        outputs = poll(*args)
        if outputs[0] is None:
            return outputs
        time.sleep(0.3)
    raise AssertionError("the job did not finish")


def test_only_finished_runs_with_weights_are_offered(workspace, run_dir):
    busy = workspace / "runs" / "busy"
    busy.mkdir()
    save_config(parse_config({"name": "busy"}), busy / "config.yaml")
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "engine-standin"])
    try:
        update_status(busy, state="running", supervisor_pid=process.pid, created_at=time.time())
        assert finished_runs(workspace) == [(f"demo-dates · {RUN_ID}", RUN_ID)]
    finally:
        process.kill()
        process.wait()
    assert weight_choices(workspace, RUN_ID) == [("final result", ""), ("checkpoint 60", "60"), ("checkpoint 30", "30")]
    assert weight_choices(workspace, "../escape") == []
    assert (checkpoint_of(""), checkpoint_of("30")) == (None, 30)
    choices = finished_runs(workspace)
    assert pick_run(choices, None, str(run_dir)) == RUN_ID and pick_run([], RUN_ID, None) is None


def test_opening_the_tab_keeps_a_pick_made_while_its_answer_was_on_the_way(workspace, run_dir):
    caller = Caller(workspace)
    # The pick at opening is still offered: the answer leaves the value alone (a later pick is not undone).
    kept = tab_opened(caller, "export", None, RUN_ID, None)[0]
    assert kept["choices"] == finished_runs(workspace) and "value" not in kept
    # Nothing picked yet, or a pick since deleted: the run open in the Monitor, else the newest.
    assert tab_opened(caller, "export", str(run_dir), None, None)[0]["value"] == RUN_ID
    assert tab_opened(caller, "export", None, "deleted-since", None)[0]["value"] == RUN_ID


def test_evaluate_tab_refuses_then_evaluates_and_shows_predictions(workspace, run_dir):
    caller = Caller(workspace)
    assert "Pick a run first." in evaluate_tab.start_clicked(caller, None, "", "eval", "", 10)[2]
    assert "Give the path of a data file." in evaluate_tab.start_clicked(caller, RUN_ID, "", "file", " ", 10)[2]
    missing = evaluate_tab.start_clicked(caller, RUN_ID, "", "file", "no/such.jsonl", 10)
    assert missing[0] is None and "data file not found: no/such.jsonl" in missing[2]
    for outside in ("/etc/passwd", "../../outside.jsonl"):  # the page reaches only the workspace and allowed folders
        refused = evaluate_tab.start_clicked(caller, RUN_ID, "", "file", outside, 10)
        assert refused[0] is None and "data file:" in refused[2], refused[2]

    job, timer, progress, start, cancel = evaluate_tab.start_clicked(caller, RUN_ID, "", "eval", "", 12)
    assert job and timer.active and "ts-job-progress" in progress
    assert not start.interactive and cancel.interactive
    again = evaluate_tab.start_clicked(caller, RUN_ID, "", "eval", "", 12)
    assert "is already being evaluated" in again[2]

    outputs = poll_until_done(evaluate_tab.poll, caller, job, tables.FILTERS[0])
    _, timer, progress, start, cancel, metrics, table, result = outputs
    assert not timer.active and start.interactive and not cancel.interactive
    assert "Evaluation finished." in progress
    assert "Eval loss" in metrics and "Exact match" in metrics and "eval set · 12 rows" in metrics
    assert len(table.value["data"]) == 12 and table.label == "Predictions vs references (12 of 12 rows)"
    assert result["tuned"]["eval_loss"] < result["base"]["eval_loss"]

    wrong = sum(not row["tuned_correct"] for row in result["predictions"])
    _, filtered, _ = evaluate_tab.result_view(result, "Fine-tuned wrong")
    assert len(filtered.value["data"]) == wrong

    weights, data, metrics_again, _, latest, progress = evaluate_tab.run_changed(caller, RUN_ID)
    assert weights.value == "" and data.value == "eval" and latest["id"] == result["id"]
    assert metrics_again == metrics
    assert progress == ""  # how the last evaluation ended answered the run picked then, not the run picked now


def test_picking_a_run_clears_the_last_refusal_but_not_a_running_evaluation_s_progress(workspace, run_dir):
    caller = Caller(workspace, NORMAL)
    refused = evaluate_tab.start_clicked(caller, RUN_ID, "", "eval", "", 0)
    assert refused[0] is None and "Max rows" in refused[2]
    assert evaluate_tab.run_changed(caller, RUN_ID, None)[-1] == ""
    assert evaluate_tab.run_changed(caller, RUN_ID, str(workspace / "a-running-job"))[-1] == gr.skip()


def test_a_count_below_one_is_refused_in_the_page_s_language(workspace, run_dir):
    """Max rows (and the benchmark's documents per task) below 1: the handler refuses it, naming the box, in the
    caller's language (the box sets no minimum: Gradio's own check would say it in English, naming nothing)."""
    for lang, words in (("en", "Max rows: give 1 or more"), ("ko", "최대 행 수: 1 이상을")):
        caller = Caller(workspace, NORMAL, None, lang)
        for rows in (-5, 0):
            refused = evaluate_tab.start_clicked(caller, RUN_ID, "", "eval", "", rows)
            assert refused[0] is None and words in unescape(refused[2]), refused[2]
        refused = benchmark_section.benchmark_clicked(caller, RUN_ID, "", ["heldout"], "", -1)
        assert refused[0] is None and ("Documents per task" if lang == "en" else "작업당 문서 수") in refused[2]


def test_evaluate_tab_cancel(workspace, run_dir):
    caller = Caller(workspace)
    assert "No evaluation is running." in cancel_job(caller, None, "evaluation")
    job = evaluate_tab.start_clicked(caller, RUN_ID, "30", "train", "", 8)[0]
    assert "Cancelling" in cancel_job(caller, job, "evaluation")
    progress = poll_until_done(evaluate_tab.poll, caller, job, tables.FILTERS[0])[2]
    assert "Evaluation cancelled" in progress


def test_evaluate_view_marks_right_and_wrong():
    result = {
        "data": {"choice": "eval", "rows": 2},
        "weights": "adapter",
        "seconds": 3,
        "created_at": 0,
        "base": {"eval_loss": 2.0, "perplexity": 7.39, "exact_match": 0.0},
        "tuned": {"eval_loss": 0.5, "perplexity": 1.65, "exact_match": 0.5},
        "predictions": [
            {
                "prompt": "a<b",
                "reference": "x",
                "base": "y",
                "tuned": "x",
                "base_correct": False,
                "tuned_correct": True,
            },
            {"prompt": "c", "reference": "z", "base": "", "tuned": "q", "base_correct": False, "tuned_correct": False},
        ],
    }
    html = cards.metrics_html(result)
    assert 'class="ts-better">0.5000' in html and 'class="ts-better">50%' in html
    frame = tables.predictions_frame(result)
    assert frame.iloc[0].tolist() == [
        1,
        "a&lt;b",
        "x",
        '<span class="ts-wrong">✗</span> y',
        '<span class="ts-right">✓</span> x',
    ]
    assert "<i>(empty)</i>" in frame.iloc[1, 3]
    assert len(tables.predictions_frame(result, "Fixed by tuning")) == 1
    assert evaluations.summary_text(result) == "0% → 50%, loss 2 → 0.5"
    assert "No evaluation of this run yet" in cards.metrics_html(None)
    running = JobStatus("job", "job", state="running", phase="base: eval loss", done=2, total=5)
    assert "width:40%" in progress_html(running, "x")


def test_export_tab_refuses_then_exports_a_zip_to_download(workspace, run_dir):
    caller = Caller(workspace)
    dtype, name = export_tab.options_changed(caller, RUN_ID, "merged", "bfloat16")
    assert dtype.interactive and name.placeholder == f"{RUN_ID}-merged-bfloat16"
    args = (caller, RUN_ID, "", "adapter", "float32")
    outside = export_tab.start_clicked(*args, "../x", "", "", True)
    assert outside[0] is None and "outside the workspace's exports directory" in unescape(outside[2])
    assert "is not a hub repo id" in export_tab.start_clicked(*args, "ok", "not a repo!", "", True)[2]
    for bad in ("x" * 300, "nul\x00byte"):  # once a crash: "File name too long", "embedded null byte"
        refused = export_tab.start_clicked(*args, bad, "", "", True)
        assert refused[0] is None and "the export name is not usable" in unescape(refused[2])
    assert "Pick a run first." in export_tab.start_clicked(caller, None, "", "adapter", "float32", "", "", "", True)[2]

    job, timer, progress, start, cancel, result, download = export_tab.start_clicked(*args, "tab-export", "", "", True)
    assert job and timer.active and not start.interactive and cancel.interactive and not download.visible
    outputs = poll_until_done(export_tab.poll, caller, job)
    _, timer, progress, start, cancel, result, download = outputs
    assert "Export finished." in progress and not timer.active and start.interactive
    assert "tab-export" in result and "adapter_model.safetensors" in result
    assert download.visible and download.value["orig_name"] == "tab-export.zip"
    assert (workspace / "exports" / "tab-export.zip").is_file()
    taken = export_tab.start_clicked(*args, "tab-export", "", "", True)
    assert "already exists and is not empty" in taken[2]
    assert "No export is running." in cancel_job(caller, None, "export")


def test_demo_export_is_delivered_to_its_visitor_only(workspace, run_dir, monkeypatch):
    """In demo mode the download is a private copy of the zip, outside exports/ (Gradio then serves it from its
    cache only); outside demo mode it is the export's own zip, as before."""
    copies: list[Path] = []
    real_copy = export_tab.private_copy

    def recorded_copy(archive: Path, **options: Any) -> Path:
        copies.append(real_copy(archive, **options))
        return copies[-1]

    monkeypatch.setattr(export_tab, "private_copy", recorded_copy)
    update_status(run_dir, owner=owner_tag(ALICE))
    alice = Caller(workspace, DEMO, ALICE)
    job = export_tab.start_clicked(alice, RUN_ID, "", "adapter", "float32", "", "", "", True)[0]
    assert job
    download = poll_until_done(export_tab.poll, alice, job)[-1]
    archive = visitor_exports(workspace, DEMO, ALICE) / f"{RUN_ID}-adapter.zip"  # her own folder (studio.demo.jobs)
    assert download.visible and download.value["orig_name"] == archive.name
    [copy] = copies
    assert copy.name == archive.name and copy.read_bytes() == archive.read_bytes()
    assert (workspace / "exports").resolve() not in copy.resolve().parents
    # the same job outside demo mode: no copy
    assert export_tab.poll(Caller(workspace), job)[-1].visible and len(copies) == 1


def fetch_status(workspace: Path, policy: DemoPolicy, path: Path) -> int:
    """The HTTP status a browser gets for ``/gradio_api/file=PATH`` from a studio page with the Export tab."""
    with gr.Blocks() as page:
        export_tab.build_export_tab(StudioContext(workspace, policy=policy, visitor=gr.State(None)))
    port = free_port()
    page.launch(server_port=port, prevent_thread_lock=True, quiet=True)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/gradio_api/file={path}", timeout=30) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code
    finally:
        page.close()


@pytest.mark.parametrize(("policy", "expected"), [(NORMAL, 200), (DEMO, 403)])
def test_exports_are_served_by_url_only_outside_demo_mode(tmp_path, policy, expected):
    archive = tmp_path / "exports" / "20260101-000000-abcd-someone-adapter.zip"  # a name anyone could guess
    archive.parent.mkdir()
    archive.write_bytes(b"PK another visitor's adapter")
    assert fetch_status(tmp_path, policy, archive) == expected


def test_a_new_evaluation_empties_the_cards_and_another_runs_result_stays_away(workspace, run_dir):
    """Start empties the cards at once (an earlier evaluation's would read as this one's), and the result of an
    evaluation of run A is not drawn once the page shows run B."""
    caller = Caller(workspace)
    assert evaluate_tab.pending_view(caller, None) == [gr.skip()] * 3  # Start refused: nothing changes
    job = evaluate_tab.start_clicked(caller, RUN_ID, "", "eval", "", 6)[0]
    metrics, table, result = evaluate_tab.pending_view(caller, job)
    assert metrics == cards.PENDING_HTML and result is None and len(table.value["data"]) == 0
    elsewhere = poll_until_done(evaluate_tab.poll, caller, job, tables.FILTERS[0], "another-run")
    assert "Evaluation finished." in elsewhere[2]
    assert elsewhere[5:] == [gr.skip()] * 3  # the cards of the run on the page stay
    own = evaluate_tab.poll(caller, job, tables.FILTERS[0], RUN_ID)
    assert "Eval loss" in own[5] and own[7]["run_id"] == RUN_ID
