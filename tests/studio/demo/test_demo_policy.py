"""Demo mode's rules as plain functions: which configs a visitor may train, which paths they may name, which
config files load, and how demo mode is switched on."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import gradio as gr
import pytest
import yaml
from gradio.state_holder import SessionState
from starlette.requests import Request

import launch
from engine.config import parse_config
from studio.context import StudioContext
from studio.demo import policy as demo_policy
from studio.demo import queue as demo_queue
from studio.demo.caller import Caller
from studio.demo.ownership import owner_tag, owns
from studio.demo.policy import NORMAL, visitor_uploads
from studio.form.schema import leaf_specs
from studio.form.values import default_values
from studio.i18n.catalog import text
from studio.queue.words import place_text
from studio.train import actions, starting
from studio.train.tab import build_train_tab
from tests.helpers.visitors import ALICE, BOB, DEMO

CAP = DEMO.max_steps
VISITOR = ALICE


def demo_values(**changes: Any) -> dict[str, Any]:
    """The form as a fresh demo page shows it (the demo preset), with some fields changed (__ for dots)."""
    values = actions.starting_values()
    values.update({key.replace("__", "."): value for key, value in changes.items()})
    return values


def by_field(config_data: dict[str, Any], uploads: Path | None = None) -> dict[str, str]:
    return {p.field: p.message for p in DEMO.problems(parse_config(config_data), uploads)}


def test_outside_demo_mode_nothing_is_limited() -> None:
    config = parse_config({"model": {"name_or_path": "org/big"}, "quantization": {"mode": "4bit"}})
    assert NORMAL.problems(config) == []
    assert NORMAL.restrict_values({"model.name_or_path": "org/big"}, None) == ({"model.name_or_path": "org/big"}, [])


def test_the_demo_preset_is_allowed_as_it_is() -> None:
    assert actions.preview(Caller(Path("/tmp"), DEMO), demo_values()).errors == {}


def test_a_visitor_picks_among_the_bundled_models() -> None:
    """The vision-language demo model is one a visitor may train, as its preset does; nothing else is."""
    assert by_field({"model": {"name_or_path": "assets/demo-vlm"}, "train": {"max_steps": 50}}) == {}
    values = dict(demo_values(), **{"model.name_or_path": "assets/demo-vlm"})
    assert DEMO.restrict_values(values, None) == (values, [])  # kept as picked
    restricted, changed = DEMO.restrict_values({**values, "model.name_or_path": "assets/../assets/demo-vlm"}, None)
    assert changed == ["model.name_or_path"] and restricted["model.name_or_path"] == "assets/demo-model"
    offered = [Path(path).name for _, path in actions.config_files(Path("/tmp"), DEMO)]
    assert "demo-vlm.yaml" in offered


def test_a_visitors_teacher_is_none_a_bundled_model_or_one_of_their_runs() -> None:
    """Every field that names a model offers the bundled models alone, and one that names a run too the visitor's
    own runs by id: the teacher names no path on the server, and no other visitor's run."""
    distill = {"method": "distill", "train": {"max_steps": 50}}
    assert by_field({**distill, "distill": {"teacher": "assets/demo-vlm"}}) == {}
    refused = by_field({**distill, "distill": {"teacher": "/srv/other-visitor/run"}})
    bundled = "assets/demo-model, assets/demo-vlm"
    own = f"this demo takes only its bundled models or one of your own finished runs: {bundled}"
    assert refused == {"distill.teacher": own}  # "none" unsaid
    mine = {**distill, "distill": {"teacher": "20261130-120000-abcd-mine"}}
    assert DEMO.problems(parse_config(mine), own_runs=["20261130-120000-abcd-mine"]) == []
    assert by_field(mine) == {"distill.teacher": own}  # another visitor's run, or none at all
    values = demo_values(method="distill", **{"distill__teacher": "/srv/other-visitor/run"})
    restricted, changed = DEMO.restrict_values(values, None)
    assert changed == ["distill.teacher"] and restricted["distill.teacher"] == ""  # back to none
    assert DEMO.restrict_values(demo_values(), None)[1] == []  # no teacher, as a non-distill form has
    # A kept form's own run stays (the visitor's), another's goes back to none, and a path even if one's own.
    ours = demo_values(method="distill", **{"distill__teacher": "20261130-120000-abcd-mine"})
    assert DEMO.restrict_values(ours, None, lambda run_id: run_id.endswith("-mine"))[1] == []
    assert DEMO.restrict_values(ours, None, lambda run_id: False)[1] == ["distill.teacher"]
    path = demo_values(method="distill", **{"distill__teacher": "workspace/runs/20261130-120000-abcd-mine"})
    assert DEMO.restrict_values(path, None, lambda run_id: True)[1] == ["distill.teacher"]


