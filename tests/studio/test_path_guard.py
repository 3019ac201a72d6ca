"""Every path a browser can choose is confined: dataset, eval file, model, config to load, upload.

Allowed: the workspace, assets/, Gradio's upload folder, STUDIO_ALLOWED_PATHS; hub ids stay allowed. A refusal
names the field, never shows the file's content, starts nothing and writes nothing.
"""

from __future__ import annotations

import html
import os
from pathlib import Path
from typing import Any

import pytest

from engine import runs
from engine.config import ConfigError, RunConfig, parse_config, save_config
from engine.store.paths import PROJECT_ROOT
from studio.demo.caller import Caller
from studio.form.values import default_values
from studio.path_guard import ALLOWED_PATHS_ENV, allowed_roots, confine_images, guard_config, resolve_run
from studio.train import actions, starting
from studio.train import dataset as dp
from tests.helpers.side_effects import tree


@pytest.fixture
def places(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """A workspace with a dataset, a folder outside it with a 'secret' dataset, and Gradio's upload folder."""
    workspace, outside, uploads = tmp_path / "ws", tmp_path / "outside", tmp_path / "gradio"
    for folder in (workspace / "datasets", outside, uploads):
        folder.mkdir(parents=True)
    row = '{"instruction": "secret question", "output": "TOP-SECRET"}\n'
    (workspace / "datasets" / "mine.jsonl").write_text(row)
    (outside / "secret.jsonl").write_text(row)
    (uploads / "upload.jsonl").write_text(row)
    monkeypatch.setenv("GRADIO_TEMP_DIR", str(uploads))
    monkeypatch.delenv(ALLOWED_PATHS_ENV, raising=False)
    return {"workspace": workspace, "outside": outside, "uploads": uploads}


def problems(config: dict[str, Any], workspace: Path) -> dict[str, str]:
    """guard_config's problems by field ({} when the config passes)."""
    try:
        guard_config(parse_config(config), workspace)
    except ConfigError as exc:
        return exc.by_field()
    return {}


def test_allowed_places_pass(places: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    workspace = places["workspace"]
    assert problems({}, workspace) == {}  # the bundled demo model and dataset
    assert problems({"data": {"path": str(workspace / "datasets" / "mine.jsonl")}}, workspace) == {}
    assert problems({"data": {"path": str(places["uploads"] / "upload.jsonl")}}, workspace) == {}
    hub = {"model": {"name_or_path": "HuggingFaceTB/SmolLM2-135M"}, "data": {"path": "org/dataset"}}
    assert problems(hub, workspace) == {}
    monkeypatch.setenv(ALLOWED_PATHS_ENV, f"/nonexistent:{places['outside']}")
    assert problems({"data": {"path": str(places["outside"] / "secret.jsonl")}}, workspace) == {}
    assert allowed_roots(workspace)[-1] == places["outside"]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("data.path", "/etc/passwd"),
        ("data.path", "../../../../../../etc/hosts"),
        ("data.path", "assets/../../../../etc/hosts"),  # through the project-root fallback
        ("data.path", "assets/../launch.py"),  # in the project, but not in assets/
        ("data.eval_path", "/etc/passwd"),
        ("model.name_or_path", "/etc"),
        ("model.name_or_path", "../models/llama"),
        ("distill.teacher", "/etc"),  # a field marked as naming a model is confined as the base is
        ("distill.teacher", "../models/llama"),
    ],
)
def test_paths_elsewhere_are_refused_naming_the_field(places: dict[str, Path], field: str, value: str) -> None:
    section, name = field.split(".")
    found = problems({section: {name: value}}, places["workspace"])
    assert list(found) == [field] and "is outside the folders the studio may read" in found[field]


def test_a_symlink_out_of_the_workspace_is_refused(places: dict[str, Path]) -> None:
    workspace = places["workspace"]
    (workspace / "datasets" / "link.jsonl").symlink_to(places["outside"] / "secret.jsonl")
    found = problems({"data": {"path": str(workspace / "datasets" / "link.jsonl")}}, workspace)
    assert "is outside the folders" in found["data.path"]
    assert str(places["outside"]) not in found["data.path"].split("allowed:")[1]


def form(**changes: str) -> dict[str, Any]:
    values = default_values()
    values.update({key.replace("__", "."): value for key, value in changes.items()})
    return values


