"""Demo mode's background jobs through the tabs' own Start handlers, with real export and evaluation processes: a
visitor runs one job at a time and the demo at most ``max_jobs``, and a visitor keeps one export, in a folder of their
own that counts in their quota, so Export clicked again and again neither fills the disk nor the machine.

A job is held "running" by stopping its process (SIGSTOP), so the refusals are seen while it certainly runs."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import shutil
import signal
from collections.abc import Iterator
from html import unescape
from pathlib import Path
from typing import Any

import pytest

from engine.config import load_config
from engine.runs import jobs
from engine.store.processes import signal_group
from engine.store.rundir import CONFIG_FILE, update_status
from studio.demo.caller import Caller
from studio.demo.ownership import owner_tag
from studio.demo.policy import visitor_exports
from studio.demo.quota import tree_bytes, visitor_usage
from studio.evaluate import tab as evaluate_tab
from studio.export import tab as export_tab
from studio.train import actions, starting
from tests.helpers.demo_run import RUN_ID, trained_demo_run
from tests.helpers.live_processes import processes_fixture, running_stand_in  # noqa: F401 - the fixture
from tests.helpers.visitors import ALICE, BOB, DEMO

pytestmark = pytest.mark.integration

BOB_RUN = "bob-run"
ONE_JOB = dataclasses.replace(DEMO, max_jobs=1)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workspace with Alice's finished run (RUN_ID) and Bob's (a copy of it)."""
    workspace = tmp_path_factory.mktemp("demo-jobs")
    alice_run = trained_demo_run(tmp_path_factory, workspace)
    shutil.copytree(alice_run, alice_run.with_name(BOB_RUN))
    update_status(alice_run, owner=owner_tag(ALICE))
    update_status(alice_run.with_name(BOB_RUN), owner=owner_tag(BOB))
    return workspace


def export(caller: Caller, run_id: str, kind: str = "adapter") -> list[Any]:
    """Press Export on the Export tab (the demo hides the name, repo and token boxes)."""
    return export_tab.start_clicked(caller, run_id, "", kind, "float32", "", "", "", True)


def evaluate(caller: Caller, run_id: str) -> list[Any]:
    """Press Start on the Evaluate tab: the run's eval set, 4 rows."""
    return evaluate_tab.start_clicked(caller, run_id, "", "eval", "", 4)


def started(outputs: list[Any]) -> str:
    """The job a Start handler started (its first output); fails with the refusal it showed instead."""
    assert outputs[0], unescape(outputs[2])
    return outputs[0]


def finished(job_dir: str) -> jobs.JobStatus:
    status = jobs.wait(Path(job_dir), timeout=240)
    assert status.state == "completed", (status.state, status.error, status.log_tail)
    return status