def test_locked_fields_are_refused_by_name() -> None:
    problems = by_field(
        {
            "model": {"name_or_path": "org/big", "trust_remote_code": True},
            "quantization": {"mode": "4bit"},
            "launch": {"num_processes": 2},
            "train": {"max_steps": 10, "report_to": "wandb"},
        }
    )
    assert set(problems) == {
        "model.name_or_path",
        "model.trust_remote_code",
        "quantization.mode",
        "launch.num_processes",
        "train.report_to",
    }
    bundled = "assets/demo-model, assets/demo-vlm"
    assert problems["model.name_or_path"] == f"this demo trains only its bundled models: {bundled}"
    assert problems["launch.num_processes"].startswith("fixed to 1 in this demo")


@pytest.mark.parametrize(
    ("steps", "detail"),
    [(CAP + 1, f"{CAP + 1} asked"), (-1, "epoch-based runs (-1) are off")],  # 0: refused by the config itself
)
def test_steps_are_capped_and_epoch_runs_refused(steps: int, detail: str) -> None:
    problems = by_field({"train": {"max_steps": steps}})
    assert problems == {"train.max_steps": f"demo runs train at most {CAP} steps: set 1 to {CAP} ({detail})"}
    assert by_field({"train": {"max_steps": CAP}}) == {}


def test_memory_caps_are_refused_next_to_their_field() -> None:
    problems = by_field(
        {
            "train": {
                "max_steps": 5,
                "per_device_batch_size": 65,
                "max_length": 4096,
                "gradient_accumulation_steps": 9,
                "save_total_limit": None,
            }
        }
    )
    assert problems == {
        "train.per_device_batch_size": "the demo allows at most 64 here",
        "train.max_length": "the demo allows at most 1024 here",
        "train.gradient_accumulation_steps": "the demo allows at most 8 here",
        "train.save_total_limit": "the demo allows at most 3 here",
    }


def test_data_comes_from_the_bundled_sets_or_the_visitors_uploads(tmp_path: Path) -> None:
    uploads = visitor_uploads(tmp_path, DEMO, VISITOR)
    mine = uploads / "mine.jsonl"
    mine.parent.mkdir(parents=True)
    mine.write_text('{"text": "hi"}\n')
    elsewhere = tmp_path / "runs" / "someone" / "train.log"
    elsewhere.parent.mkdir(parents=True)
    elsewhere.write_text("secret\n")
    steps = {"max_steps": 5}
    assert by_field({"train": steps, "data": {"path": "assets/datasets/demo_sft_train.jsonl"}}, uploads) == {}
    assert by_field({"train": steps, "data": {"path": str(mine)}}, uploads) == {}
    message = "the demo trains on the bundled datasets or a file you upload"
    for path in (str(elsewhere), "/etc/passwd", "org/dataset", "assets/datasets/../../launch.py"):
        assert by_field({"train": steps, "data": {"path": path}}, uploads) == {"data.path": message}, path
    # Another visitor's upload is not yours.
    other = visitor_uploads(tmp_path, DEMO, BOB)
    assert by_field({"train": steps, "data": {"path": str(mine)}}, other) == {"data.path": message}
    assert by_field({"train": steps, "data": {"eval_path": "/etc/hosts"}}, uploads) == {"data.eval_path": message}


def test_preview_and_start_show_the_demo_refusal_next_to_the_field(tmp_path: Path) -> None:
    result = actions.preview(Caller(tmp_path, DEMO), demo_values(train__max_steps=5000))
    assert result.config is None
    assert result.errors == {"train.max_steps": f"demo runs train at most {CAP} steps: set 1 to {CAP} (5000 asked)"}
    started = starting.start_run(Caller(tmp_path, DEMO, VISITOR), demo_values(train__max_steps=-1))
    assert started.run_dir is None and "epoch-based runs (-1) are off" in started.errors["train.max_steps"]
    assert not (tmp_path / "runs").exists()


