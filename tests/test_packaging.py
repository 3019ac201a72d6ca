"""What a Hugging Face Space installs (requirements.txt) is what pyproject.toml declares, and the README's front
matter starts launch.py with the Gradio the project needs."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

ROOT = Path(__file__).resolve().parents[1]


def requirement_lines() -> list[str]:
    lines = (ROOT / "requirements.txt").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.lstrip().startswith(("#", "-"))]


def test_space_requirements_match_the_package_dependencies() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert sorted(requirement_lines()) == sorted(declared)


def test_readme_front_matter_starts_the_studio_with_gradio_6() -> None:
    text = (ROOT / "README.md").read_text()
    front = yaml.safe_load(text.split("---")[1])
    assert front["sdk"] == "gradio" and front["app_file"] == "launch.py"
    assert (ROOT / front["app_file"]).is_file()
    assert str(front["sdk_version"]).split(".")[0] == "6"
