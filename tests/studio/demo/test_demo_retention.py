"""Demo mode's retention on a real workspace: a visitor whose runs, uploads and export all stood untouched for
keep_days loses them together (with their runs' jobs); a visitor who touched anything since, or whose run is still
in line, keeps everything; a run no visitor owns stays; a demo studio sweeps when it starts, and says how long runs
stay."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from engine.runs import jobs
from engine.store.rundir import update_status
from studio.app import build_app, header_html
from studio.demo.ownership import owner_tag
from studio.demo.policy import NORMAL, DemoPolicy, visitor_exports, visitor_uploads
from studio.demo.retention import DAY_SECONDS, sweep
from tests.engine.runs.fault_checks import wait_until
from tests.helpers.visitors import ALICE, BOB, CAROL, DEMO, new_visitor

DAVE = new_visitor()


def visitor_run(workspace: Path, name: str, visitor: str | None, state: str = "completed") -> Path:
    """A run directory of ``visitor`` (None: the host's own) in ``state``."""
    run_dir = workspace / "runs" / name
    run_dir.mkdir(parents=True)
    (run_dir / "config.yaml").write_text(f"name: {name}\n")
    update_status(run_dir, state=state, owner=owner_tag(visitor) if visitor else None)
    return run_dir


def upload(workspace: Path, visitor: str) -> Path:
    """A dataset the visitor uploaded."""
    folder = visitor_uploads(workspace, DEMO, visitor)
    folder.mkdir(parents=True)
    (folder / "mine.jsonl").write_text('{"text": "hello"}\n')
    return folder / "mine.jsonl"


def export(workspace: Path, visitor: str) -> Path:
    """The export the visitor keeps."""
    folder = visitor_exports(workspace, DEMO, visitor) / "run-adapter"
    folder.mkdir(parents=True)
    (folder / "adapter_model.safetensors").write_bytes(b"weights")
    return folder.parent


def finished_job(workspace: Path, run_dir: Path) -> Path:
    """An ended evaluation of ``run_dir``, as engine.runs.jobs records one."""
    job_dir = workspace / "jobs" / f"20260101-000000-{run_dir.name}-evaluate"
    job_dir.mkdir(parents=True)
    (job_dir / jobs.JOB_FILE).write_text(json.dumps({"kind": "evaluate", "labels": {"run_id": run_dir.name}}))
    (job_dir / jobs.PROGRESS_FILE).write_text(json.dumps({"state": "completed"}))
    return job_dir


def age(path: Path, days: float) -> None:
    """Make every file and folder under ``path`` last modified ``days`` ago."""
    when = time.time() - days * DAY_SECONDS
    for root, dirs, files in os.walk(path):
        for name in [*dirs, *files]:
            os.utime(os.path.join(root, name), (when, when))
    os.utime(path, (when, when))


def test_a_visitor_untouched_for_keep_days_loses_all_their_data_and_no_one_else_any(tmp_path: Path) -> None:
    alice_run = visitor_run(tmp_path, "alice-run", ALICE)
    alice_upload = upload(tmp_path, ALICE).parent.parent
    alice = [alice_run, alice_upload, export(tmp_path, ALICE), finished_job(tmp_path, alice_run)]
    bob_run = visitor_run(tmp_path, "bob-run", BOB)
    bob_upload = upload(tmp_path, BOB)
    carol_run = visitor_run(tmp_path, "carol-run", CAROL, state="queued")
    dave_upload = upload(tmp_path, DAVE)
    host_run = visitor_run(tmp_path, "host-run", None)
    for path in [*alice, bob_upload.parent.parent, carol_run, dave_upload.parent.parent, host_run]:
        age(path, 8)
    age(bob_run, 1)  # Bob trained yesterday: his week-old upload stays with his run

    assert sweep(tmp_path, NORMAL) == []  # never outside demo mode
    assert sorted(sweep(tmp_path, DEMO)) == sorted([owner_tag(ALICE), owner_tag(DAVE)])
    assert not any(path.exists() for path in [*alice, dave_upload])
    assert all(path.exists() for path in (bob_run, bob_upload, carol_run, host_run))
    # A week and a half for everyone: Carol's run is still in line, so she keeps it.
    assert sweep(tmp_path, DemoPolicy(enabled=True, key=DEMO.key, keep_days=0.5)) == [owner_tag(BOB)]
    assert carol_run.exists() and host_run.exists() and not bob_run.exists()


def test_a_demo_studio_sweeps_when_it_starts(tmp_path: Path) -> None:
    kept = visitor_run(tmp_path / "studio", "once-a-demo-run", ALICE)  # a workspace that served a demo once
    age(kept, 30)
    left = visitor_run(tmp_path / "demo", "alice-run", ALICE)
    age(left, 8)
    build_app(tmp_path / "studio")  # one's own studio: no retention (its sweep would have come first)
    build_app(tmp_path / "demo", DemoPolicy(enabled=True))
    wait_until(lambda: not left.exists(), 60, "the demo studio's first sweep")
    assert kept.exists()


def test_the_demo_says_how_long_runs_stay() -> None:
    policy = DemoPolicy(enabled=True, keep_days=3)
    assert "your runs stay 3 days after your last change" in header_html(Path("/srv/workspace"), policy)
    assert "3 天" in header_html(Path("/srv/workspace"), policy, "zh-CN")
    assert "days" not in header_html(Path("/srv/workspace"))  # one's own studio keeps everything