def test_restrict_values_forces_locked_fields_and_resets_foreign_data(tmp_path: Path) -> None:
    values = default_values()
    values.update({"model.name_or_path": "org/big", "quantization.mode": "4bit", "data.path": "/etc/passwd"})
    restricted, changed = DEMO.restrict_values(values, visitor_uploads(tmp_path, DEMO, VISITOR))
    assert changed == ["model.name_or_path", "quantization.mode", "data.path"]
    assert restricted["model.name_or_path"] == "assets/demo-model" and restricted["quantization.mode"] == "none"
    assert restricted["data.path"] == "assets/datasets/demo_sft_train.jsonl"


def test_configs_load_only_from_presets_or_uploads_and_come_back_restricted(tmp_path: Path) -> None:
    saved = tmp_path / "configs" / "mine.yaml"
    saved.parent.mkdir()
    saved.write_text("model:\n  name_or_path: org/big\n")
    presets = sorted(f"{actions.PRESET_LABEL} {path.stem}" for path in actions.PRESETS_DIR.glob("*.yaml"))
    assert presets and sorted(label for label, _ in actions.config_files(tmp_path, DEMO)) == presets  # none saved
    values, message = actions.load_config_values(Caller(tmp_path, DEMO), saved)
    assert values is None and "outside the folders the studio may read" in message
    preset = actions.PRESETS_DIR / "demo.yaml"
    values, message = actions.load_config_values(Caller(tmp_path, DEMO), preset)
    assert values is not None and message == "✓ Loaded `demo.yaml`"


def test_uploaded_config_is_restricted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRADIO_TEMP_DIR", str(tmp_path / "gradio"))
    upload = tmp_path / "gradio" / "abc" / "big.yaml"
    upload.parent.mkdir(parents=True)
    upload.write_text("model:\n  name_or_path: org/big\nlaunch:\n  num_processes: 4\n")
    values, message = actions.load_config_values(Caller(tmp_path, DEMO), upload)
    assert values is not None and values["model.name_or_path"] == "assets/demo-model"
    assert values["launch.num_processes"] == 1
    assert message == ("✓ Loaded `big.yaml` (set back to the demo's values: model.name_or_path, launch.num_processes)")


def test_nothing_is_saved_on_the_server_in_demo_mode(tmp_path: Path) -> None:
    saved, download, message = actions.save_config_as(Caller(tmp_path, DEMO), demo_values(), "mine")
    assert saved is None and download is None and "saves no configs on the server" in message
    assert not (tmp_path / "configs").exists()
    assert actions.model_choices(tmp_path, DEMO) == ["assets/demo-model", "assets/demo-vlm"]  # the bundled ones


def test_help_text_names_the_limit() -> None:
    specs = {spec.path: spec for spec in leaf_specs()}
    assert DEMO.help_for(specs["train.max_steps"]) == f"Optimizer steps to run: 1 to {CAP} in this demo."
    assert DEMO.help_for(specs["train.max_length"]).endswith("At most 1024 in this demo.")
    assert DEMO.help_for(specs["quantization.mode"]).endswith("Fixed in this demo.")
    assert NORMAL.help_for(specs["train.max_steps"]) == specs["train.max_steps"].help


def test_the_demos_words_are_said_in_the_visitors_language(tmp_path: Path) -> None:
    """A page in Korean gets the demo's field notes (with the demo's numbers) as it loads, and a Start refused for
    want of a visitor id in Korean; the notes and refusals as plain functions too. English stays English."""
    with gr.Blocks() as blocks:
        ctx = StudioContext(tmp_path, gr.State(None), gr.Tabs(), policy=DEMO, visitor=gr.State(None))
        form = build_train_tab(ctx)

    def run(name: str, args: list[Any], lang: str | None) -> list[Any]:
        fn = next(fn for fn in blocks.fns.values() if fn.name == name)
        headers = [(b"cookie", f"ts_lang={lang}".encode())] if lang else []
        request = Request({"type": "http", "method": "POST", "path": "/", "headers": headers, "query_string": b""})
        return asyncio.run(blocks.process_api(fn, args, state=SessionState(blocks), request=request))["data"]

    notes_fn = next(fn for fn in blocks.fns.values() if fn.name == "said")
    notes = dict(zip([block._id for block in notes_fn.outputs], run("said", [None], "ko"), strict=True))
    steps = notes[form.components["train.max_steps"]._id]["info"]
    assert steps == text(demo_policy.HELP_STEPS, "ko", cap=CAP) != text(demo_policy.HELP_STEPS, "en", cap=CAP)
    fixed = notes[form.components["quantization.mode"]._id]["info"]
    assert fixed.startswith(text("field.quantization.mode.help", "ko")) and fixed.endswith(
        text(demo_policy.HELP_FIXED, "ko")
    )
    assert not any("info" in note for note in run("said", [None], "en"))  # an English page keeps the notes as built
    start = run("on_start", [None, *(demo_values()[path] for path in form.paths)], "ko")[0]
    assert start == text(demo_queue.NO_VISITOR_KEY, "ko") != demo_queue.NO_VISITOR
    assert run("on_start", [None, *(demo_values()[path] for path in form.paths)], None)[0] == demo_queue.NO_VISITOR
    refused = {p.field: p.message for p in DEMO.problems(parse_config({"train": {"max_steps": -1}}), lang="ja")}
    epochs = text(demo_policy.STEPS_EPOCHS, "ja")
    assert refused["train.max_steps"] == text(demo_policy.STEPS_CAP, "ja", cap=CAP, detail=epochs)