@contextlib.contextmanager
def held(job_dir: str) -> Iterator[None]:
    """The job's process stopped (still alive, so still running) until the block ends."""
    pid = json.loads((Path(job_dir) / jobs.JOB_FILE).read_text())["pid"]
    signal_group(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        signal_group(pid, signal.SIGCONT)


def test_a_visitor_runs_one_job_at_a_time_and_the_demo_only_so_many(workspace: Path) -> None:
    alice, bob = Caller(workspace, ONE_JOB, ALICE), Caller(workspace, ONE_JOB, BOB)
    job = started(export(alice, RUN_ID))
    with held(job):
        refused = evaluate(alice, RUN_ID)
        assert refused[0] is None and f"your export of {RUN_ID} is still running" in unescape(refused[2])
        again = export(alice, RUN_ID)  # nor a second export, which would also replace the one being written
        assert again[0] is None and "still running" in unescape(again[2])
        busy = evaluate(bob, BOB_RUN)
        assert busy[0] is None and "running 1 evaluations and exports of other visitors" in unescape(busy[2])
        # With room for two jobs, Bob's starts beside Alice's.
        beside = started(evaluate(Caller(workspace, DEMO, BOB), BOB_RUN))
    finished(job)
    finished(beside)
    limits = {json.loads((Path(done) / jobs.JOB_FILE).read_text())["time_limit_s"] for done in (job, beside)}
    assert limits == {DEMO.max_job_minutes * 60}  # each stops at the demo's limit (engine.runs.jobs)
    # Neither is running now: Alice may start another.
    assert finished(started(evaluate(alice, RUN_ID))).result
    # Outside demo mode nothing of this applies: two jobs of the same run at once.
    own_studio = Caller(workspace)
    first = started(export_tab.start_clicked(own_studio, RUN_ID, "", "adapter", "float32", "mine", "", "", True))
    with held(first):
        second = started(evaluate(own_studio, RUN_ID))
    finished(first)
    finished(second)
    assert json.loads((Path(first) / jobs.JOB_FILE).read_text())["time_limit_s"] is None  # and no time limit


def test_a_visitor_keeps_one_export_in_their_quota(workspace: Path) -> None:
    alice = Caller(workspace, DEMO, ALICE)
    folder = visitor_exports(workspace, DEMO, ALICE)
    assert folder is not None
    shutil.rmtree(folder, ignore_errors=True)
    before = visitor_usage(workspace, DEMO, ALICE)

    def export_bytes() -> int:
        """What the quota counts beyond Alice's runs (she uploaded nothing): her export."""
        return visitor_usage(workspace, DEMO, ALICE) - sum(tree_bytes(run) for run in alice.run_dirs())

    first = finished(started(export(alice, RUN_ID)))
    adapter = Path(first.result["path"])
    assert adapter.parent == folder and (folder / f"{adapter.name}.zip").is_file()
    assert export_bytes() == tree_bytes(folder) > 0
    shown = unescape(export_tab.poll(alice, first.job_dir)[5])
    assert f"workspace/exports/{adapter.name}" in shown and owner_tag(ALICE) not in shown

    second = finished(started(export(alice, RUN_ID, "merged")))
    merged = Path(second.result["path"])
    assert sorted(path.name for path in folder.iterdir()) == [merged.name, f"{merged.name}.zip"]
    assert export_bytes() == tree_bytes(folder)
    # Bob's exports are his own: Alice's folder is untouched by them.
    finished(started(export(Caller(workspace, DEMO, BOB), BOB_RUN)))
    assert sorted(path.name for path in folder.iterdir()) == [merged.name, f"{merged.name}.zip"]

    full = dataclasses.replace(DEMO, visitor_quota_mb=before / 1024 / 1024)  # runs and uploads fill it already
    refused = export(Caller(workspace, full, ALICE), RUN_ID)
    assert refused[0] is None and "the most a visitor may keep here" in unescape(refused[2])
    assert jobs.active_job(workspace) is None  # the refusal started no job


def test_a_visitor_distills_from_their_own_run_and_from_no_one_elses(
    tmp_path_factory: pytest.TempPathFactory, processes: list[Any]
) -> None:
    """The teacher picker lists the visitor's own finished runs beside the bundled models; Start takes one by its
    id, checks it as a teacher and writes its directory into the run, while another visitor naming it is refused."""
    workspace = tmp_path_factory.mktemp("demo-teacher")
    alice_run = trained_demo_run(tmp_path_factory, workspace)
    shutil.copytree(alice_run, alice_run.with_name(BOB_RUN))
    update_status(alice_run, owner=owner_tag(ALICE))
    update_status(alice_run.with_name(BOB_RUN), owner=owner_tag(BOB))
    alice, bob = Caller(workspace, DEMO, ALICE), Caller(workspace, DEMO, BOB)
    offered = [value for _, value in actions.model_or_run_choices(alice)]
    assert offered == ["", "assets/demo-model", "assets/demo-vlm", RUN_ID]
    assert [value for _, value in actions.model_or_run_choices(bob)][-1] == BOB_RUN

    def start(caller: Caller) -> starting.StartResult:
        values = actions.starting_values()
        values.update({"name": "student", "method": "distill", "distill.teacher": RUN_ID, "train.max_steps": 5})
        return starting.start_run(caller, values, running_stand_in(processes))

    refused = start(bob)
    assert refused.run_dir is None and "own finished runs" in refused.errors["distill.teacher"], refused
    started_run = start(alice)
    assert started_run.run_dir is not None, (started_run.message, started_run.errors)
    teacher = load_config(started_run.run_dir / CONFIG_FILE).distill.teacher
    assert Path(teacher) == alice_run.resolve()  # the run's directory, found from anywhere
