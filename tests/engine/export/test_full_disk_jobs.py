"""A full disk during a GGUF export and a benchmark: each job fails with "the disk is full", leaves nothing
half-written that reads as complete, and runs to the end once the space is back. The workspace lives on a small
tmpfs of its own (tests.helpers.small_disk), so every write meets a real ENOSPC."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from engine import api
from engine.export.exports import plan_export, start_export
from engine.runs import jobs
from engine.store.rundir import RESERVE_BYTES
from tests.helpers.demo_run import trained_demo_run
from tests.helpers.small_disk import fill_disk

pytestmark = pytest.mark.integration

FULL = "the disk is full: no space left on device (ENOSPC)"


@pytest.fixture
def run_dir(tmp_path_factory: pytest.TempPathFactory, small_disk: Path) -> Path:
    """The demo run, copied into a workspace on the small disk."""
    return trained_demo_run(tmp_path_factory, small_disk)


def test_a_gguf_export_on_a_full_disk_fails_clearly_and_leaves_no_partial_file(run_dir: Path, small_disk: Path):
    plan = plan_export(run_dir, kind="gguf", gguf_type="f16")  # about 7 MB: more than the disk has left
    filler = fill_disk(small_disk, leave=RESERVE_BYTES + 2 * 2**20)
    failed = jobs.wait(start_export(plan, make_zip=False), timeout=300)
    assert failed.state == "failed" and failed.error.startswith(FULL), (failed.error, failed.log_tail)
    assert failed.error.endswith("Free some space, then run it again")
    assert not plan.target.exists()
    assert not list(plan.target.parent.iterdir())  # the partial folder is gone too

    filler.unlink()
    done = jobs.wait(start_export(plan, make_zip=False), timeout=300)
    assert done.state == "completed", (done.error, done.log_tail)
    gguf = plan.target / done.result["gguf"]
    assert gguf.stat().st_size > 2 * 2**20


def test_a_benchmark_on_a_full_disk_fails_clearly_and_keeps_no_result(run_dir: Path, small_disk: Path):
    request = api.benchmarks.BenchmarkRequest(("heldout",), limit=4)
    fill_disk(small_disk, leave=0)
    with pytest.raises(jobs.JobError, match=f"^{re.escape(FULL)}; free some space, then start it again$"):
        api.benchmarks.start_benchmark(run_dir, request, small_disk)
    assert not (run_dir / "benchmarks").exists()
    assert not list(jobs.list_jobs(small_disk))  # no job folder left that reads as started


def test_a_benchmark_that_fills_the_disk_fails_clearly_and_keeps_no_result(run_dir: Path, small_disk: Path):
    request = api.benchmarks.BenchmarkRequest(("heldout",), limit=4)
    filler = fill_disk(small_disk, leave=RESERVE_BYTES + 16 * 1024)  # room to start, not to finish
    failed = jobs.wait(api.benchmarks.start_benchmark(run_dir, request, small_disk), timeout=600)
    assert failed.state == "failed" and failed.error.startswith(FULL), (failed.error, failed.log_tail)
    assert api.benchmarks.latest_benchmark(run_dir) is None

    filler.unlink()
    done = jobs.wait(api.benchmarks.start_benchmark(run_dir, request, small_disk), timeout=600)
    assert done.state == "completed", (done.error, done.log_tail)
    assert api.benchmarks.latest_benchmark(run_dir)["path"] == done.result["path"]
