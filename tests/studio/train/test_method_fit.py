"""Picking a method whose rules constrain a field of another section sets that field to what the rules take, as the
method's record says (Method.fits), and says so below the picker: GRPO picked with the demo preset's eval batch size
of 50 left "must be a multiple of grpo.num_generations (4)" in the collapsed Advanced group, where nobody saw it. An
error of a field in a collapsed group is said again beside Start, with where the field is."""

from __future__ import annotations

from typing import Any

import gradio as gr
import pytest

from engine.config import RunConfig
from engine.training.methods import METHODS
from studio.context import StudioContext
from studio.i18n.catalog import text
from studio.train import actions
from studio.train.method_fit import FITTED, fitted_values, loose_config
from studio.train.tab import build_train_tab
from tests.helpers.pages import call_event as call

MULTIPLE = "must be a multiple of grpo.num_generations (4): evaluation samples whole groups"


@pytest.fixture(scope="module")
def tab(tmp_path_factory: pytest.TempPathFactory) -> tuple[gr.Blocks, Any]:
    with gr.Blocks() as blocks:
        ctx = StudioContext(tmp_path_factory.mktemp("ws"), gr.State(None), gr.Tabs(), visitor=gr.State(None))
        form = build_train_tab(ctx)
    return blocks, form


def preset_with(**changes: Any) -> dict[str, Any]:
    """The demo preset the page opens with (eval batch size 50, evaluation on), with some fields changed."""
    values = actions.starting_values()
    values.update({path.replace("__", "."): value for path, value in changes.items()})
    return values


def test_a_sampling_method_fits_the_eval_batch_size_to_whole_groups() -> None:
    def config(**train: Any) -> RunConfig:
        processes = train.pop("processes", 1)
        generations = train.pop("generations", 4)
        return RunConfig.model_construct(
            **{
                **{name: getattr(RunConfig(), name) for name in RunConfig.model_fields},
                "method": "grpo",
                "train": RunConfig().train.model_copy(update=train),
                "launch": RunConfig().launch.model_copy(update={"num_processes": processes}),
                "grpo": RunConfig().grpo.model_copy(update={"num_generations": generations}),
            }
        )

    grpo = METHODS["grpo"]
    assert grpo.fitted(config(eval_batch_size=50)) == {"train.eval_batch_size": 48}  # down: less memory
    assert grpo.fitted(config(eval_batch_size=3)) == {"train.eval_batch_size": 4}  # at least one group
    assert grpo.fitted(config(eval_batch_size=48)) == {}
    # With 2 processes, 6 per process make 12 answers, whole groups of 4; 5 per process do not.
    assert grpo.fitted(config(eval_batch_size=6, processes=2)) == {}
    assert grpo.fitted(config(eval_batch_size=5, processes=2, generations=8)) == {"train.eval_batch_size": 4}
    assert METHODS["rloo"].fits and not METHODS["sft"].fits and METHODS["sft"].fitted(RunConfig()) == {}


def test_early_stopping_watches_a_metric_of_the_picked_method() -> None:
    """GRPO's eval loss is a policy loss, 0 whenever a group's answers score alike: with early stopping on, picking
    GRPO watches its eval reward, and picking SFT again its eval loss; off, or on a key no method lists, it stays."""

    def config(method: str, metric: str, patience: int | None = 3) -> RunConfig:
        stopping = RunConfig().train.early_stopping.model_copy(update={"metric": metric, "patience": patience})
        train = RunConfig().train.model_copy(update={"early_stopping": stopping, "eval_batch_size": 48})
        return RunConfig.model_construct(
            **{
                **{name: getattr(RunConfig(), name) for name in RunConfig.model_fields},
                "method": method,
                "train": train,
            }
        )

    watched = "train.early_stopping.metric"
    assert METHODS["grpo"].fitted(config("grpo", "eval_loss")) == {watched: "eval_reward"}
    assert METHODS["sft"].fitted(config("sft", "eval_reward")) == {watched: "eval_loss"}
    assert METHODS["rm"].fitted(config("rm", "eval_rewards/accuracies")) == {watched: "eval_loss"}
    assert METHODS["grpo"].fitted(config("grpo", "eval_loss", patience=None)) == {}
    assert METHODS["grpo"].fitted(config("grpo", "eval_completions/mean_length")) == {}
    assert METHODS["dpo"].fitted(config("dpo", "eval_rewards/accuracies")) == {}


