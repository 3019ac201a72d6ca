"""Demo mode shows no server path: what the page shows names files as the visitor chose them (``mine.jsonl``,
``assets/datasets/...``, ``workspace/runs/...``), through studio.demo.shown; outside demo mode nothing changes."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from engine import runs
from engine.chat.client import ChatError
from engine.runs.jobs import JOB_FILE, LOG_FILE, PROGRESS_FILE
from engine.store.paths import PROJECT_ROOT
from engine.store.rundir import LOG_FILE as RUN_LOG
from engine.store.rundir import update_status
from studio.chat import actions as chat_actions
from studio.demo.caller import Caller
from studio.demo.ownership import owner_tag
from studio.demo.policy import DATA_REFUSAL, NORMAL, visitor_uploads
from studio.demo.shown import server_roots, shown_value, visible_paths
from studio.evaluate import tab as evaluate_tab
from studio.export import tab as export_tab
from studio.markup import Html, bold
from studio.monitor import tab as monitor_tab
from studio.monitor.routes import ChartQuery, charts_response
from studio.monitor.session import MonitorSession
from studio.runs.tab import compare_outputs, delete_runs, open_run
from studio.train import actions, starting
from tests.helpers.visitors import ALICE, BOB, DEMO

OWNER = "0123456789abcdef" * 2
UPLOADS = f"/data/workspace/visitors/{OWNER}/datasets"
ROOTS = server_roots(
    "/data/workspace",
    project="/srv/app",
    gradio="/tmp/gradio",
    temp="/tmp",
    home="/home/user",
    python=["/usr/lib/python3.11/site-packages"],
    cwd="/srv/app",
)
BAD_JSONL = '{"text": "fine"}\n{"text": "cut short\n'


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (
            f"{UPLOADS}/mine.jsonl line 2 is not valid JSON: Unterminated string at column 10",
            "mine.jsonl line 2 is not valid JSON: Unterminated string at column 10",
        ),
        (
            "Could not create the run: [Errno 28] No space left on device: '/data/workspace/runs/0101-ab-x'",
            "Could not create the run: [Errno 28] No space left on device: 'workspace/runs/0101-ab-x'",
        ),
        ("python -m engine train config.yaml --run-dir /data/workspace/runs/my-run", "--run-dir workspace/runs/my-run"),
        ("/tmp/gradio/5f0c3e9a1b/mine.jsonl and /tmp/gradio/mine.jsonl", "mine.jsonl and mine.jsonl"),
        ("Saved /tmp/ts-export-k2j4/0101-ab-x-adapter.zip", "Saved 0101-ab-x-adapter.zip"),
        (
            f"Saved to /data/workspace/exports/visitors/{OWNER}/0101-ab-x-adapter: adapter_model.safetensors",
            "Saved to workspace/exports/0101-ab-x-adapter: adapter_model.safetensors",
        ),
        ("/srv/app/assets/datasets/demo_sft_train.jsonl", "assets/datasets/demo_sft_train.jsonl"),
        ("data file not found: x.jsonl (looked in /srv/app and /data/workspace)", "(looked in . and workspace)"),
        (
            f"upload: /tmp/gradio/ab/x.jsonl is outside the folders (allowed: {UPLOADS}, /srv/app/assets, /tmp/gradio)",
            "upload: x.jsonl is outside the folders (allowed: your uploads, assets, the upload cache)",
        ),
        ('File "/usr/lib/python3.11/site-packages/torch/nn.py", line 3', 'File "site-packages/torch/nn.py", line 3'),
        ("no weights in /home/user/.cache/huggingface/hub", "no weights in ~/.cache/huggingface/hub"),
        ("&#x27;/data/workspace/runs/x/train.log&#x27;", "&#x27;workspace/runs/x/train.log&#x27;"),
        ("It lives in /data/workspace. See `/data/workspace`", "It lives in workspace. See `workspace`"),
    ],
)
def test_server_paths_read_as_the_visitors_names(text: str, shown: str) -> None:
    assert shown in visible_paths(text, ROOTS)


@pytest.mark.parametrize(
    "text",
    [
        "/data/workspace-old/train.jsonl",  # only starts with the workspace's characters: another folder
        "/data/workspace2/train.jsonl and /data/workspace.bak",
        "/srv/application/app.py and /home/username/notes.txt",
        "relative/data/workspace/x and assets/datasets/demo_sft_train.jsonl",
        "loss 0.25 at step 10/600",
        "",
    ],
)
def test_other_paths_and_plain_text_stay_as_they_are(text: str) -> None:
    assert visible_paths(text, ROOTS) == text


def test_shown_value_maps_nested_text_and_keeps_markup() -> None:
    value = [bold("/data/workspace/runs/x"), ("/srv/app/assets",), {"value": "/tmp/gradio/ab/f.csv", "n": 3}, None]
    shown = shown_value(value, ROOTS)
    assert shown == [Html("<b>workspace/runs/x</b>"), ("assets",), {"value": "f.csv", "n": 3}, None]
    assert isinstance(shown[0], Html)  # markup.message_html puts it in unescaped, as before


def test_roots_of_this_machine_cover_a_workspace_behind_a_symlink(tmp_path: Path) -> None:
    real = tmp_path / "real-workspace"
    real.mkdir()
    link = tmp_path / "workspace-link"
    link.symlink_to(real)
    text = f"{link}/runs/a and {real}/runs/b and {PROJECT_ROOT}/assets/presets/demo.yaml"
    assert (
        visible_paths(text, server_roots(link)) == "workspace/runs/a and workspace/runs/b and assets/presets/demo.yaml"
    )


def test_only_demo_mode_hides_paths(tmp_path: Path) -> None:
    text = f"{tmp_path}/runs/x failed"
    assert NORMAL.shown(text, tmp_path) == text  # one's own studio: full paths
    assert DEMO.shown(text, tmp_path) == "workspace/runs/x failed"


# --- the handlers ---------------------------------------------------------------------------------------------


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A workspace, with Gradio's upload folder beside it as the page's uploads go there."""
    monkeypatch.setenv("GRADIO_TEMP_DIR", str(tmp_path / "gradio"))
    folder = tmp_path / "srv" / "workspace"
    folder.mkdir(parents=True)
    return folder


