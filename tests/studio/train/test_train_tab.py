"""The Train tab's handlers as plain functions, its Gradio wiring, and one real start."""

from __future__ import annotations

import asyncio
import html
import json
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import gradio as gr
import pytest
import yaml
from gradio.state_holder import SessionState

from engine import runs
from engine.config import RunConfig
from engine.store.paths import PROJECT_ROOT
from engine.store.rundir import update_status
from engine.store.workspace import runs_dir
from studio.context import StudioContext
from studio.demo.caller import Caller
from studio.form.values import config_to_values, default_values
from studio.i18n.catalog import text, translations
from studio.train import actions, starting
from studio.train import dataset as dp
from studio.train.tab import build_train_tab
from tests.helpers.pages import page_request


def values(**changes: Any) -> dict[str, Any]:
    """Default widget values with some fields changed (dotted paths written with __ for dots)."""
    result = default_values()
    result.update({key.replace("__", "."): value for key, value in changes.items()})
    return result


def run_dirs(workspace: Path) -> list[Path]:
    root = runs_dir(workspace)
    return sorted(root.iterdir()) if root.is_dir() else []


def fake_launcher(calls: list[Path]) -> Any:
    """Stands in for engine.runs.start: records the call and marks the run starting (as start does)."""

    def launch(run_dir: Path, *_checkpoint: Any, **_devices: Any) -> int:
        calls.append(run_dir)
        time.sleep(0.2)  # widen the window a second click could slip through
        update_status(run_dir, state="starting", supervisor_pid=None)
        return 0

    return launch


# --- building -----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tab(tmp_path_factory: pytest.TempPathFactory) -> tuple[gr.Blocks, Any, StudioContext]:
    with gr.Blocks() as demo:
        ctx = StudioContext(tmp_path_factory.mktemp("ws"), gr.State(None), gr.Tabs(), visitor=gr.State(None))
        form = build_train_tab(ctx)
    return demo, form, ctx


def test_tab_builds_every_config_field(tab: Any) -> None:
    _, form, _ = tab
    assert set(form.components) == set(form.paths) and len(form.paths) > 60
    assert isinstance(form.components["model.name_or_path"], gr.Dropdown)  # the model combo box