def test_picking_grpo_with_early_stopping_on_watches_its_eval_reward(tab: Any) -> None:
    """On the page: the metric picker offers the methods' held-out metrics; picking GRPO with early stopping on
    sets it to eval_reward and says so, and eval_loss typed back is refused at the field by its rule."""
    blocks, form = tab
    picker = form.components["train.early_stopping.metric"]
    assert [value for _, value in picker.choices] == [
        "eval_loss",
        "eval_rewards/accuracies",
        "eval_reward",
        "eval_accuracy",
    ]
    values = preset_with(method="grpo", train__eval_batch_size=48, train__early_stopping__patience=3)
    out = call(blocks, "on_method_fit", [None, *(values[path] for path in form.paths)])
    assert dict(zip(form.paths, out[1:], strict=True))["train.early_stopping.metric"] == "eval_reward"
    assert out[0].startswith("✎ Set for grpo, whose rules need it: ") and "eval_loss → eval_reward" in out[0]
    errors = call(blocks, "on_change", [None, *(values[path] for path in form.paths)])
    slot = dict(zip(form.paths, errors[3:], strict=True))["train.early_stopping.metric"]
    assert slot["visible"] is True and "does not tell how well a grpo run does" in slot["value"], slot


def test_picking_grpo_sets_the_eval_batch_size_and_says_so(tab: Any) -> None:
    blocks, form = tab
    values = preset_with(method="grpo")
    assert values["train.eval_batch_size"] == 50
    out = call(blocks, "on_method_fit", [None, *(values[path] for path in form.paths)])
    fields = dict(zip(form.paths, out[1:], strict=True))
    assert fields["train.eval_batch_size"] == 48
    assert all(update == {"__type__": "update"} for path, update in fields.items() if path != "train.eval_batch_size")
    assert out[0] == "✎ Set for grpo, whose rules need it: Eval batch size 50 → 48."
    assert out[0] == text(FITTED, "en", method="grpo", changes="Eval batch size 50 → 48")
    # The fitted form has no error left at the eval batch size.
    fitted = {**values, "train.eval_batch_size": 48}
    errors = call(blocks, "on_change", [None, *(fitted[path] for path in form.paths)])
    assert dict(zip(form.paths, errors[3:], strict=True))["train.eval_batch_size"]["visible"] is False
    # Said in the page's language; nothing to say for a method without fits, or when the size already fits.
    japanese = call(blocks, "on_method_fit", [None, *(values[path] for path in form.paths)], lang="ja")[0]
    assert japanese == text(
        FITTED, "ja", method="grpo", changes=f"{text('field.train.eval_batch_size.label', 'ja')} 50 → 48"
    )
    assert japanese != out[0]
    for quiet in (preset_with(method="sft"), fitted):
        assert call(blocks, "on_method_fit", [None, *(quiet[path] for path in form.paths)])[0] == ""


def test_a_form_that_cannot_be_read_fits_nothing() -> None:
    assert loose_config(preset_with(method="grpo", train__learning_rate="many")) is None
    assert fitted_values(preset_with(method="grpo", train__learning_rate=-1)) == ({}, "")
    assert fitted_values(preset_with(method="no-such-method")) == ({}, "")


def test_an_error_in_a_collapsed_group_is_said_beside_start(tab: Any) -> None:
    blocks, form = tab
    assert form.collapsed["train.eval_batch_size"] == ("train.training", "form.advanced")
    assert form.collapsed["quantization.mode"] == ("field.quantization.label",)  # a section that starts closed
    assert "train.learning_rate" not in form.collapsed and "method" not in form.collapsed
    values = preset_with(method="grpo")  # eval batch size 50, not fitted
    out = call(blocks, "on_change", [None, *(values[path] for path in form.paths)])
    slots = dict(zip(form.paths, out[3:], strict=True))
    assert slots["train.eval_batch_size"]["visible"] is True  # in its slot, inside the closed group
    assert f"⚠ Training › Advanced › Eval batch size: {MULTIPLE}  " in out[2].splitlines()
    assert "grpo.rewards" not in out[2]  # a field in sight is not said twice
    japanese = call(blocks, "on_change", [None, *(values[path] for path in form.paths)], lang="ja")[2]
    where = " › ".join(text(name, "ja") for name in ("train.training", "form.advanced"))
    assert f"⚠ {where} › {text('field.train.eval_batch_size.label', 'ja')}: " in japanese


def test_start_says_an_error_of_a_collapsed_field_beside_it(tab: Any) -> None:
    blocks, form = tab
    values = preset_with(method="grpo", grpo__rewards="- {kind: exact_match}")
    out = call(blocks, "on_start", [None, *(values[path] for path in form.paths)])
    assert out[0].startswith("✗ Not started")
    assert f"⚠ Training › Advanced › Eval batch size: {MULTIPLE}  " in out[1].splitlines()