def test_handlers_refuse_without_reading_or_starting(places: dict[str, Path]) -> None:
    workspace, secret = places["workspace"], str(places["outside"] / "secret.jsonl")
    before = tree(workspace)
    check = dp.check_dataset(form(data__path=secret), with_tokens=True, workspace=workspace)
    shown = html.unescape(check.error)
    assert "data.path: " in shown and "outside the folders" in shown
    assert "TOP-SECRET" not in shown + check.summary + check.examples
    preview = actions.preview(Caller(workspace), form(data__eval_path=secret))
    assert "outside the folders" in preview.errors["data.eval_path"] and preview.command == ""
    calls: list[Path] = []
    started = starting.start_run(Caller(workspace), form(data__path=secret), calls.append)
    assert started.run_dir is None and calls == [] and "data.path" in started.errors
    assert tree(workspace) == before


def test_config_files_load_only_from_allowed_places(places: dict[str, Path]) -> None:
    workspace = places["workspace"]
    outside = places["outside"] / "evil.yaml"
    outside.write_text(RunConfig(name="evil").to_yaml())
    values, message = actions.load_config_values(Caller(workspace), outside)
    assert values is None and "config file: " in message and "outside the folders" in message
    values, message = actions.load_config_values(Caller(workspace), "/etc/passwd")
    assert values is None and "root:" not in message
    inside = workspace / "configs" / "mine.yaml"
    inside.parent.mkdir()
    inside.write_text(RunConfig(name="mine").to_yaml())
    assert actions.load_config_values(Caller(workspace), inside)[0]["name"] == "mine"
    preset = PROJECT_ROOT / "assets" / "presets" / "demo.yaml"
    assert actions.load_config_values(Caller(workspace), preset)[0] is not None


def test_uploads_come_from_gradios_folder_or_the_workspace(places: dict[str, Path]) -> None:
    workspace = places["workspace"]
    copied = dp.copy_upload(places["uploads"] / "upload.jsonl", workspace)
    assert copied == (workspace / "datasets" / "upload.jsonl").resolve()
    with pytest.raises(ValueError, match="upload: .* is outside the folders"):
        dp.copy_upload(places["outside"] / "secret.jsonl", workspace)
    assert not (workspace / "datasets" / "secret.jsonl").exists()


def test_saved_config_names_and_run_ids_cannot_leave_the_workspace(places: dict[str, Path]) -> None:
    workspace = places["workspace"]
    saved, _, message = actions.save_config_as(Caller(workspace), default_values(), "../../../evil")
    # A name with a path separator is refused (names become file names), so nothing lands outside the workspace.
    assert saved is None and "not usable" in message and "/" in message
    assert not list(places["workspace"].parent.rglob("evil.yaml"))
    for run_id in ("../outside", "..", "/etc", "../ws/datasets"):
        with pytest.raises(runs.RunError, match="is not a run id"):
            resolve_run(workspace, run_id)


def test_resolve_run_refuses_paths_outside_the_workspace(tmp_path: Path) -> None:
    (tmp_path / "runs" / "ok").mkdir(parents=True)
    save_config(parse_config({"name": "ok"}), tmp_path / "runs" / "ok" / "config.yaml")
    assert resolve_run(tmp_path, "ok").name == "ok"
    for bad in ("../ok", "ok/../../x", "/etc", "missing"):
        with pytest.raises(runs.RunError):
            resolve_run(tmp_path, bad)


def test_a_studio_writes_the_images_datasets_hold_into_its_workspace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Unless whoever started it chose a cache (STUDIO_IMAGE_CACHE), its runs and checks inherit the workspace's; a
    demo refuses images held inside the data."""
    for name in ("STUDIO_IMAGE_CACHE", "STUDIO_IMAGE_ROOTS", "STUDIO_EMBEDDED_IMAGES"):
        monkeypatch.delenv(name, raising=False)
    confine_images(tmp_path, demo=True)
    assert Path(os.environ["STUDIO_IMAGE_CACHE"]) == tmp_path.resolve() / "cache" / "images"
    assert os.environ["STUDIO_EMBEDDED_IMAGES"] == "refuse"  # a demo takes none (test_vision_preview.py)
    monkeypatch.setenv("STUDIO_IMAGE_CACHE", str(tmp_path / "chosen"))
    confine_images(tmp_path, demo=False)
    assert os.environ["STUDIO_IMAGE_CACHE"] == str(tmp_path / "chosen")
    assert "STUDIO_EMBEDDED_IMAGES" not in os.environ
