"""The command line refuses a chat template that would fill the memory: ``check`` before anything loads a model,
``train`` with the same pre-flight, before a run directory exists (the worker's own guard is tested in
test_template_guard.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from engine.store.paths import PROJECT_ROOT
from tests.helpers.engine_cli import run_check

pytestmark = pytest.mark.integration

MEMORY_BOMB = (
    "{% set ns = namespace(text='x') %}{% for i in range(40) %}{% set ns.text = ns.text + ns.text %}{% endfor %}"
    "{{ ns.text | length }}{% for message in messages %}{{ message['content'] }}{% endfor %}"
)


def refusal(rows: str) -> str:
    return f"data.chat_template: the chat template needs more than 256 MiB to render {rows} rows; simplify it"


def write_config(tmp_path: Path) -> Path:
    config = {"data": {"chat_template": MEMORY_BOMB, "eval_size": 0.1}, "train": {"max_steps": 2, "max_length": 64}}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


def test_check_refuses_the_template(tmp_path: Path) -> None:
    result = run_check(write_config(tmp_path), tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"error: {refusal('1,800')}" in result.stderr  # the training rows, as the check tokenizes them


def test_train_refuses_it_before_a_run_exists(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    result = subprocess.run(
        [sys.executable, "-m", "engine", "train", str(write_config(tmp_path)), "--run-dir", str(run_dir)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env=dict(os.environ, PYTHONPATH=str(PROJECT_ROOT), HF_HUB_OFFLINE="1"),
    )
    # train runs check's pre-flight: the same refusal, exit 2, and no run directory left behind
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"error: {refusal('1,800')}" in result.stderr
    assert not (run_dir / "status.json").exists()
