"""Access tokens come from the environment and never land in a config or in any file of a run directory."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from engine import runs
from engine.config import ConfigError, RunConfig, parse_config
from engine.store.paths import PROJECT_ROOT

FAKE_TOKENS = {
    "HF_TOKEN": "hf_FakeSecretForTheRunTest0123456789",
    "HUGGING_FACE_HUB_TOKEN": "hf_AnotherFakeSecret9876543210zyxw",
    "WANDB_API_KEY": "0123456789abcdef0123456789abcdeffa1ce0ff",
}


@pytest.fixture
def tokens_in_env(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    for name, value in FAKE_TOKENS.items():
        monkeypatch.setenv(name, value)
    return FAKE_TOKENS


@pytest.mark.parametrize(
    "config",
    [
        {"model": {"revision": "{HF_TOKEN}"}},
        {"data": {"placeholders": {"name": "key {WANDB_API_KEY} here"}}},
        {"data": {"placeholders": {"{HUGGING_FACE_HUB_TOKEN}": "x"}}},
        {"adapter": {"modules_to_save": ["lm_head", "{HF_TOKEN}"]}},
        {"name": "hf_SomeoneElsesTokenAbcdefghijklmnopqrst"},
    ],
)
def test_a_config_cannot_hold_a_token(tokens_in_env: dict[str, str], config: dict) -> None:
    text = yaml.safe_dump(config).format(**tokens_in_env)
    with pytest.raises(ConfigError) as caught:
        parse_config(yaml.safe_load(text))
    assert "token" in str(caught.value) and all(token not in str(caught.value) for token in tokens_in_env.values())


def test_a_config_may_hold_text_that_merely_resembles_one(tokens_in_env: dict[str, str]) -> None:
    commit = "0123456789abcdef0123456789abcdef01234567"  # a revision is often a 40-hex commit
    assert parse_config({"model": {"revision": commit}, "name": "hf_short"}).model.revision == commit


def demo_config(max_steps: int) -> RunConfig:
    """The bundled demo preset cut to a few small steps, with an eval and a checkpoint on the way."""
    data = yaml.safe_load((PROJECT_ROOT / "assets" / "presets" / "demo.yaml").read_text())
    data["data"].update(eval_path=None, eval_size=8)
    train = {"max_steps": max_steps, "per_device_batch_size": 4, "eval_steps": max_steps, "save_steps": 1}
    data["train"].update(train, logging_steps=1, report_to="none")
    return parse_config(data)


@pytest.mark.integration
def test_tokens_in_the_environment_never_reach_the_run_directory(tokens_in_env: dict[str, str], tmp_path: Path) -> None:
    run_dir = runs.create_run(demo_config(max_steps=2), workspace=tmp_path)
    runs.start(run_dir)  # as the studio starts a run: the process inherits this environment
    final = runs.wait(run_dir, timeout=300)
    assert final.state == "completed", final
    files = [path for path in tmp_path.rglob("*") if path.is_file()]
    names = {path.name for path in files}
    assert {"config.yaml", "status.json", "metrics.jsonl", "train.log", "adapter_model.safetensors"} <= names
    assert any(path.parent.name.startswith("checkpoint-") for path in files)
    leaks = [
        f"{path.relative_to(tmp_path)} holds ${name}"
        for path in files
        for name, token in tokens_in_env.items()
        if token.encode() in path.read_bytes()
    ]
    assert leaks == []