def gradio_upload(workspace: Path, name: str, text: str) -> Path:
    """A file as Gradio stores an upload: in a folder of its own under its temp dir."""
    path = workspace.parent.parent / "gradio" / "3f9a0c21d4" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def uploaded_values(workspace: Path, text: str = BAD_JSONL) -> tuple[dict[str, Any], Path]:
    """The demo form after Alice uploaded ``mine.jsonl`` on the Train tab, and the path of her copy."""
    shown, error = actions.upload_dataset(Caller(workspace, DEMO, ALICE), gradio_upload(workspace, "mine.jsonl", text))
    assert (shown, error) == ("mine.jsonl", "")  # what the dataset field shows: the name, not the server's folder
    values = actions.starting_values()
    values.update({"data.path": shown, "data.eval_path": None, "train.eval_strategy": "no"})
    values.update({"train.max_steps": 5, "name": "mine"})
    return values, visitor_uploads(workspace, DEMO, ALICE) / "mine.jsonl"


def assert_no_server_path(text: str, workspace: Path) -> None:
    for path in (workspace, workspace.resolve(), PROJECT_ROOT, workspace.parent.parent / "gradio"):
        assert str(path) not in text, text
    assert "visitors/" not in text, text


def test_a_malformed_upload_is_named_by_its_file_name(workspace: Path) -> None:
    values, copied = uploaded_values(workspace)
    assert copied.read_text() == BAD_JSONL
    check = actions.check_data(Caller(workspace, DEMO, ALICE), values, with_tokens=False)
    assert "mine.jsonl line 2 is not valid JSON" in check.error
    assert_no_server_path(check.error, workspace)
    started = starting.start_run(Caller(workspace, DEMO, ALICE), values, lambda _: 0)
    assert started.run_dir is None and "mine.jsonl line 2 is not valid JSON" in started.data_error
    assert_no_server_path(started.data_error, workspace)
    # One's own studio names the file by its full path, as before.
    own = actions.check_data(Caller(workspace, NORMAL), {**values, "data.path": str(copied)}, with_tokens=False)
    assert f"{copied} line 2 is not valid JSON" in own.error


def test_a_good_upload_summary_and_an_upload_refusal_name_no_server_folder(workspace: Path) -> None:
    values, _ = uploaded_values(workspace, '{"text": "one"}\n{"text": "two"}\n')
    values["data.eval_path"] = "assets/datasets/demo_sft_eval.jsonl"
    check = actions.check_data(Caller(workspace, DEMO, ALICE), values, with_tokens=False)
    assert check.error == "" and "**Eval file** `assets/datasets/demo_sft_eval.jsonl`" in check.summary
    assert_no_server_path(check.summary, workspace)
    # Start trains on the file the name stands for.
    started = starting.start_run(Caller(workspace, DEMO, ALICE), values, lambda _: 0)
    assert started.run_dir is not None and "`mine`" in started.message
    saved = (started.run_dir / "config.yaml").read_text()
    assert f"path: {visitor_uploads(workspace, DEMO, ALICE) / 'mine.jsonl'}" in saved
    elsewhere = workspace.parent / "elsewhere" / "x.jsonl"  # not an upload of Gradio's: refused, named shortly
    elsewhere.parent.mkdir()
    elsewhere.write_text('{"text": "x"}\n')
    copied, error = actions.upload_dataset(Caller(workspace, DEMO, ALICE), elsewhere)
    assert copied is None and "is outside the folders the studio may read" in error
    assert "your uploads, assets, the upload cache" in error
    assert_no_server_path(error, workspace)