def test_visitors_and_owners() -> None:
    assert DEMO.visitor(VISITOR) == VISITOR
    assert DEMO.visitor("short") is None and DEMO.visitor("../../etc/passwd-xxxxxxxx") is None
    assert DEMO.visitor(None) is None and DEMO.visitor(42) is None
    assert NORMAL.visitor(VISITOR) is None  # outside demo mode nobody in particular is looking
    tag = owner_tag(VISITOR)
    assert len(tag) == 32 and VISITOR not in tag
    assert owns(DEMO, tag, VISITOR) is True
    assert owns(DEMO, tag, BOB) is False
    assert owns(DEMO, None, VISITOR) is False and owns(DEMO, tag, None) is False
    assert owns(NORMAL, tag, None) is True


def test_place_in_line_reads_well() -> None:
    assert [place_text(n) for n in (0, 1, 2)] == ["yours is next", "1 run ahead of yours", "2 runs ahead of yours"]


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, False),
        ({"STUDIO_DEMO": "1"}, True),
        ({"SPACE_ID": "me/studio"}, True),
        ({"SPACE_ID": "me/studio", "STUDIO_DEMO": "0"}, False),
        ({"STUDIO_DEMO": "0"}, False),
    ],
)
def test_demo_mode_switch(env: dict[str, str], expected: bool) -> None:
    assert launch.demo_wanted(env) is expected


def test_demo_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("STUDIO_DEMO", "SPACE_ID"):
        monkeypatch.delenv(name, raising=False)
    assert launch.parser().parse_args([]).demo is False
    assert launch.parser().parse_args(["--demo"]).demo is True
    monkeypatch.setenv("SPACE_ID", "me/studio")
    assert launch.parser().parse_args([]).demo is True


def test_the_demo_preset_runs_in_demo_mode_as_it_is(tmp_path: Path) -> None:
    """A visitor presses Start on the preset the page opens with: it must pass the demo's caps unchanged."""
    assert actions.preview(Caller(tmp_path, DEMO), actions.starting_values()).errors == {}


@pytest.mark.parametrize("preset", sorted(actions.PRESETS_DIR.glob("*.yaml")), ids=lambda path: path.stem)
def test_every_preset_the_demo_offers_passes_it_as_it_is(preset: Path, tmp_path: Path) -> None:
    """The presets a visitor can load (the DPO and vision demos among them) train in demo mode unchanged, and
    every bundled preset is offered."""
    offered = {Path(path) for _, path in actions.config_files(tmp_path, DEMO)}
    problems = by_field(yaml.safe_load(preset.read_text()))
    assert (preset in offered) == (problems == {})
    assert preset in offered, problems


@pytest.mark.parametrize("method", ["dpo", "kto", "orpo"])
def test_preference_methods_meet_the_same_caps_and_locks(method: str) -> None:
    problems = by_field(
        {
            "method": method,
            "data": {"path": "assets/datasets/demo_dpo_train.jsonl"},
            "model": {"init_from": "someone-elses-run"},
            "quantization": {"mode": "4bit"},
            "train": {"max_steps": CAP + 1, "per_device_batch_size": 65},
        }
    )
    assert set(problems) == {
        "model.init_from",
        "quantization.mode",
        "train.max_steps",
        "train.per_device_batch_size",
    }
    allowed = {"method": method, "data": {"path": "assets/datasets/demo_dpo_train.jsonl"}, "train": {"max_steps": CAP}}
    assert by_field(allowed) == {}
