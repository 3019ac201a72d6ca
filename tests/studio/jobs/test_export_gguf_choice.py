"""The Export tab offers GGUF: picking the kind turns the type picker into GGUF's tensor types (q8_0 first chosen)
under its own label, the default name says the type, and Export writes the file and its Modelfile through the
engine's job. The run is the real demo run."""

from __future__ import annotations

from pathlib import Path

import gguf
import pytest

from engine.export import exports
from engine.runs import jobs
from studio.demo.caller import Caller
from studio.export import tab as export_tab
from studio.i18n.catalog import text
from tests.helpers.demo_run import trained_demo_run


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("gguf-choice")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory, workspace: Path) -> Path:
    return trained_demo_run(tmp_path_factory, workspace)


def test_the_type_picker_follows_the_kind(run_dir: Path, workspace: Path) -> None:
    caller = Caller(workspace, language="zh-CN")
    picker, name = export_tab.options_changed(caller, run_dir.name, "gguf", "float32")
    assert [value for _, value in picker.choices] == list(exports.GGUF_TYPES)
    assert picker.value == exports.DEFAULT_GGUF_TYPE and picker.interactive is True
    assert picker.label == text("export.gguf_type", "zh-CN")
    assert name.placeholder == f"{run_dir.name}-gguf-{exports.DEFAULT_GGUF_TYPE}"
    picker, name = export_tab.options_changed(caller, run_dir.name, "merged", "q4_0")
    assert picker.value == "float32" and picker.label == text("export.dtype", "zh-CN")
    assert name.placeholder == f"{run_dir.name}-merged-float32"
    picker, _ = export_tab.options_changed(caller, run_dir.name, "adapter", "float32")
    assert picker.interactive is False


def test_exporting_gguf_from_the_tab_writes_the_file_and_modelfile(run_dir: Path, workspace: Path) -> None:
    caller = Caller(workspace)
    started = export_tab.start_clicked(caller, run_dir.name, None, "gguf", "q4_0", "", "", "", False)
    job_dir = Path(started[0])
    status = jobs.wait(job_dir, timeout=600)
    assert status.state == "completed", status
    found = sorted((workspace / "exports").glob("*/*.gguf"))
    assert len(found) == 1 and found[0].parent.name == f"{run_dir.name}-gguf-q4_0", found
    assert f"FROM ./{found[0].name}\n" in (found[0].parent / "Modelfile").read_text()
    reader = gguf.GGUFReader(found[0])
    types = {tensor.tensor_type.name for tensor in reader.tensors}
    assert "Q4_0" in types  # the type picked on the page
