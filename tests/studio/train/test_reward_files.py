"""A custom reward's file is given from the page: "Upload reward file" stores it in the workspace
(``WORKSPACE/rewards/``), adds its function to the rewards box and checks it, and a relative ``file:`` is read from
the workspace wherever the studio was started (it used to be read from the studio's own folder), as the field's help
and the error say. The demo, which refuses custom rewards, offers no upload."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import gradio as gr
import pytest
import yaml
from gradio.state_holder import SessionState

from engine.store.rundir import update_status
from engine.store.workspace import runs_dir
from engine.training.methods import METHODS
from studio.context import StudioContext
from studio.demo.caller import Caller
from studio.demo.policy import CUSTOM_REWARD_REFUSAL
from studio.i18n.catalog import text
from studio.i18n.widgets import marked
from studio.train import actions, starting
from studio.train import rewards as rw
from studio.train.reward_files import NO_FILE
from studio.train.tab import build_train_tab
from tests.helpers.pages import page_request
from tests.helpers.visitors import ALICE, DEMO

FIELD = rw.rewards_field(METHODS["grpo"])
GRPO_PRESET = actions.PRESETS_DIR / "demo-grpo.yaml"
SCORES_ANSWERS = (
    "def _helper(text):\n    return float(len(text))\n\n\n"
    "def answer_length(prompts, completions, answer, **kwargs):\n    return [_helper(a) for a in answer]\n\n\n"
    "def unused(prompts, completions, **kwargs):\n    return [0.0 for _ in completions]\n"
)


def grpo_values(workspace: Path, rewards: str | None = None) -> dict[str, Any]:
    values, message = actions.load_config_values(Caller(workspace), GRPO_PRESET)
    assert values is not None, message
    if rewards is not None:
        values[FIELD] = rewards
    return values


@pytest.fixture()
def uploads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Gradio's upload folder, where a browser's upload lands (a folder the studio may read)."""
    folder = tmp_path / "gradio"
    monkeypatch.setenv("GRADIO_TEMP_DIR", str(folder))
    return folder


def uploaded(uploads: Path, name: str, source: str) -> Path:
    """A file as Gradio leaves an upload: in a folder of its own under its upload folder."""
    path = uploads / f"upload-{len(list(uploads.glob('*')))}" / name
    path.parent.mkdir(parents=True)
    path.write_text(source, encoding="utf-8")
    return path


def call(blocks: gr.Blocks, name: str, args: list[Any], lang: str | None = None) -> list[Any]:
    fn = next(fn for fn in blocks.fns.values() if fn.name == name)
    request = page_request(lang) if lang else None
    return asyncio.run(blocks.process_api(fn, args, state=SessionState(blocks), request=request))["data"]


def build(workspace: Path, policy: Any = None) -> tuple[gr.Blocks, Any]:
    extra = {"policy": policy} if policy is not None else {}
    with gr.Blocks() as blocks:
        form = build_train_tab(StudioContext(workspace, gr.State(None), gr.Tabs(), visitor=gr.State(None), **extra))
    return blocks, form


# --- a relative file is read from the workspace ---------------------------------------------------------------


def test_a_relative_reward_file_is_read_from_the_workspace_not_the_folder_the_studio_started_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = tmp_path / "workspace"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "mine.py").write_text(SCORES_ANSWERS, encoding="utf-8")  # in the studio's cwd, not the workspace
    monkeypatch.chdir(elsewhere)
    box = "- {kind: custom, file: mine.py, function: answer_length}"
    result = actions.preview(Caller(workspace), grpo_values(workspace, box))
    missing = result.errors[f"{FIELD}.0"]
    root = workspace.resolve()
    assert missing == text(NO_FILE, "en", name="answer_length", file="mine.py", workspace=root)
    assert f"is not in the workspace ({root})" in missing and "Upload reward file" in missing
    in_japanese = actions.preview(Caller(workspace, language="ja"), grpo_values(workspace, box)).errors[f"{FIELD}.0"]
    assert in_japanese == text(NO_FILE, "ja", name="answer_length", file="mine.py", workspace=root)
    assert in_japanese != missing
    # Once the workspace holds it, the run gets the workspace's file by its full path, and starts.
    workspace.mkdir(exist_ok=True)
    (workspace / "mine.py").write_text(SCORES_ANSWERS, encoding="utf-8")
    started: list[Path] = []
    start = starting.start_run(Caller(workspace), grpo_values(workspace, box), started.append)
    assert start.errors == {} and start.run_dir is not None and started == [start.run_dir]
    saved = yaml.safe_load((start.run_dir / "config.yaml").read_text(encoding="utf-8"))
    assert saved["grpo"]["rewards"][0]["file"] == str(root / "mine.py")
    update_status(start.run_dir, state="completed")