def test_studio_modules_do_not_import_the_training_stack() -> None:
    code = (
        "import sys, gradio as gr; from pathlib import Path; import tempfile\n"
        "from studio.context import StudioContext; from studio.train.tab import build_train_tab\n"
        "with gr.Blocks():\n"
        "    visitor = gr.State(None)\n"
        "    build_train_tab(StudioContext(Path(tempfile.mkdtemp()), gr.State(None), gr.Tabs(), visitor=visitor))\n"
        "heavy = {'torch', 'transformers', 'trl', 'peft', 'bitsandbytes', 'datasets'} & set(sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=PROJECT_ROOT, check=True, timeout=120)


def call(
    demo: gr.Blocks, name: str, args: list[Any], state: SessionState | None = None, lang: str | None = None
) -> list[Any]:
    """Run one event the way the server does (preprocess, fn, postprocess), without a browser; ``lang``: the
    language of the page that asks (its ts_lang cookie, studio.i18n)."""
    fn = next(fn for fn in demo.fns.values() if fn.name == name)
    request = page_request(lang) if lang else None
    return asyncio.run(demo.process_api(fn, args, state=state or SessionState(demo), request=request))["data"]


def test_a_message_is_said_in_the_language_of_the_page(tmp_path: Path) -> None:
    """A saved config that cannot load: the studio's words in the page's language, the YAML's own error as it is."""
    broken = tmp_path / "configs" / "broken.yaml"
    broken.parent.mkdir()
    broken.write_text("model: [unclosed\n", encoding="utf-8")
    with gr.Blocks() as demo:
        form = build_train_tab(StudioContext(tmp_path, gr.State(None), gr.Tabs(), visitor=gr.State(None)))
    chinese = call(demo, "on_load", [None, str(broken)], lang="zh-CN")[0]
    heading = text(actions.CANNOT_LOAD, "zh-CN", name="broken.yaml")
    assert heading != text(actions.CANNOT_LOAD, "en", name="broken.yaml")  # a translation, not the English
    why = translations("zh-CN")[actions.BAD_YAML].split("{at}")[0].format(name="broken.yaml")  # before the place
    assert chinese.startswith(heading) and why in html.unescape(chinese)
    english = call(demo, "on_load", [None, str(broken)])[0]
    assert english.startswith("✗ Cannot load `broken.yaml`:") and "is not valid YAML (line 2" in english
    # The dataset panel's table heads its columns in the page's language too.
    path_box = form.components["data.path"]
    show = next(fn for fn in demo.fns.values() if (path_box._id, "change") in fn.targets and len(fn.outputs) == 3)
    two = "[{path: assets/datasets/demo_sft_train.jsonl}, {path: assets/datasets/demo_preference.jsonl}]"
    table = asyncio.run(demo.process_api(show, [None, two], state=SessionState(demo), request=page_request("ja")))[
        "data"
    ][0]
    assert table["headers"] == [
        "#",
        *(text(name, "ja") for name in ("train.list.dataset", "train.list.weight", "train.list.max_samples")),
    ]
    assert table["data"][0][3] == text("train.list.all", "ja")


def test_out_of_range_number_shows_its_error_next_to_the_field(tab: Any) -> None:
    demo, form, _ = tab
    widget = values(train__learning_rate=-1, adapter__r=0)  # below the Number widgets' minimum
    out = call(demo, "on_change", [None, *(widget[path] for path in form.paths)])  # no visitor: not a demo
    slots = dict(zip(form.paths, out[3:], strict=True))
    assert (
        slots["train.learning_rate"]["visible"] is True and "must be &gt; 0.0" in slots["train.learning_rate"]["value"]
    )
    assert slots["adapter.r"]["visible"] is True
    assert slots["train.max_steps"]["visible"] is False
    long_name = call(demo, "on_change", [None, *(values(name="n" * 300)[path] for path in form.paths)])
    name_slot = dict(zip(form.paths, long_name[3:], strict=True))["name"]
    assert name_slot["visible"] is True and "too long: 300 characters, at most 120" in name_slot["value"]
    assert out[0].startswith("# The form has problems") and "train.learning_rate" in out[0]
    ok = call(demo, "on_change", [None, *(default_values()[path] for path in form.paths)])
    assert ok[0].startswith("name: null") and ok[1].startswith("python -m engine train config.yaml --run-dir")


def test_start_through_gradio_sets_the_current_run_and_shows_the_monitor(tab: Any, monkeypatch: Any) -> None:
    demo, form, ctx = tab
    calls: list[Path] = []
    monkeypatch.setattr(runs, "start", fake_launcher(calls))
    state = SessionState(demo)
    out = call(demo, "on_start", [None, *(values(name="wired")[path] for path in form.paths)], state)
    assert len(calls) == 1 and state[ctx.current_run._id] == str(calls[0])
    assert out[-2] == {"selected": "monitor", "__type__": "update"}
    assert out[-1]["interactive"] is True  # Start is enabled again by the same answer
    update_status(calls[0], state="completed")  # free the workspace for the other tests using it


def test_start_is_enabled_again_after_a_crash_of_its_handler(tab: Any) -> None:
    """on_start's answer enables Start again; should the handler raise, a failure event does it instead."""
    demo, _, _ = tab
    start = next(fn for fn in demo.fns.values() if fn.name == "on_start")
    after = [fn for fn in demo.fns.values() if fn.trigger_after == start._id]
    assert [fn.trigger_only_on_failure for fn in after] == [True]  # nothing else waits for on_start
    (button,) = after[0].outputs
    assert button is start.outputs[-1] and after[0].fn()["interactive"] is True


def test_a_new_start_clears_the_last_answer_at_once(tab: Any) -> None:
    """The click's first event, answered without the queue, empties the message and problems of the last Start: a
    refusal left on screen would read as this start's answer while the form is checked."""
    demo, _, _ = tab
    start = next(fn for fn in demo.fns.values() if fn.name == "on_start")
    first = demo.fns[start.trigger_after]
    message, problems = start.outputs[:2]  # where on_start says what happened
    assert not first.queue and {message, problems} <= set(first.outputs)
    data = asyncio.run(demo.process_api(first, [], state=SessionState(demo)))["data"]
    shown = dict(zip(first.outputs, data, strict=True))
    assert shown[message] == shown[problems] == ""
    assert shown[start.outputs[-1]]["interactive"] is False  # and Start is busy


def test_unknown_target_module_is_refused_at_start_next_to_the_field(tab: Any, monkeypatch: Any) -> None:
    demo, form, ctx = tab
    calls: list[Path] = []
    monkeypatch.setattr(runs, "start", fake_launcher(calls))
    before = run_dirs(ctx.workspace)  # the module's workspace is shared with the other tests of the tab
    widget = values(name="typo", adapter__target_modules="q_proj, foo")
    out = call(demo, "on_start", [None, *(widget[path] for path in form.paths)], SessionState(demo))
    assert calls == [] and run_dirs(ctx.workspace) == before
    slot = next(item for item in out if isinstance(item, dict) and "no module foo" in str(item.get("value")))
    assert slot["visible"] is True and "q_proj" in slot["value"] and "gate_proj" in slot["value"]


# --- preview, start -------------------------------------------------------------------------------------------


def test_preview_shows_yaml_and_command_or_the_errors(tmp_path: Path) -> None:
    good = actions.preview(Caller(tmp_path), values(name="my run"))
    assert "name: my run" in good.yaml and not good.errors
    assert good.command == f"python -m engine train config.yaml --run-dir {tmp_path}/runs/my-run"
    bad = actions.preview(Caller(tmp_path), values(train__learning_rate=0))
    assert bad.errors == {"train.learning_rate": "must be > 0.0"} and bad.config is None


def test_invalid_form_starts_nothing(tmp_path: Path) -> None:
    calls: list[Path] = []
    result = starting.start_run(Caller(tmp_path), values(train__per_device_batch_size=0), fake_launcher(calls))
    assert result.run_dir is None and "train.per_device_batch_size" in result.errors
    assert calls == [] and run_dirs(tmp_path) == []


def test_bad_dataset_starts_nothing_and_names_the_row(tmp_path: Path) -> None:
    data = tmp_path / "bad.jsonl"
    data.write_text('{"instruction": "a", "output": "b"}\n{"instruction": "c", "output": ""}\n')
    calls: list[Path] = []
    result = starting.start_run(Caller(tmp_path), values(data__path=str(data)), fake_launcher(calls))
    assert result.run_dir is None and "row 2" in result.data_error
    assert calls == [] and run_dirs(tmp_path) == []


def test_target_modules_are_matched_as_peft_matches_them_at_start(tmp_path: Path) -> None:
    calls: list[Path] = []
    bad = starting.start_run(Caller(tmp_path), values(adapter__target_modules="foo,mlp"), fake_launcher(calls))
    message = bad.errors["adapter.target_modules"]
    # mlp is a module but not a layer LoRA can adapt; the choices are the linear layers' names.
    assert "no module foo, mlp that LoRA can adapt" in message
    assert "down_proj, gate_proj, k_proj, o_proj, q_proj, up_proj, v_proj" in message
    assert bad.run_dir is None and calls == [] and run_dirs(tmp_path) == []
    good = starting.start_run(
        Caller(tmp_path), values(adapter__target_modules="q_proj, self_attn.v_proj"), fake_launcher(calls)
    )
    assert good.errors == {} and good.run_dir is not None and calls == [good.run_dir]


def test_double_click_starts_one_run_and_queues_the_other(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STUDIO_DEVICES", "cpu")  # one run at a time, on any machine
    calls: list[Path] = []
    launcher = fake_launcher(calls)
    results: list[starting.StartResult] = []
    form = values(name="twice")
    threads = [
        threading.Thread(target=lambda: results.append(starting.start_run(Caller(tmp_path), form, launcher)))
        for _ in "ab"
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(run_dirs(tmp_path)) == 2 and len(calls) == 1
    started, queued = sorted((result.message for result in results), key=lambda message: "queued" in message)
    assert started == "▶ Started `twice`"
    assert queued == "⧖ `twice` is queued: 1 run ahead of yours. It starts by itself; follow it on the Monitor."


def test_start_on_a_busy_machine_queues_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STUDIO_DEVICES", "cpu")
    busy = runs.create_run(RunConfig(name="busy"), workspace=tmp_path)
    # A live process whose command line names the engine, as a real supervisor's does.
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "engine"])
    try:
        update_status(busy, state="running", supervisor_pid=sleeper.pid)
        calls: list[Path] = []
        result = starting.start_run(Caller(tmp_path), values(), fake_launcher(calls))
        assert result.run_dir is not None and calls == []
        assert "is queued: 1 run ahead of yours. It starts by itself" in result.message
        assert runs.status(result.run_dir).state == "queued"
    finally:
        sleeper.kill()
        sleeper.wait()
    assert sorted(run_dirs(tmp_path)) == sorted([busy, result.run_dir])


# --- dataset panel ----------------------------------------------------------------------------------------------


def test_dataset_check_of_the_demo_set_marks_the_loss(tmp_path: Path) -> None:
    check = dp.check_dataset(values(), with_tokens=True, num_examples=2)
    assert check.error == "" and check.format == "conversational"
    assert "`conversational`" in check.summary and "carry loss" in check.summary
    assert check.examples.count('class="ts-example"') == 2
    first_row = json.loads((PROJECT_ROOT / "assets" / "datasets" / "demo_sft_train.jsonl").read_text().split("\n")[0])
    answer = first_row["messages"][-1]["content"]
    assert '<mark class="ts-loss"' in check.examples and answer in check.examples
    assert '<span class="ts-prompt"' in check.examples and "&lt;|user|&gt;" in check.examples  # escaped


def test_dataset_check_shows_a_preference_rows_answers_side_by_side() -> None:
    data = "assets/datasets/demo_dpo_train.jsonl"
    check = dp.check_dataset(values(method="dpo", data__path=data), with_tokens=True, num_examples=2)
    assert check.error == "" and check.format == "preference"
    cards = check.examples.split('class="ts-example"')[1:]
    assert len(cards) == 2  # two rows, each one card
    first = json.loads((PROJECT_ROOT / data).read_text().split("\n")[0])
    good, bad = (html.escape(first[side][0]["content"]) for side in ("chosen", "rejected"))
    chosen, rejected = cards[0].split('data-side="rejected"')
    assert 'data-side="chosen"' in chosen and good in chosen
    assert bad in rejected and good not in rejected
    assert "grid-template-columns:repeat(2," in cards[0]  # beside each other


def test_dataset_check_names_the_bad_row(tmp_path: Path) -> None:
    data = tmp_path / "bad.jsonl"
    rows = [{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}] * 3
    rows.append({"messages": [{"role": "user", "content": "hi"}]})
    data.write_text("\n".join(json.dumps(row) for row in rows))
    check = dp.check_dataset(values(data__path=str(data)), with_tokens=False, workspace=tmp_path)
    assert "row 4" in check.error and check.summary == ""
    missing = dp.check_dataset(values(data__path=str(tmp_path / "nope.jsonl")), with_tokens=False, workspace=tmp_path)
    assert "not found" in missing.error


def test_dataset_check_ignores_fields_it_does_not_need_but_reports_its_own() -> None:
    assert dp.check_dataset(values(train__learning_rate=-1), with_tokens=False).error == ""
    assert "data.eval_size" in dp.check_dataset(values(data__eval_size=-1), with_tokens=False).error


def test_upload_is_copied_into_the_workspace(tmp_path: Path) -> None:
    upload = tmp_path / "ws" / "upload" / "mine.jsonl"  # uploads are read from the allowed folders only
    upload.parent.mkdir(parents=True)
    upload.write_text('{"text": "hello"}\n')
    first = dp.copy_upload(upload, tmp_path / "ws")
    assert first == (tmp_path / "ws" / "datasets" / "mine.jsonl").resolve() and first.read_text() == upload.read_text()
    assert dp.copy_upload(upload, tmp_path / "ws") == first  # same content: reused
    upload.write_text('{"text": "other"}\n')
    assert dp.copy_upload(upload, tmp_path / "ws").name == "mine-1.jsonl"
    with pytest.raises(ValueError, match="unsupported file type"):
        dp.copy_upload(tmp_path / "x.exe", tmp_path / "ws")
    assert "assets/datasets/demo_sft_train.jsonl" in dp.bundled_datasets()


# --- config files, recent models, estimate -----------------------------------------------------------------


def test_save_and_load_round_trip(tmp_path: Path) -> None:
    form = values(name="saved-run", train__learning_rate=0.001, adapter__target_modules="q_proj, v_proj")
    saved, download, message = actions.save_config_as(Caller(tmp_path), form, "my config")
    assert saved == tmp_path / "configs" / "my-config.yaml" and "Saved" in message
    assert download is not None and download.read_text() == saved.read_text()
    loaded, message = actions.load_config_values(Caller(tmp_path), saved)
    assert loaded == config_to_values(actions.values_to_config(form)) and "Loaded" in message
    # The labels' words are keys the page translates ("saved:", "preset:").
    assert (f"{actions.SAVED_LABEL} my-config", str(saved)) in actions.config_files(tmp_path)
    assert any(label == f"{actions.PRESET_LABEL} demo" for label, _ in actions.config_files(tmp_path))
    assert actions.save_config_as(Caller(tmp_path), values(train__seed=-1), "x")[0] is None
    for bad in ("n" * 300, "nul\x00byte"):  # once a crash in the file system ("File name too long")
        saved, download, message = actions.save_config_as(Caller(tmp_path), form, bad)
        assert (saved, download) == (None, None) and message.startswith("✗ Not saved: the name is not usable: ")
    assert sorted(path.name for path in (tmp_path / "configs").iterdir()) == ["my-config.yaml"]


def test_bad_yaml_and_bad_config_files_give_a_message(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("train: {learning_rate: [1, 2\n")
    loaded, message = actions.load_config_values(Caller(tmp_path), broken)
    assert loaded is None and "not valid YAML (line" in message
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text("train:\n  learning_rate: -1\n  lerning: 2\n")
    loaded, message = actions.load_config_values(Caller(tmp_path), wrong)
    assert loaded is None and "train.learning_rate: must be &gt; 0.0" in message and "did you mean" in message


def test_presets_load_into_the_form() -> None:
    preset = PROJECT_ROOT / "assets" / "presets" / "demo.yaml"
    loaded, _ = actions.load_config_values(None, preset)
    steps = yaml.safe_load(preset.read_text())["train"]["max_steps"]
    assert loaded is not None and loaded["train.max_steps"] == steps and loaded["data.eval_path"].endswith(".jsonl")


def test_recent_models_are_remembered_most_recent_first(tmp_path: Path) -> None:
    bundled = ["assets/demo-model", "assets/demo-vlm"]
    assert actions.model_choices(tmp_path) == bundled
    actions.remember_model(tmp_path, "org/a")
    actions.remember_model(tmp_path, "/models/b")
    actions.remember_model(tmp_path, "org/a")
    assert actions.recent_models(tmp_path) == ["org/a", "/models/b"]
    assert (tmp_path / "studio" / "recent_models.json").is_file()
    assert actions.model_choices(tmp_path) == [*bundled, "org/a", "/models/b"]


def test_estimate_counts_the_demo_models_parameters() -> None:
    import math

    from safetensors import safe_open

    from studio.train.estimate import estimate_run

    # The base's count: every tensor of the saved model (embeddings tied, so stored once).
    with safe_open(str(PROJECT_ROOT / "assets" / "demo-model" / "model.safetensors"), "pt") as weights:
        base = sum(math.prod(weights.get_slice(name).get_shape()) for name in weights.keys())  # noqa: SIM118
    result = estimate_run(RunConfig())
    found = re.search(r"([\d,]+) trainable of ([\d,]+) parameters", result.markdown)
    assert not result.errors and found, result.markdown
    trainable, total = (int(group.replace(",", "")) for group in found.groups())
    assert trainable > 0 and total == base + trainable  # LoRA adds its weights to the base
    assert re.search(r"\*\*Predicted peak memory per device\*\* \d+\.\d\d GB \(CPU RSS; weights", result.markdown)


# --- one real run ----------------------------------------------------------------------------------------------


@pytest.mark.integration
def test_start_runs_a_real_two_step_run(tmp_path: Path) -> None:
    form = values(name="two-steps", train__max_steps=2, train__max_length=64, train__save_strategy="no")
    result = starting.start_run(Caller(tmp_path), form)
    assert result.run_dir is not None, result.message
    final = runs.wait(result.run_dir, timeout=180)
    assert final.state == "completed", final
    assert final.step == 2 and (result.run_dir / "adapter").is_dir()
    assert actions.recent_models(tmp_path) == ["assets/demo-model"]


def test_saved_configs_are_listed_again_on_every_page_load(tab: Any) -> None:
    """A config saved after the server started (an earlier page life, another tab) is in the list after a reload:
    the Train tab reads the list at page load, not once when the page is built."""
    demo, _, ctx = tab
    choice = next(c for c in demo.blocks.values() if isinstance(c, gr.Dropdown) and c.elem_id == "train-config-choice")
    loads = [f for f in demo.fns.values() if ("load" in [e for _, e in f.targets]) and choice in f.outputs]
    assert len(loads) == 1, "one page-load event refreshes the saved configs"
    saved, _, message = actions.save_config_as(Caller(ctx.workspace), values(), "saved-after-build")
    assert saved is not None, message
    assert not any("saved-after-build" in str(entry) for entry in choice.choices)  # built before it existed
    refreshed = loads[0].fn()
    assert any(value == str(saved) or "saved-after-build" in str(value) for _, value in refreshed["choices"])