def test_yaml_and_command_preview_name_the_upload_and_load_back(workspace: Path) -> None:
    values, copied = uploaded_values(workspace)
    preview = actions.preview(Caller(workspace, DEMO, ALICE), values)
    assert preview.errors == {} and "  path: mine.jsonl\n" in preview.yaml
    assert preview.command == "python -m engine train config.yaml --run-dir workspace/runs/mine"
    assert_no_server_path(preview.yaml + preview.command, workspace)
    assert preview.config is not None and preview.config.data.path == str(copied)  # Start trains on the real file
    assert str(copied) in actions.preview(Caller(workspace, NORMAL), {**values, "data.path": str(copied)}).yaml
    # The YAML copied from the page and uploaded as a config names the same upload again.
    config_file = gradio_upload(workspace, "mine.yaml", preview.yaml)
    loaded, message = actions.load_config_values(Caller(workspace, DEMO, ALICE), config_file)
    assert message == "✓ Loaded `mine.yaml`" and loaded is not None and loaded["data.path"] == "mine.jsonl"
    # ... and so does one that names it by its server path (it is the visitor's own file): the field shows its name.
    config_file.write_text(preview.yaml.replace("path: mine.jsonl", f"path: {copied}"))
    loaded, message = actions.load_config_values(Caller(workspace, DEMO, ALICE), config_file)
    assert message == "✓ Loaded `mine.yaml`" and loaded is not None and loaded["data.path"] == "mine.jsonl"
    # Another visitor's page has no such upload: the name is refused, as any path outside their own folder.
    assert actions.preview(Caller(workspace, DEMO, BOB), values).errors == {"data.path": DATA_REFUSAL}


def test_a_config_that_cannot_load_names_no_server_folder(workspace: Path) -> None:
    saved = workspace / "configs" / "mine.yaml"
    saved.parent.mkdir()
    saved.write_text("name: x\n")
    values, message = actions.load_config_values(Caller(workspace, DEMO), saved)
    assert values is None and "workspace/configs/mine.yaml is outside the folders" in message
    assert "(allowed: assets/presets, the upload cache)" in message
    assert_no_server_path(message, workspace)


def failed_run(workspace: Path) -> Path:
    """Alice's run that failed on her upload, with a log that names the workspace and the project."""
    values, copied = uploaded_values(workspace)
    config = actions.checked_config(Caller(workspace, DEMO, ALICE), values)
    run_dir = runs.create_run(config, workspace=workspace)
    error = f"{copied} line 2 is not valid JSON: Unterminated string"
    log = [
        "Traceback (most recent call last):",
        f'  File "{PROJECT_ROOT}/engine/data/loading.py", line 169, in _read_jsonl',
        f"engine.data.errors.DataError: {error}",
        f"checkpoints were to go to {run_dir}/checkpoints",
    ]
    (run_dir / RUN_LOG).write_text("\n".join(log) + "\n", encoding="utf-8")
    update_status(run_dir, state="failed", owner=owner_tag(ALICE), error=error, exit_code=1, ended_at=time.time())
    return run_dir


def test_the_monitor_shows_a_failed_run_without_server_paths(workspace: Path) -> None:
    run_dir = failed_run(workspace)
    update = MonitorSession().update(str(run_dir)).shown(Caller(workspace, DEMO))
    assert "Run failed (exit code 1): mine.jsonl line 2 is not valid JSON" in update.error
    assert "File &quot;engine/data/loading.py&quot;, line 169" in update.error
    assert f"workspace/runs/{run_dir.name}/checkpoints" in update.error
    assert "  path: mine.jsonl\n" in update.config
    assert_no_server_path(update.error + update.config, workspace)
    page = monitor_tab.refresh(Caller(workspace, DEMO), str(run_dir), None)
    assert page[2].value == update.error and page[3].value == update.config.rstrip()  # what the tab sends
    assert str(run_dir) in MonitorSession().update(str(run_dir)).shown(Caller(workspace, NORMAL)).error  # not a demo
    # The log the page script shows under the charts.
    answer = orjson.loads(charts_response(run_dir, ChartQuery(log=True), DEMO, workspace).body)
    assert "mine.jsonl line 2 is not valid JSON" in answer["log"]
    assert_no_server_path(answer["log"] + json.dumps(answer["panels"]), workspace)