def test_the_rewards_box_says_where_a_relative_file_is_read_from(tmp_path: Path) -> None:
    _, form = build(tmp_path / "workspace")
    assert str(form.components[FIELD].info) == str(marked("train.rewards.help"))
    assert "workspace" in text("train.rewards.help", "en") and "rewards/" in text("train.rewards.help", "en")


# --- the upload -------------------------------------------------------------------------------------------------


def test_an_uploaded_reward_file_is_stored_added_and_checked_through_the_page(tmp_path: Path, uploads: Path) -> None:
    workspace = tmp_path / "workspace"
    blocks, form = build(workspace)
    source = uploaded(uploads, "my_rewards.py", SCORES_ANSWERS)
    values = grpo_values(workspace)
    file_data = {"path": str(source), "orig_name": source.name, "meta": {"_type": "gradio.FileData"}}
    box, said = call(blocks, "on_reward_upload", [None, file_data, *(values[path] for path in form.paths)])
    assert (workspace / "rewards" / "my_rewards.py").read_text(encoding="utf-8") == SCORES_ANSWERS
    assert box.splitlines()[-1] == (
        "- {kind: custom, file: rewards/my_rewards.py, function: answer_length, weight: 1.0}"
    )
    assert said.startswith("Stored in the workspace as `rewards/my_rewards.py` (it defines answer_length, unused)")
    assert "✓ 3 rewards load and score the first rows: exact_match × 1, regex × 0.25, answer_length × 1" in said
    # The same file again is reused; another file of that name gets a name of its own.
    again, _ = rw.upload_reward_file(Caller(workspace), str(source), {**values, FIELD: box}, FIELD)
    assert again is not None and again.count("rewards/my_rewards.py") == 2
    other = uploaded(uploads, "my_rewards.py", SCORES_ANSWERS.replace("len(text)", "len(text) + 1"))
    third, note = rw.upload_reward_file(Caller(workspace, language="ko"), str(other), values, FIELD)
    assert third is not None and "file: rewards/my_rewards-1.py" in third
    assert note.startswith(
        text(
            "train.rewards.stored",
            "ko",
            file="rewards/my_rewards-1.py",
            function="answer_length",
            functions="answer_length, unused",
        )
    )
    assert sorted(path.name for path in (workspace / "rewards").iterdir()) == ["my_rewards-1.py", "my_rewards.py"]


def test_an_upload_that_is_no_reward_file_is_refused_and_stores_nothing(tmp_path: Path, uploads: Path) -> None:
    workspace = tmp_path / "workspace"
    values = grpo_values(workspace)
    cases = {
        "notes.txt": ("def f(prompts, completions, **kw):\n    return []\n", "is not a Python file"),
        "broken.py": ("def f(:\n", "broken.py is not valid Python: "),
        "empty.py": ("X = 1\n\ndef _private(**kw):\n    return []\n", "empty.py defines no function at its top level"),
    }
    for name, (source, why) in cases.items():
        box, said = rw.upload_reward_file(Caller(workspace), str(uploaded(uploads, name, source)), values, FIELD)
        assert box is None and said.startswith("✗ **The rewards cannot run**") and why in said, said
    assert not (workspace / "rewards").exists() or list((workspace / "rewards").iterdir()) == []
    # A box holding text that is no list keeps it: the file is stored and the user told to fix the box.
    kept, said = rw.upload_reward_file(
        Caller(workspace), str(uploaded(uploads, "ok.py", SCORES_ANSWERS)), {**values, FIELD: "words"}, FIELD
    )
    assert kept is None and "rewards/ok.py" in said and "should hold a YAML list of rewards" in said


def test_the_demo_offers_no_reward_upload_and_refuses_one(tmp_path: Path, uploads: Path) -> None:
    workspace = tmp_path / "workspace"
    blocks, form = build(workspace, DEMO)
    assert not any(fn.name == "on_reward_upload" for fn in blocks.fns.values())
    assert str(form.components[FIELD].info) != str(marked("train.rewards.help"))
    source = uploaded(uploads, "my_rewards.py", SCORES_ANSWERS)
    box, said = rw.upload_reward_file(Caller(workspace, DEMO, ALICE), str(source), grpo_values(workspace), FIELD)
    assert box is None and CUSTOM_REWARD_REFUSAL in said
    assert not (workspace / "rewards").exists() and runs_dir(workspace).is_dir() is False