def test_runs_tab_compares_and_refuses_without_server_paths(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run_dir = failed_run(workspace)
    other = runs.create_run(
        actions.checked_config(Caller(workspace, DEMO), actions.starting_values()), workspace=workspace
    )
    update_status(other, state="completed", owner=owner_tag(ALICE))
    table = compare_outputs(Caller(workspace, DEMO, ALICE), [run_dir.name, other.name], 0.6)[1]
    row = table[table["field"] == "data.path"].values.tolist()[0]
    assert row[1:] == ["mine.jsonl", "assets/datasets/demo_sft_train.jsonl"]
    message = delete_runs(Caller(workspace, DEMO, ALICE), ["no-such-run"])[1]
    assert "no run &#x27;no-such-run&#x27; in workspace/runs" in message
    assert_no_server_path(message, workspace)
    warnings: list[str] = []
    monkeypatch.setattr("studio.runs.tab.gr.Warning", warnings.append)
    open_run(Caller(workspace, DEMO, ALICE), "no-such-run")
    assert warnings == ["no run 'no-such-run' in workspace/runs"]


class FailingChat:
    """A chat client whose load fails the way the worker reports it: with the path of the weights."""

    def may_use(self, caller: str | None) -> bool:
        return True

    def load(self, spec: Any, owner: str | None = None, caller: str | None = None) -> Any:
        raise ChatError(f"could not load the weights: {PROJECT_ROOT}/assets/demo-model/model.safetensors is cut short")


def test_chat_load_error_names_no_server_path(workspace: Path) -> None:
    client: Any = FailingChat()
    shown = list(chat_actions.load_clicked(client, Caller(workspace, DEMO, ALICE), "base:assets/demo-model"))
    assert len(shown) == 1 and "assets/demo-model/model.safetensors is cut short" in shown[0]
    assert_no_server_path(shown[0], workspace)


def job(workspace: Path, name: str, progress: dict[str, Any], log: str = "") -> str:
    """A finished background job as engine.runs.jobs records it."""
    job_dir = workspace / "jobs" / name
    job_dir.mkdir(parents=True)
    (job_dir / JOB_FILE).write_text("{}")
    (job_dir / PROGRESS_FILE).write_text(json.dumps(progress))
    (job_dir / LOG_FILE).write_text(log)
    return str(job_dir)


def test_evaluate_and_export_results_name_no_server_path(workspace: Path) -> None:
    exports = workspace.resolve() / "exports" / "0101-ab-x-adapter"
    result = {"path": str(exports), "files": ["adapter_model.safetensors"], "zip": f"{exports}.zip"}
    done = job(workspace, "export-done", {"state": "completed", "result": result})
    demo = Caller(workspace, DEMO)
    outputs = export_tab.poll(demo, done)
    assert "Saved to <code>workspace/exports/0101-ab-x-adapter</code>" in outputs[5]
    assert str(exports) in export_tab.poll(Caller(workspace, NORMAL), done)[5]
    failed = {"state": "failed", "error": f"cannot read {workspace}/runs/x/adapter: truncated"}
    export_failed = export_tab.poll(demo, job(workspace, "export-failed", failed))[2]
    evaluate_failed = evaluate_tab.poll(demo, job(workspace, "eval-failed", failed), "All rows")[2]
    for message in (export_failed, evaluate_failed):
        assert "failed: cannot read workspace/runs/x/adapter: truncated" in message
        assert_no_server_path(message + outputs[5], workspace)


def test_a_parquet_upload_counts_what_it_holds_once_read(workspace: Path) -> None:
    """523 bytes of Parquet held 1.5 GB of rows (one dictionary-encoded 1 MiB string in 1,500 rows): the demo's
    upload limit and quota count what a file holds once read, so it is refused before anything reads its rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    bomb = gradio_upload(workspace, "bomb.parquet", "")
    column = pa.DictionaryArray.from_arrays(pa.array([0] * 1500, pa.int32()), pa.array(["x" * 2**20]))
    pq.write_table(pa.table({"text": column}), bomb, compression="zstd")
    shown, error = actions.upload_dataset(Caller(workspace, DEMO, ALICE), bomb)
    limit = f"{DEMO.upload_limit_mb:.1f} MB"
    assert shown is None and "the file holds at least" in error and f"this demo takes files of at most {limit}" in error
    assert "0.0 MB on disk" in error and visitor_uploads(workspace, DEMO, ALICE) is not None
    assert not (visitor_uploads(workspace, DEMO, ALICE) / "bomb.parquet").exists()
    small = gradio_upload(workspace, "rows.parquet", "")
    pq.write_table(pa.Table.from_pylist([{"text": "a short row"}] * 8), small)
    assert actions.upload_dataset(Caller(workspace, DEMO, ALICE), small) == ("rows.parquet", "")
